package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;

import org.junit.jupiter.api.Test;

class BlockIndexTest {

    @Test
    void duplicateStoresNeedAsManyRemovals() {
        try (BlockIndex idx = new BlockIndex(1024, 4)) {
            BlockIndexReader r = idx.newReader();
            idx.stored(1, 0, 42L);
            idx.stored(1, 0, 42L);
            assertEquals(1, idx.blocks(1));
            idx.removed(1, 0, 42L);
            assertTrue(r.holds(1, 42L), "one copy left after one removal");
            idx.removed(1, 0, 42L);
            assertFalse(r.holds(1, 42L));
            assertEquals(0, idx.size());
            assertEquals(0, idx.blocks(1));
            idx.removed(1, 0, 42L);
            assertEquals(1, idx.unknownRemovals());
        }
    }

    @Test
    void endpointCountsAreDistinctBlocksAcrossRanks() {
        try (BlockIndex idx = new BlockIndex(1024, 4)) {
            idx.stored(2, 0, -7L);
            idx.stored(2, 3, -7L);
            idx.stored(2, 7, Long.MIN_VALUE);
            idx.stored(3, 0, -7L);
            assertEquals(2, idx.blocks(2));
            assertEquals(1, idx.blocks(3));
            assertEquals(2, idx.size());
            assertEquals(3, idx.memberships());
            idx.removed(2, 0, -7L);
            assertEquals(2, idx.blocks(2), "rank 3 still holds -7");
            idx.removed(2, 3, -7L);
            assertEquals(1, idx.blocks(2));
            assertEquals(2, idx.memberships());
        }
    }

    @Test
    void clearRankKeepsOtherRanksAndEndpoints() {
        try (BlockIndex idx = new BlockIndex(4096, 4)) {
            for (long k = 0; k < 500; k++) {
                idx.stored(0, 0, k);
                if (k % 2 == 0) {
                    idx.stored(0, 1, k);
                }
                idx.stored(1, 0, k);
            }
            assertEquals(500, idx.blocks(0));
            long removed = idx.clearRank(0, 0);
            assertEquals(250, removed, "memberships lost: the odd blocks no other rank of endpoint 0 holds");
            assertEquals(250, idx.blocks(0));
            assertEquals(500, idx.blocks(1));
            BlockIndexReader r = idx.newReader();
            assertTrue(r.holds(0, 2));
            assertFalse(r.holds(0, 3));
            idx.removeEndpoint(1);
            assertEquals(0, idx.blocks(1));
            idx.reclaimAll(); // clears are O(1): entries of cleared holders are reclaimed lazily
            assertEquals(250, idx.size());
            idx.clearRank(0, 1);
            assertEquals(0, idx.memberships());
            idx.reclaimAll();
            assertEquals(0, idx.size());
        }
    }

    @Test
    void capacityEvictsAndKeepsCountsExact() {
        int cap = 2048;
        try (BlockIndex idx = new BlockIndex(cap, 2)) {
            for (long k = 1; k <= cap * 3L; k++) {
                idx.stored((int) (k & 1), 0, k * 0x9E3779B97F4A7C15L);
            }
            assertTrue(idx.size() <= cap, "size " + idx.size() + " <= capacity " + cap);
            assertTrue(idx.evictions() >= cap * 2L, "evictions counted: " + idx.evictions());
            assertEquals(idx.size(), idx.blocks(0) + idx.blocks(1));
            assertEquals(idx.size() + idx.evictions(), cap * 3L);
            assertEquals(0, idx.insertFailures());
        }
    }

    @Test
    void readerCacheFollowsEveryWriterChange() {
        try (BlockIndex idx = new BlockIndex(1 << 18, 8)) {
            BlockIndexReader r = idx.newReader();
            long[] chain = chain(77, 32);
            int[] eps = {0, 1};
            int[] out = new int[2];
            store(idx, 0, 0, chain, 20);
            r.longestPrefix(chain, 32, eps, 2, out, null);
            assertArrayEquals(new int[] {20, 0}, out);
            r.longestPrefix(chain, 32, eps, 2, out, null);
            assertTrue(r.hotHits() > 0);
            idx.removed(0, 0, chain[19]);
            store(idx, 1, 3, chain, 4);
            r.longestPrefix(chain, 32, eps, 2, out, null);
            assertArrayEquals(new int[] {19, 4}, out);
            idx.clearRank(0, 0);
            r.longestPrefix(chain, 32, eps, 2, out, null);
            assertArrayEquals(new int[] {0, 4}, out);
            // more changes than the change log holds: the reader drops its cache and stays correct
            for (long k = 0; k < 70_000; k++) {
                idx.stored(1, 0, 1_000_000 + k);
            }
            store(idx, 0, 2, chain, 32);
            r.longestPrefix(chain, 32, eps, 2, out, null);
            assertArrayEquals(new int[] {32, 4}, out);
            assertEquals(1, r.cacheFlushes());
        }
    }

