package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Longest cached prefix per DP rank of one endpoint: what kv_exact scores when it pins requests to ranks. */
class RankDepthsTest {
    private static long[] keys(int n) {
        long[] k = new long[n];
        for (int i = 0; i < n; i++) {
            k[i] = 0x5EED_0000L + i * 7919L;
        }
        return k;
    }

    @Test
    void eachRankHasItsOwnDepthAndOtherEndpointsDoNotCount() {
        try (BlockIndex idx = new BlockIndex(4096, 4)) {
            BlockIndexReader r = idx.newReader();
            long[] k = keys(20);
            for (int b = 0; b < 20; b++) {
                idx.stored(3, 1, k[b]); // rank 1 holds all of it
            }
            for (int b = 0; b < 7; b++) {
                idx.stored(3, 2, k[b]); // rank 2 the first 7 blocks
            }
            for (int b = 0; b < 20; b++) {
                idx.stored(1, 0, k[b]); // another endpoint's rank 0 holds it all: not endpoint 3's rank 0
            }
            int[] matched = new int[1];
            r.longestPrefix(k, 20, new int[] {3}, 1, matched, null);
            assertEquals(20, matched[0], "the union over ranks");
            int[] depth = new int[4];
            long probes = r.probes();
            r.rankDepths(k, matched[0], 3, 4, depth);
            assertArrayEquals(new int[] {0, 20, 7, 0}, depth);
            assertTrue(r.probes() - probes <= 2 + 2 * 5, "shared probes: " + (r.probes() - probes));

            idx.clearRank(3, 1);
            r.longestPrefix(k, 20, new int[] {3}, 1, matched, null);
            assertEquals(7, matched[0]);
            r.rankDepths(k, matched[0], 3, 4, depth);
            assertArrayEquals(new int[] {0, 0, 7, 0}, depth, "a cleared rank holds nothing");
            r.rankDepths(k, 0, 3, 4, depth);
            assertArrayEquals(new int[] {0, 0, 0, 0}, depth, "nothing matched: nothing to search");
        }
    }

    @Test
    void everyDepthOfEveryRankIsFound() {
        try (BlockIndex idx = new BlockIndex(1 << 14, 64)) {
            BlockIndexReader r = idx.newReader();
            long[] k = keys(64);
            int[] want = new int[8];
            for (int trial = 0; trial < 40; trial++) {
                int ep = 10 + trial;
                for (int rank = 0; rank < 8; rank++) {
                    want[rank] = (trial * 13 + rank * 29) % 65;
                    for (int b = 0; b < want[rank]; b++) {
                        idx.stored(ep, rank, k[b]);
                    }
                }
                int union = 0;
                for (int w : want) {
                    union = Math.max(union, w);
                }
                int[] depth = new int[8];
                r.rankDepths(k, union, ep, 8, depth);
                assertArrayEquals(want, depth, "trial " + trial);
            }
        }
    }
}
