package io.kvgate.index.block;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * On-heap, direct-mapped, write-through cache of block key to endpoint bitmap (bit e = some rank of endpoint e
 * holds the block), in front of the off-heap map. Why: an off-heap probe costs ~200 ns (segment lock, entry
 * decoding), a hit here ~10-30 ns, and a lookup over endpoints that hold prefixes of different depths needs
 * dozens of probes. The writer puts every block it changes (so recently stored, i.e. hot, blocks are here) and
 * removes blocks it deletes; a key overwritten by a colliding one simply falls back to the map. A miss therefore
 * says nothing: the reader probes the map.
 *
 * <p>Only for indexes with at most 64 endpoints (one bitmap word); larger indexes run without it.
 *
 * <p><b>Threading contract:</b> single writer (the index writer), any number of readers. Each slot is a (key,
 * bitmap) pair published seqlock-style: the writer retires the slot's key ({@code EMPTY}) before writing a new
 * bitmap and publishes the new key last; a reader accepts the bitmap only when it read the same key before and
 * after it (acquire loads), so it never pairs a key with another key's bitmap.
 */
final class HotKeyCache {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    /** Marks an empty or retiring slot. A real key equal to it is simply never cached. */
    static final long EMPTY = 0x8000_0000_0000_0001L;
    /** Returned by {@link #get} on a miss (no valid bitmap is negative: bit 63 is endpoint 63... see below). */
    static final long MISS = -1L;

    private final long[] keys;
    private final long[] bitmaps;
    private final int mask;

    HotKeyCache(int entries) {
        int slots = Integer.highestOneBit(Math.max(16, entries - 1)) << 1;
        keys = new long[slots];
        bitmaps = new long[slots];
        mask = slots - 1;
        java.util.Arrays.fill(keys, EMPTY);
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h >>> 40) & mask;
    }

    /** Writer: the endpoint bitmap of {@code key} is now {@code bitmap}. */
    void put(long key, long bitmap) {
        if (key == EMPTY) {
            return;
        }
        int s = slot(key);
        if ((long) LONGS.getOpaque(keys, s) == key) {
            LONGS.setRelease(bitmaps, s, bitmap);
            return;
        }
        LONGS.setRelease(keys, s, EMPTY);
        LONGS.setRelease(bitmaps, s, bitmap);
        LONGS.setRelease(keys, s, key);
    }

    /** Writer: {@code key} left the index. */
    void remove(long key) {
        int s = slot(key);
        if ((long) LONGS.getOpaque(keys, s) == key) {
            LONGS.setRelease(keys, s, EMPTY);
        }
    }

    /**
     * Reader: the bitmap of {@code key}, or {@link #MISS}. A real bitmap equal to -1 (all 64 endpoints hold the
     * block) is reported as a miss and answered by the map: correct, just slower.
     */
    long get(long key) {
        int s = slot(key);
        long k1 = (long) LONGS.getAcquire(keys, s);
        if (k1 != key) {
            return MISS;
        }
        long b = (long) LONGS.getAcquire(bitmaps, s);
        long k2 = (long) LONGS.getAcquire(keys, s);
        return k2 == key ? b : MISS;
    }

    long sizeBytes() {
        return 16L * keys.length;
    }
}
