package io.kvgate.index.hash;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

class PrefixHashCacheTest {
    private static final BlockHashSpec[] SPECS = {
        new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "0", null),
        new BlockHashSpec(HashAlgo.XXHASH_CBOR, 16, "0", null),
        new BlockHashSpec(HashAlgo.SHA256_CBOR, 3, "7", "my-lora"),
        BlockHashSpec.sglang(16),
        BlockHashSpec.sglang(1),
    };

    private static long[] reference(BlockHashSpec spec, int[] tokens, int length, String salt) {
        long[] out = new long[length / spec.blockSize()];
        new BlockHasher(spec).hash(tokens, length, salt, out);
        return out;
    }

    /** A chat that grows every turn; each turn re-sends the whole history. */
    @Test
    void growingConversationHitsEveryEarlierBlockAndMatchesUncached() {
        for (BlockHashSpec spec : SPECS) {
            for (String salt : new String[] {null, "tenant-a"}) {
                PrefixHashCache cache = new PrefixHashCache(spec, 16_384);
                BlockHasher hasher = new BlockHasher(spec, cache);
                SplittableRandom rnd = new SplittableRandom(11);
                int[] tokens = new int[3000];
                int length = 0;
                long[] keys = new long[3000];
                int previousBlocks = 0;
                for (int turn = 1; turn <= 20 && length + 150 <= tokens.length; turn++) {
                    for (int i = 0; i < 150; i++) {
                        tokens[length++] = rnd.nextInt(0, 160_000);
                    }
                    long hitsBefore = cache.hits();
                    int n = hasher.hash(tokens, length, salt, keys);
                    assertArrayEquals(reference(spec, tokens, length, salt), Arrays.copyOf(keys, n),
                        spec + " salt=" + salt + " turn " + turn);
                    // Every block of the previous turn is a hit, except vLLM's salted block 0 (never cached).
                    int uncacheable = spec.algo().isVllm() && salt != null ? 1 : 0;
                    // A bounded cache may have evicted a few; it never reports more hits than blocks repeated.
                    long expected = Math.max(0, previousBlocks - uncacheable);
                    long hits = cache.hits() - hitsBefore;
                    assertTrue(hits <= expected && hits >= expected - cache.evictions(), spec + " turn " + turn);
                    previousBlocks = n;
                }
                assertTrue(cache.evictions() <= 2, "capacity 16384 at <= 20% load evicted " + cache.evictions());
            }
        }
    }

    @Test
    void tinyCacheUnderChurnIsStillExact() {
        for (BlockHashSpec spec : SPECS) {
            PrefixHashCache cache = new PrefixHashCache(spec, 8);
            BlockHasher cached = new BlockHasher(spec, cache);
            SplittableRandom rnd = new SplittableRandom(3);
            int[][] prompts = new int[8][];
            for (int p = 0; p < prompts.length; p++) {
                // Prompts share prefixes of different lengths and tokens from a tiny alphabet, so parents and
                // block contents collide often.
                prompts[p] = rnd.ints(40 + rnd.nextInt(40), 0, 3).toArray();
            }
            long[] keys = new long[100];
            for (int round = 0; round < 300; round++) {
                int[] t = prompts[rnd.nextInt(prompts.length)];
                String salt = rnd.nextBoolean() ? null : "s" + rnd.nextInt(2);
                int len = rnd.nextInt(t.length + 1);
                int n = cached.hash(t, len, salt, keys);
                assertArrayEquals(reference(spec, t, len, salt), Arrays.copyOf(keys, n), spec + " round " + round);
            }
            assertTrue(cache.evictions() > 0, "churn evicted nothing: " + spec);
            assertTrue(cache.hits() > 0, "no hits: " + spec);
        }
    }

    /** Same tokens under a different parent must miss (exact parent compare, not just the fingerprint). */
    @Test
    void sameTokensDifferentParentOrSaltDoNotHit() {
        for (BlockHashSpec spec : SPECS) {
            PrefixHashCache cache = new PrefixHashCache(spec, 64);
            BlockHasher hasher = new BlockHasher(spec, cache);
            int bs = spec.blockSize();
            int[] a = new int[2 * bs];
            int[] b = new int[2 * bs];
            Arrays.fill(a, 5);
            Arrays.fill(b, 5);
            b[0] = 6;
            long[] ka = new long[2];
            long[] kb = new long[2];
            hasher.hash(a, a.length, null, ka);
            hasher.hash(b, b.length, null, kb);
            assertArrayEquals(reference(spec, b, b.length, null), kb);
            // SGLang page 0: unsalted (no prior) vs salted (prior) with identical tokens.
            long[] ks = new long[2];
            hasher.hash(a, a.length, "x", ks);
            assertArrayEquals(reference(spec, a, a.length, "x"), ks);
            hasher.hash(a, a.length, null, ks);
            assertArrayEquals(ka, ks);
        }
    }

    @Test
    void clearForgetsAndCapacityRoundsUp() {
        BlockHashSpec spec = SPECS[0];
        PrefixHashCache cache = new PrefixHashCache(spec, 100);
        assertEquals(128, cache.capacity());
        assertEquals(8, new PrefixHashCache(spec, 8).capacity());
        BlockHasher hasher = new BlockHasher(spec, cache);
        int[] t = new int[64];
        long[] k = new long[4];
        hasher.hash(t, 64, null, k);
        hasher.hash(t, 64, null, k);
        assertEquals(4, cache.hits());
        cache.clear();
        hasher.hash(t, 64, null, k);
        assertEquals(4, cache.hits());
        assertEquals(8, cache.misses());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new PrefixHashCache(spec, 7));
        assertTrue(e.getMessage().startsWith("capacityEntries=7"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new PrefixHashCache(spec, PrefixHashCache.MAX_CAPACITY + 1));
    }
}
