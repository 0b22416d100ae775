package io.kvgate.perf.ingest;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.perf.index.IndexFixtures;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Lookup latency (128-block prompt, 64 endpoints) idle vs while one thread ingests at full speed into the same
 * index (decode + apply of store/remove batches that touch the very prompts being looked up, endpoint 63).
 * {@code idle} and the {@code loaded} group run in the same JMH run on identical populations; compare
 * {@code idle} p99 with {@code loaded:lookup} p99 (group names).
 */
@State(Scope.Group)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 2)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class LookupUnderIngestBenchmark {
    static final int ENDPOINTS = 64;
    static final int BLOCKS = 128;
    static final int PROMPTS = 64;

    BlockIndex index;
    long[][] prompts;
    int[] endpoints;
    byte[][] storePayloads;
    byte[][] removePayloads;

    @Setup(Level.Trial)
    public void setUp() {
        SplittableRandom rnd = new SplittableRandom(42);
        index = new BlockIndex(BlockIndexConfig.of(1_000_000 + PROMPTS * BLOCKS * 2, ENDPOINTS));
        prompts = new long[PROMPTS][];
        for (int p = 0; p < PROMPTS; p++) {
            prompts[p] = IndexFixtures.chain(rnd, BLOCKS);
        }
        IndexFixtures.populate(index, prompts, ENDPOINTS - 1, "mixed", 1_000_000, rnd);
        endpoints = new int[ENDPOINTS];
        for (int e = 0; e < ENDPOINTS; e++) {
            endpoints[e] = e;
        }
        storePayloads = new byte[PROMPTS][];
        removePayloads = new byte[PROMPTS][];
        for (int p = 0; p < PROMPTS; p++) {
            storePayloads[p] = Payloads.stored(prompts[p], 4, 32, 16, rnd);
            removePayloads[p] = Payloads.removed(prompts[p], BLOCKS);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        index.close();
    }

    @State(Scope.Thread)
    public static class Reader {
        BlockIndexReader reader;
        int[] out = new int[ENDPOINTS];
        int cursor;

        @Setup(Level.Trial)
        public void setUp(LookupUnderIngestBenchmark s) {
            reader = s.index.newReader();
        }
    }

    @State(Scope.Thread)
    public static class Writer implements KvEventHandler {
        BlockIndex index;
        KvEventDecoder decoder;
        int cursor;

        @Setup(Level.Trial)
        public void setUp(LookupUnderIngestBenchmark s) {
            index = s.index;
            decoder = new KvEventDecoder(this);
        }

        @Override
        public void onBlockStored(BlockStoredEvent e) {
            for (int i = 0; i < e.blockCount(); i++) {
                index.stored(ENDPOINTS - 1, 0, e.blockKeys()[i]);
            }
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
            for (int i = 0; i < e.blockCount(); i++) {
                index.removed(ENDPOINTS - 1, 0, e.blockKeys()[i]);
            }
        }

        @Override
        public void onAllBlocksCleared() {
        }
    }

    @Benchmark
    @Group("idle")
    @GroupThreads(1)
    public int[] idleLookup(Reader r) {
        r.reader.longestPrefix(prompts[r.cursor++ & (PROMPTS - 1)], BLOCKS, endpoints, ENDPOINTS, r.out, null);
        return r.out;
    }

    @Benchmark
    @Group("loaded")
    @GroupThreads(1)
    public int[] lookup(Reader r) {
        r.reader.longestPrefix(prompts[r.cursor++ & (PROMPTS - 1)], BLOCKS, endpoints, ENDPOINTS, r.out, null);
        return r.out;
    }

    /** 256 block operations per call (128 stores, 128 removes). */
    @Benchmark
    @Group("loaded")
    @GroupThreads(1)
    public long ingest(Writer w) {
        int p = w.cursor++ & (PROMPTS - 1);
        w.decoder.decode(storePayloads[p], 0, storePayloads[p].length);
        w.decoder.decode(removePayloads[p], 0, removePayloads[p].length);
        return index.size();
    }
}
