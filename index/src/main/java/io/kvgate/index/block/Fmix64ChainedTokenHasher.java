package io.kvgate.index.block;

/**
 * Default {@link ChainedTokenHasher}: a 64-bit multiply-xorshift chain over the parent key, the token count and
 * the tokens, finished with MurmurHash3's fmix64. Not cryptographic (a learned index only needs keys that do not
 * collide by accident; 2^-64 per pair), about 1 ns per token. Thread-safe, stateless.
 */
public final class Fmix64ChainedTokenHasher implements ChainedTokenHasher {
    public static final Fmix64ChainedTokenHasher INSTANCE = new Fmix64ChainedTokenHasher();

    private static final long ROOT = 0x6B76676174654B56L; // arbitrary fixed seed ("kvgateKV")
    private static final long M1 = 0x9E3779B97F4A7C15L;
    private static final long M2 = 0xC2B2AE3D27D4EB4FL;

    @Override
    public long rootKey() {
        return ROOT;
    }

    @Override
    public long blockKey(long parentKey, int[] tokens, int offset, int length) {
        long h = fmix64(parentKey ^ M2) + length * M1;
        int end = offset + length;
        for (int i = offset; i < end; i++) {
            h = (h ^ (tokens[i] & 0xFFFFFFFFL)) * M1;
            h ^= h >>> 29;
        }
        h = fmix64(h);
        return h == 0 ? 1 : h;
    }

    static long fmix64(long k) {
        k ^= k >>> 33;
        k *= 0xFF51AFD7ED558CCDL;
        k ^= k >>> 33;
        k *= 0xC4CEB9FE1A85EC53L;
        k ^= k >>> 33;
        return k;
    }
}
