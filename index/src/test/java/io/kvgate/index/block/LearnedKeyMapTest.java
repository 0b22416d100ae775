package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class LearnedKeyMapTest {

    @Test
    void mapsBackAndOverwritesWhenCrowded() {
        LearnedKeyMap m = new LearnedKeyMap(64);
        for (long k = 0; k < 64; k++) {
            m.put(k * 31 - 1000, k + 1);
        }
        int found = 0;
        for (long k = 0; k < 64; k++) {
            long own = m.get(k * 31 - 1000);
            if (own != 0) {
                assertEquals(k + 1, own);
                found++;
            }
        }
        assertEquals(64 - m.overwrites(), found);
        assertEquals(0, m.get(123456789L));
        for (long k = 0; k < 10_000; k++) {
            m.put(k, k + 1);
        }
        assertTrue(m.overwrites() > 0);
        assertEquals(10_000, m.get(9_999));
    }

    @Test
    void hasherChainsAndNeverReturnsZero() {
        ChainedTokenHasher h = Fmix64ChainedTokenHasher.INSTANCE;
        int[] t = {1, 2, 3, 4, 5, 6, 7, 8};
        long a = h.blockKey(h.rootKey(), t, 0, 4);
        long b = h.blockKey(a, t, 4, 4);
        assertNotEquals(a, b);
        assertEquals(a, h.blockKey(h.rootKey(), new int[] {9, 1, 2, 3, 4}, 1, 4), "depends only on the slice");
        assertNotEquals(b, h.blockKey(h.rootKey(), t, 4, 4), "depends on the parent");
        assertNotEquals(h.blockKey(h.rootKey(), t, 0, 3), h.blockKey(h.rootKey(), t, 0, 4));
    }
}