    /**
     * Changes to cached blocks are patched into the reader's cache from the change log, tiers included: the next
     * lookup answers from the cache (no map probe) and agrees with a reader that has no cache.
     */
    @Test
    void readerCachePatchesChangedBlocksInsteadOfProbingAgain() {
        try (BlockIndex idx = new BlockIndex(1 << 18, 8)) {
            BlockIndexReader cached = idx.newReader();
            long[] chain = chain(91, 64);
            int[] eps = {0, 1, 2, 3};
            int[] out = new int[4];
            int[] tiers = new int[4];
            store(idx, 0, 0, chain, 40);
            store(idx, 1, 0, chain, 10);
            cached.longestPrefix(chain, 64, eps, 4, out, tiers, null);
            assertArrayEquals(new int[] {40, 10, 0, 0}, out);
            for (int k = 1; k <= 64; k++) {
                cached.longestPrefix(chain, k, eps, 4, out, tiers, null); // probes block k-1: every block cached
            }
            long mapProbesWarm = cached.probes() - cached.hotHits();
            cached.longestPrefix(chain, 64, eps, 4, out, tiers, null);
            assertEquals(mapProbesWarm, cached.probes() - cached.hotHits(), "a repeated lookup is answered from the cache");

            // Every kind of writer change to blocks the reader has cached.
            for (int i = 0; i < 40; i++) {
                idx.stored(2, 1, chain[i], Holders.TIER_CPU);    // a new holder, in another tier
            }
            idx.stored(1, 0, chain[10], Holders.TIER_DISK);         // extends endpoint 1 by one block
            idx.removed(0, 0, chain[39]);                           // shortens endpoint 0
            for (int i = 0; i < 10; i++) {
                idx.removed(1, 0, chain[i]);                        // endpoint 1 loses its whole prefix ...
            }
            idx.stored(1, 0, chain[0]);                             // ... and takes block 0 again
            long patchesBefore = cached.cachePatches();
            long mapProbesBefore = cached.probes() - cached.hotHits();
            cached.longestPrefix(chain, 64, eps, 4, out, tiers, null);
            assertEquals(mapProbesBefore, cached.probes() - cached.hotHits(), "patched, not probed again");
            assertTrue(cached.cachePatches() - patchesBefore >= 40, "patches " + (cached.cachePatches() - patchesBefore));
            assertArrayEquals(new int[] {39, 1, 40, 0}, out);
            assertArrayEquals(new int[] {Holders.TIER_GPU, Holders.TIER_GPU, Holders.TIER_CPU, Holders.TIER_GPU}, tiers);
            assertAgreesWithUncachedReader(idx, cached, chain, eps);

            // A block removed by its last holder (entry deleted) and one evicted by a reclaim sweep after a clear.
            idx.removed(1, 0, chain[0]);
            idx.clearRank(2, 1);
            idx.reclaimAll();
            cached.longestPrefix(chain, 64, eps, 4, out, tiers, null);
            assertArrayEquals(new int[] {39, 0, 0, 0}, out);
            assertAgreesWithUncachedReader(idx, cached, chain, eps);
        }
    }

    /** {@code reader}'s lookup against the truth read block by block from the map ({@code holds}, {@code tier}). */
    static void assertAgreesWithUncachedReader(BlockIndex idx, BlockIndexReader reader, long[] chain, int[] eps) {
        int[] want = new int[eps.length];
        int[] wantTiers = new int[eps.length];
        for (int c = 0; c < eps.length; c++) {
            // Linear truth from holders(): the longest prefix every block of which some rank of eps[c] holds.
            int d = 0;
            while (d < chain.length && reader.holds(eps[c], chain[d])) {
                d++;
            }
            want[c] = d;
            wantTiers[c] = d == 0 ? Holders.TIER_GPU : reader.tier(eps[c], chain[d - 1]);
        }
        int[] got = new int[eps.length];
        int[] gotTiers = new int[eps.length];
        reader.longestPrefix(chain, chain.length, eps, eps.length, got, gotTiers, null);
        assertArrayEquals(want, got);
        assertArrayEquals(wantTiers, gotTiers);
    }

