package io.kvgate.index.tokenize;

import java.util.Arrays;

/**
 * Bounded text -> token ids cache: a fixed power-of-two array of immutable entries indexed by the text's hash; a new
 * entry simply overwrites whatever was in its slot (no eviction bookkeeping, no locks).
 *
 * <p>Thread-safe without synchronization: entries are immutable objects with final fields, so a reader that sees
 * a reference sees a fully built entry (JLS 17.5); a lost race just loses one cache fill. Hits compare the whole
 * key, so a hash collision can never return wrong ids. Memory is bounded by
 * {@code slots * (maxKeyChars * 2 + ids)} bytes.
 */
final class LossyIdCache {
    private static final class Entry {
        final int hash;
        final char[] key;
        final int[] ids;

        Entry(int hash, char[] key, int[] ids) {
            this.hash = hash;
            this.key = key;
            this.ids = ids;
        }
    }

    private final Entry[] slots;
    private final int mask;
    final int minChars;
    final int maxChars;

    LossyIdCache(int slots, int minChars, int maxChars) {
        if (slots != 0 && Integer.bitCount(slots) != 1) {
            throw new IllegalArgumentException("cache slots=" + slots + " must be 0 or a power of two");
        }
        this.slots = new Entry[slots];
        this.mask = slots - 1;
        this.minChars = minChars;
        this.maxChars = maxChars;
    }

    boolean enabled(int length) {
        return slots.length > 0 && length >= minChars && length <= maxChars;
    }

    static int hash(CharSequence s, int from, int to) {
        int h = 0x9E3779B9 ^ (to - from);
        for (int i = from; i < to; i++) {
            h = (h ^ s.charAt(i)) * 0x01000193;
        }
        h ^= h >>> 16;
        h *= 0x85EBCA6B;
        return h ^ (h >>> 13);
    }

    /** Appends the cached ids for {@code s[from,to)} to {@code out}; false on a miss. */
    boolean get(CharSequence s, int from, int to, int hash, IntBuf out) {
        Entry e = slots[hash & mask];
        if (e == null || e.hash != hash) {
            return false;
        }
        char[] k = e.key;
        if (k.length != to - from) {
            return false;
        }
        if (s instanceof String str) {
            for (int i = 0; i < k.length; i++) {
                if (str.charAt(from + i) != k[i]) {
                    return false;
                }
            }
        } else {
            for (int i = 0; i < k.length; i++) {
                if (s.charAt(from + i) != k[i]) {
                    return false;
                }
            }
        }
        out.addAll(e.ids, 0, e.ids.length);
        return true;
    }

    void put(CharSequence s, int from, int to, int hash, int[] ids, int idsFrom, int idsTo) {
        char[] k = new char[to - from];
        for (int i = 0; i < k.length; i++) {
            k[i] = s.charAt(from + i);
        }
        slots[hash & mask] = new Entry(hash, k, Arrays.copyOfRange(ids, idsFrom, idsTo));
    }

    void clear() {
        Arrays.fill(slots, null);
    }
}
