package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The paged prefix cache: hits, the last-token rule, LRU leaf-first eviction, pinned blocks, change events. */
class PrefixCacheTest {
    final List<String> log = new ArrayList<>();
    final PrefixCache.Listener listener = new PrefixCache.Listener() {
        @Override
        public void onStored(long[] keys, int from, int to, boolean hasParent, long parent, int[] tokens, int bs) {
            StringBuilder sb = new StringBuilder("stored");
            for (int i = from; i < to; i++) {
                sb.append(' ').append(keys[i]);
            }
            log.add(sb + (hasParent ? " parent " + parent : ""));
        }

        @Override
        public void onRemoved(long[] keys, int count) {
            StringBuilder sb = new StringBuilder("removed");
            for (int i = 0; i < count; i++) {
                sb.append(' ').append(keys[i]);
            }
            log.add(sb.toString());
        }
    };

    static int[] tokens(int n) {
        return new int[n];
    }

    @Test
    void hitsTheLongestPrefixAndStoresTheRest() {
        PrefixCache c = new PrefixCache(100, listener);
        PrefixCache.Lease a = c.acquire(new long[] {1, 2}, tokens(40), 16);
        assertEquals(0, a.cachedTokens);
        PrefixCache.Lease b = c.acquire(new long[] {1, 2, 3}, tokens(50), 16);
        assertEquals(32, b.cachedTokens);
        assertEquals(List.of("stored 1 2", "stored 3 parent 2"), log);
        PrefixCache.Lease d = c.acquire(new long[] {1, 9}, tokens(33), 16);
        assertEquals(16, d.cachedTokens, "the chain breaks at block 1");
    }

    @Test
    void lastTokenIsAlwaysComputed() {
        PrefixCache c = new PrefixCache(100, listener);
        c.release(c.acquire(new long[] {1, 2}, tokens(32), 16));
        assertEquals(16, c.acquire(new long[] {1, 2}, tokens(32), 16).cachedTokens,
            "a fully cached 32-token prompt still computes its last block");
        assertEquals(32, c.acquire(new long[] {1, 2}, tokens(33), 16).cachedTokens);
    }

    @Test
    void evictsLeastRecentlyUsedLeafFirstAndNeverPinnedBlocks() {
        PrefixCache c = new PrefixCache(4, listener);
        PrefixCache.Lease a = c.acquire(new long[] {1, 2, 3}, tokens(48), 16);
        c.release(a);
        PrefixCache.Lease pinned = c.acquire(new long[] {7}, tokens(17), 16);
        log.clear();
        // needs 2 blocks with 4 cached (3 free): the leaf 3, then 2, go first; 1 and pinned 7 stay
        c.acquire(new long[] {10, 11}, tokens(40), 16);
        assertEquals(List.of("removed 3 2", "stored 10 11"), log);
        assertTrue(c.contains(1));
        assertTrue(c.contains(7));
        assertFalse(c.contains(3));
        // everything referenced now except 1: a 3-block prompt caches only what fits
        log.clear();
        PrefixCache.Lease partial = c.acquire(new long[] {20, 21, 22}, tokens(60), 16);
        assertEquals(List.of("removed 1", "stored 20"), log);
        assertEquals(1, partial.blocks.size());
        c.release(pinned);
        assertEquals(1, c.freeQueueLength());
    }

    @Test
    void clearForgetsEverythingAndStaleReleasesAreIgnored() {
        PrefixCache c = new PrefixCache(8, listener);
        PrefixCache.Lease a = c.acquire(new long[] {1, 2}, tokens(32), 16);
        c.clear();
        c.release(a);
        assertEquals(0, c.size());
        assertEquals(0, c.freeQueueLength());
    }
}