    @Test
    void worksWithoutHotCacheAndWithMoreThan64Endpoints() {
        for (BlockIndexConfig cfg : new BlockIndexConfig[] {
            new BlockIndexConfig(4096, 8, 2, 256, 0), BlockIndexConfig.of(4096, 200)}) {
            try (BlockIndex idx = new BlockIndex(cfg)) {
                long[] chain = chain(3, 64);
                int last = cfg.maxEndpoints() - 1;
                store(idx, last, 7, chain, 33);
                store(idx, 0, 0, chain, 5);
                int[] out = new int[3];
                BlockIndexReader r = idx.newReader();
                r.longestPrefix(chain, 64, new int[] {last, 0, 1}, 3, out, null);
                assertArrayEquals(new int[] {33, 5, 0}, out);
                assertEquals(0, r.hotHits());
            }
        }
    }

    @Test
    void rejectsOutOfRangeHolders() {
        try (BlockIndex idx = new BlockIndex(64, 4)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> idx.stored(4, 0, 1));
            assertTrue(e.getMessage().contains("endpointId=4"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> idx.stored(0, 8, 1));
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new BlockIndex(1, 4));
        assertTrue(e.getMessage().contains("kv_capacity_blocks=1"), e.getMessage());
    }

    @Test
    void longestPrefixPerEndpointIsUnionOverRanks() {
        try (BlockIndex idx = new BlockIndex(4096, 8)) {
            long[] chain = chain(100, 128);
            // endpoint 0: 40 blocks on rank 0; endpoint 1: 10 on rank 0 and 70 on rank 5 (union 70);
            // endpoint 2: all 128; endpoint 3: nothing; endpoint 4: block 0 only
            store(idx, 0, 0, chain, 40);
            store(idx, 1, 0, chain, 10);
            store(idx, 1, 5, chain, 70);
            store(idx, 2, 1, chain, 128);
            store(idx, 4, 0, chain, 1);
            int[] eps = {0, 1, 2, 3, 4, 7, 0};
            int[] out = new int[eps.length];
            idx.longestPrefix(chain, 128, eps, eps.length, out);
            assertArrayEquals(new int[] {40, 70, 128, 0, 1, 0, 40}, out);
            // shorter prompt: sharing the first 50 keys
            idx.longestPrefix(chain, 50, eps, eps.length, out);
            assertArrayEquals(new int[] {40, 50, 50, 0, 1, 0, 40}, out);
            // different prompt entirely
            long[] other = chain(999, 64);
            idx.longestPrefix(other, 64, eps, eps.length, out);
            assertArrayEquals(new int[7], out);
        }
    }

    @Test
    void longestPrefixMatchesLinearScanOnRandomPrefixClosedSets() {
        Random rnd = new Random(7);
        int endpoints = 64;
        try (BlockIndex idx = new BlockIndex(1 << 16, endpoints)) {
            long[][] prompts = new long[8][];
            for (int p = 0; p < prompts.length; p++) {
                prompts[p] = chain(p * 1000 + 1, 128);
            }
            int[][] depth = new int[endpoints][prompts.length];
            for (int e = 0; e < endpoints; e++) {
                for (int p = 0; p < prompts.length; p++) {
                    int d = rnd.nextInt(4) == 0 ? 0 : rnd.nextInt(129);
                    depth[e][p] = d;
                    store(idx, e, rnd.nextInt(8), prompts[p], d);
                }
            }
            int[] eps = new int[endpoints];
            for (int e = 0; e < endpoints; e++) {
                eps[e] = e;
            }
            int[] out = new int[endpoints];
            BlockIndexReader reader = idx.newReader();
            for (int p = 0; p < prompts.length; p++) {
                for (int n : new int[] {1, 2, 17, 64, 128}) {
                    reader.longestPrefix(prompts[p], n, eps, endpoints, out, null);
                    for (int e = 0; e < endpoints; e++) {
                        assertEquals(Math.min(depth[e][p], n), out[e], "prompt " + p + " n " + n + " ep " + e);
                    }
                }
            }
            assertTrue(reader.probes() < reader.lookups() * 128, "probes shared, not one per block");
        }
    }

