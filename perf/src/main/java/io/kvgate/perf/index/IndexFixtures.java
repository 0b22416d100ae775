package io.kvgate.perf.index;

import java.util.SplittableRandom;

import io.kvgate.index.block.BlockIndex;

/** Shared population for the index benchmarks: prompt chains, per-endpoint prefix depths, background blocks. */
public final class IndexFixtures {
    private IndexFixtures() {
    }

    /** A chain of {@code n} pseudo-random keys (stand-ins for chained block hashes). */
    public static long[] chain(SplittableRandom rnd, int n) {
        long[] k = new long[n];
        for (int i = 0; i < n; i++) {
            k[i] = rnd.nextLong();
        }
        return k;
    }

    /**
     * Depth of prompt p held by endpoint e. "mixed": 70% of (endpoint, prompt) pairs hold nothing, the rest a
     * uniform prefix 1..n (a realistic spread). "spread": every endpoint a different depth (the worst case for
     * shared probes).
     */
    public static int depth(String distribution, SplittableRandom rnd, int endpoint, int endpoints, int n) {
        if ("spread".equals(distribution)) {
            return (int) ((long) (endpoint + 1) * n / (endpoints + 1));
        }
        return rnd.nextInt(10) < 7 ? 0 : 1 + rnd.nextInt(n);
    }

    /** Fills: prompt prefixes per endpoint (rank = endpoint % 8) and {@code background} single-holder blocks. */
    public static void populate(BlockIndex index, long[][] prompts, int endpoints, String distribution,
                                int background, SplittableRandom rnd) {
        for (long[] prompt : prompts) {
            for (int e = 0; e < endpoints; e++) {
                int d = depth(distribution, rnd, e, endpoints, prompt.length);
                for (int i = 0; i < d; i++) {
                    index.stored(e, e & 7, prompt[i]);
                }
            }
        }
        for (int i = 0; i < background; i++) {
            index.stored(rnd.nextInt(endpoints), rnd.nextInt(8), rnd.nextLong());
        }
    }
}
