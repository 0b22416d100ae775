package io.kvgate.index.block;

/**
 * Namespaces of learned keys (issue #36 item 10, review T5): an engine keys the blocks of a salted request or of a
 * LoRA adapter apart from the base model's (TensorRT-LLM mixes the cache-salt id into a sequence's first block and the
 * adapter's task id into every block), so a learned key, a hash of the block's tokens alone, would let another tenant's
 * or another adapter's prompt score as a hit. A sequence of a namespace chains from its own root instead of the
 * hasher's: the ingest side roots the event's first block in the namespace its event names (the block's
 * {@code cache_salt}, {@code lora_id}), the request side roots a salted prompt in its {@code cache_salt}'s. Both call
 * these functions, so the two sides agree without reproducing the engine's own salt digest. Pure, allocation-free.
 */
public final class LearnedNamespace {
    /** No namespace: the base model, unsalted. */
    public static final long NONE = 0;

    private static final long SALT_DOMAIN = 0x73616C742D6E7331L; // "salt-ns1"
    private static final long LORA_DOMAIN = 0x6C6F72612D6E7331L; // "lora-ns1"
    private static final long M = 0x9E3779B97F4A7C15L;

    private LearnedNamespace() {}

    /** The namespace of cache salt {@code salt} (its UTF-16 code units; any salt, the empty one included). */
    public static long ofSalt(CharSequence salt) {
        long h = SALT_DOMAIN ^ salt.length() * M;
        for (int i = 0; i < salt.length(); i++) {
            h = (h ^ salt.charAt(i)) * M;
            h ^= h >>> 29;
        }
        return nonZero(Fmix64ChainedTokenHasher.fmix64(h));
    }

    /** The namespace of the engine's LoRA adapter id {@code loraId}. */
    public static long ofLora(long loraId) {
        return nonZero(Fmix64ChainedTokenHasher.fmix64(LORA_DOMAIN ^ loraId * M));
    }

    /** Both: a salted request on an adapter ({@link #NONE} on either side leaves the other). */
    public static long combine(long a, long b) {
        if (a == NONE) {
            return b;
        }
        if (b == NONE) {
            return a;
        }
        return nonZero(Fmix64ChainedTokenHasher.fmix64(a * M ^ b));
    }

    /** The parent key of a sequence's first block in {@code namespace}: the hasher's own root for {@link #NONE}. */
    public static long root(ChainedTokenHasher hasher, long namespace) {
        if (namespace == NONE) {
            return hasher.rootKey();
        }
        return nonZero(Fmix64ChainedTokenHasher.fmix64(hasher.rootKey() ^ namespace));
    }

    private static long nonZero(long h) {
        return h == 0 ? 1 : h;
    }
}