    @Test
    void randomOperationsAgreeWithModel() {
        Random rnd = new Random(11);
        Map<Long, Map<Integer, Integer>> model = new HashMap<>(); // key -> holder -> refs
        try (BlockIndex idx = new BlockIndex(1 << 14, 6)) {
            BlockIndexReader r = idx.newReader();
            for (int op = 0; op < 40_000; op++) {
                long key = rnd.nextInt(600) - 300;
                int ep = rnd.nextInt(6);
                int rank = rnd.nextInt(3);
                int holder = Holders.holder(ep, rank);
                int kind = rnd.nextInt(100);
                if (kind < 55) {
                    idx.stored(ep, rank, key);
                    model.computeIfAbsent(key, k -> new HashMap<>()).merge(holder, 1, Integer::sum);
                } else if (kind < 99) {
                    idx.removed(ep, rank, key);
                    Map<Integer, Integer> h = model.get(key);
                    if (h != null && h.containsKey(holder)) {
                        if (h.merge(holder, -1, Integer::sum) == 0) {
                            h.remove(holder);
                        }
                        if (h.isEmpty()) {
                            model.remove(key);
                        }
                    }
                } else {
                    idx.clearRank(ep, rank);
                    model.values().forEach(h -> h.remove(holder));
                    model.values().removeIf(Map::isEmpty);
                }
            }
            idx.reclaimAll();
            assertEquals(model.size(), idx.size());
            long members = 0;
            for (int ep = 0; ep < 6; ep++) {
                Set<Long> held = new HashSet<>();
                for (var en : model.entrySet()) {
                    for (int h : en.getValue().keySet()) {
                        if (h >>> 3 == ep) {
                            held.add(en.getKey());
                        }
                    }
                }
                assertEquals(held.size(), idx.blocks(ep), "endpoint " + ep);
                members += held.size();
                for (long key = -300; key < 300; key++) {
                    assertEquals(held.contains(key), r.holds(ep, key), "ep " + ep + " key " + key);
                }
            }
            assertEquals(members, idx.memberships());
            // the lookup path (reader cache in front of the map) agrees too, after removals and clears
            int[] eps = {0, 1, 2, 3, 4, 5};
            int[] out = new int[6];
            long[] one = new long[1];
            for (int pass = 0; pass < 2; pass++) { // the second pass is answered from the reader's cache
                for (long key = -300; key < 300; key++) {
                    one[0] = key;
                    r.longestPrefix(one, 1, eps, 6, out, null);
                    Map<Integer, Integer> h = model.get(key);
                    for (int ep = 0; ep < 6; ep++) {
                        final int e = ep;
                        boolean held = h != null && h.keySet().stream().anyMatch(x -> x >>> 3 == e);
                        assertEquals(held ? 1 : 0, out[ep], "lookup ep " + ep + " key " + key);
                    }
                }
            }
            assertTrue(r.hotHits() > 0, "the cache answered some probes");
            int[] cells = new int[6 * 8];
            for (var en : model.entrySet()) {
                int n = r.holders(en.getKey(), cells);
                Map<Integer, Integer> got = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    got.put(Holders.holderOf(cells[i]), Holders.refOf(cells[i]));
                }
                assertEquals(en.getValue(), got, "key " + en.getKey());
            }
        }
    }

    @Test
    void clearsAreO1AndDeadWordsAreReclaimedLazily() {
        try (BlockIndex idx = new BlockIndex(1 << 18, 4)) {
            BlockIndexReader r = idx.newReader();
            for (long k = 0; k < 100_000; k++) {
                idx.stored(1, 0, k); // a big inventory of someone else
            }
            for (long k = 0; k < 1_000; k++) {
                idx.stored(2, 0, k);
                idx.stored(2, 1, k + 500);
            }
            assertEquals(1_500, idx.blocks(2));
            long visitsBefore = idx.entriesVisited();
            assertEquals(500, idx.clearRank(2, 0), "blocks only rank 0 of endpoint 2 held");
            assertEquals(1_000, idx.blocks(2), "rank 1 keeps its 1000 blocks");
            assertEquals(0, idx.clearEntryVisits());
            assertEquals(visitsBefore, idx.entriesVisited(), "a clear visits no entry");
            assertFalse(r.holds(2, 10), "dead from the instant of the clear");
            assertTrue(r.holds(2, 600));
            assertTrue(r.holds(1, 10));
            // 10^6 clears, each after one store: every clear is O(1), every store touches one entry.
            for (int i = 0; i < 1_000_000; i++) {
                idx.stored(3, 0, 7_000_000L + (i & 1023));
                idx.clearRank(3, 0);
            }
            assertEquals(0, idx.blocks(3));
            assertEquals(0, idx.clearEntryVisits(), "no clear walked the map");
            assertEquals(visitsBefore + 1_000_000, idx.entriesVisited(), "one entry visit per store, none per clear");
            assertTrue(idx.reclaimed() >= 1_000_000 - 1024, "dead words dropped by the next store to their block: "
                + idx.reclaimed());
            assertEquals(1_000_001, idx.clears());
            // Clearing a holder that holds nothing spends no generation and keeps reader caches.
            long epoch = idx.clearEpoch();
            idx.clearRank(3, 0);
            assertEquals(epoch, idx.clearEpoch());
            idx.reclaimAll();
            assertEquals(100_000, idx.size(), "the lazy sweep removed the 1024 entries only the cleared holder had");
            assertEquals(idx.memberships(), idx.blocks(1) + idx.blocks(2));
        }
    }

    @Test
    void tiersAreRecordedPerMembershipAndRemovedPerTier() {
        try (BlockIndex idx = new BlockIndex(4096, 4)) {
            BlockIndexReader r = idx.newReader();
            idx.stored(0, 0, 5L, Holders.TIER_CPU);
            assertEquals(Holders.TIER_CPU, r.tier(0, 5L));
            idx.stored(0, 0, 5L, Holders.TIER_GPU);
            assertEquals(Holders.TIER_GPU, r.tier(0, 5L), "the fastest tier wins");
            assertEquals(1, idx.blocks(0));
            idx.removed(0, 0, 5L, Holders.TIER_GPU);
            assertEquals(Holders.TIER_CPU, r.tier(0, 5L), "offloaded: still held, on the CPU tier");
            assertEquals(1, idx.blocks(0));
            int[] cells = new int[32];
            assertEquals(1, r.holders(5L, cells));
            assertEquals(1, Holders.refOf(cells[0]));
            idx.removed(0, 0, 5L, Holders.TIER_DISK);
            assertEquals(1, idx.unknownRemovals(), "not held on disk");
            idx.removed(0, 0, 5L, Holders.TIER_ANY);
            assertEquals(-1, r.tier(0, 5L));
            assertEquals(0, idx.blocks(0));

            long[] chain = chain(9, 16);
            for (int i = 0; i < 16; i++) {
                idx.stored(1, 0, chain[i], i < 10 ? Holders.TIER_GPU : Holders.TIER_DISK);
                idx.stored(2, 0, chain[i], i < 6 ? Holders.TIER_GPU : Holders.TIER_CPU);
            }
            int[] out = new int[3];
            int[] tiers = new int[3];
            for (int pass = 0; pass < 2; pass++) { // the second pass is answered from the reader cache
                r.longestPrefix(chain, 16, new int[] {1, 2, 3}, 3, out, tiers, null);
                assertArrayEquals(new int[] {16, 16, 0}, out);
                assertArrayEquals(new int[] {Holders.TIER_DISK, Holders.TIER_CPU, Holders.TIER_GPU}, tiers,
                    "the tier of the last matched block");
            }
        }
    }

    static long[] chain(long seed, int n) {
        long[] k = new long[n];
        long h = seed;
        for (int i = 0; i < n; i++) {
            h = Fmix64ChainedTokenHasher.fmix64(h + 0x9E3779B97F4A7C15L);
            k[i] = h;
        }
        return k;
    }

    static void store(BlockIndex idx, int ep, int rank, long[] chain, int n) {
        for (int i = 0; i < n; i++) {
            idx.stored(ep, rank, chain[i]);
        }
    }
}
