package io.kvgate.perf.ingest;

import java.io.IOException;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Ingest throughput in BLOCK OPERATIONS per second (each invocation = one store batch of 4 events x 32 blocks at
 * block size 16 with token ids, then one removal batch of the same 128 blocks = 256 block operations).
 * {@code decodeOwn} vs {@code decodeMsgpackCore}: decode only, same callbacks. {@code decodeAndApply}: decode plus
 * writes to a populated off-heap {@link BlockIndex} (the full ingest-thread work minus the ZMQ receive).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Fork(value = 2)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class KvEventDecodeBenchmark {
    static final int OPS = 256;

    byte[] storePayload;
    byte[] removePayload;
    BlockIndex index;
    KvEventDecoder own;
    KvEventDecoder ownApply;
    MsgpackCoreKvDecoder core;
    Blackhole bh;
    long sum;

    @Setup(Level.Trial)
    public void setUp(Blackhole blackhole) {
        this.bh = blackhole;
        SplittableRandom rnd = new SplittableRandom(7);
        long[] keys = new long[128];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = rnd.nextLong();
        }
        storePayload = Payloads.stored(keys, 4, 32, 16, rnd);
        removePayload = Payloads.removed(keys, 128);
        own = new KvEventDecoder(new KvEventHandler() {
            @Override
            public void onBlockStored(BlockStoredEvent e) {
                long s = 0;
                for (int i = 0; i < e.blockCount(); i++) {
                    s += e.blockKeys()[i];
                }
                sum += s + e.tokens()[e.tokenInts() - 1];
            }

            @Override
            public void onBlockRemoved(BlockRemovedEvent e) {
                for (int i = 0; i < e.blockCount(); i++) {
                    sum += e.blockKeys()[i];
                }
            }

            @Override
            public void onAllBlocksCleared() {
            }
        });
        index = new BlockIndex(2_000_000, 64);
        for (int i = 0; i < 1_000_000; i++) {
            index.stored(rnd.nextInt(64), rnd.nextInt(8), rnd.nextLong());
        }
        ownApply = new KvEventDecoder(new KvEventHandler() {
            @Override
            public void onBlockStored(BlockStoredEvent e) {
                for (int i = 0; i < e.blockCount(); i++) {
                    index.stored(5, 1, e.blockKeys()[i]);
                }
            }

            @Override
            public void onBlockRemoved(BlockRemovedEvent e) {
                for (int i = 0; i < e.blockCount(); i++) {
                    index.removed(5, 1, e.blockKeys()[i]);
                }
            }

            @Override
            public void onAllBlocksCleared() {
            }
        });
        core = new MsgpackCoreKvDecoder();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        index.close();
    }

    @Benchmark
    @OperationsPerInvocation(OPS)
    public long decodeOwn() {
        own.decode(storePayload, 0, storePayload.length);
        own.decode(removePayload, 0, removePayload.length);
        return sum;
    }

    private final MsgpackCoreKvDecoder.Sink coreSink = new MsgpackCoreKvDecoder.Sink() {
        @Override
        public void stored(long[] keys, int n, int[] tokens, int tokenCount, int blockSize) {
            long s = 0;
            for (int i = 0; i < n; i++) {
                s += keys[i];
            }
            sum += s + tokens[tokenCount - 1];
        }

        @Override
        public void removed(long[] keys, int n) {
            for (int i = 0; i < n; i++) {
                sum += keys[i];
            }
        }
    };

    @Benchmark
    @OperationsPerInvocation(OPS)
    public long decodeMsgpackCore() throws IOException {
        core.decode(storePayload, coreSink);
        core.decode(removePayload, coreSink);
        return sum;
    }

    @Benchmark
    @OperationsPerInvocation(OPS)
    public long decodeAndApply() {
        ownApply.decode(storePayload, 0, storePayload.length);
        ownApply.decode(removePayload, 0, removePayload.length);
        return index.size();
    }
}
