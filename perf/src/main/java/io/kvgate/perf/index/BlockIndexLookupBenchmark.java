package io.kvgate.perf.index;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.Holders;
import io.kvgate.index.block.SpeculativeOverlay;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Longest cached prefix of a 128-block prompt over 64 endpoints. {@code longestPrefix}: shared binary search
 * over the chain (the product path). Baselines in the same run: {@code linearProbe} probes block after block
 * until no candidate is left (the obvious implementation), {@code singleProbe} is the cost of one map probe.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 2)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class BlockIndexLookupBenchmark {
    @Param({"mixed", "spread"})
    public String distribution;

    @Param({"1000000"})
    public int backgroundBlocks;

    /** "on": the reader's cache of probed blocks (default config); "off": every probe goes to the off-heap map. */
    @Param({"on", "off"})
    public String hotCache;

    static final int ENDPOINTS = 64;
    static final int BLOCKS = 128;
    static final int PROMPTS = 64;

    BlockIndex index;
    BlockIndexReader reader;
    SpeculativeOverlay overlay;
    long[][] prompts;
    int[] endpoints;
    int[] out;
    int[] cells;
    int cursor;

    @Setup(Level.Trial)
    public void setUp() {
        SplittableRandom rnd = new SplittableRandom(42);
        int capacity = backgroundBlocks + PROMPTS * BLOCKS * 2;
        index = new BlockIndex(new BlockIndexConfig(capacity, ENDPOINTS, 2, 8192,
            "on".equals(hotCache) ? BlockIndexConfig.defaultHotCacheEntries(capacity) : 0));
        prompts = new long[PROMPTS][];
        for (int p = 0; p < PROMPTS; p++) {
            prompts[p] = IndexFixtures.chain(rnd, BLOCKS);
        }
        IndexFixtures.populate(index, prompts, ENDPOINTS, distribution, backgroundBlocks, rnd);
        reader = index.newReader();
        overlay = new SpeculativeOverlay(1 << 16, TimeUnit.HOURS.toNanos(1), NanoClock.SYSTEM);
        for (int p = 0; p < PROMPTS; p += 4) {
            overlay.recordRouted(p % ENDPOINTS, prompts[p], BLOCKS);
        }
        endpoints = new int[ENDPOINTS];
        for (int e = 0; e < ENDPOINTS; e++) {
            endpoints[e] = e;
        }
        out = new int[ENDPOINTS];
        cells = new int[ENDPOINTS * Holders.MAX_RANKS];
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        index.close();
    }

    @Benchmark
    public int[] longestPrefix() {
        long[] keys = prompts[cursor++ & (PROMPTS - 1)];
        reader.longestPrefix(keys, BLOCKS, endpoints, ENDPOINTS, out, null);
        return out;
    }

    @Benchmark
    public int[] longestPrefixWithOverlay() {
        long[] keys = prompts[cursor++ & (PROMPTS - 1)];
        reader.longestPrefix(keys, BLOCKS, endpoints, ENDPOINTS, out, overlay);
        return out;
    }

    /** Baseline: probe blocks in order, dropping candidates at their first miss, until none is left. */
    @Benchmark
    public int[] linearProbe() {
        long[] keys = prompts[cursor++ & (PROMPTS - 1)];
        long alive = -1L; // 64 candidates: one bit each
        java.util.Arrays.fill(out, 0);
        for (int j = 0; j < BLOCKS && alive != 0; j++) {
            int n = reader.holders(keys[j], cells);
            long held = 0;
            for (int i = 0; i < n; i++) {
                held |= 1L << Holders.endpointOf(cells[i]);
            }
            alive &= held;
            long a = alive;
            while (a != 0) {
                out[Long.numberOfTrailingZeros(a)] = j + 1;
                a &= a - 1;
            }
        }
        return out;
    }

    /** Cost of one off-heap probe (for probes-per-lookup arithmetic). */
    @Benchmark
    public int singleProbe() {
        long[] keys = prompts[cursor++ & (PROMPTS - 1)];
        return reader.holders(keys[0], cells);
    }
}
