package io.kvgate.index.block;

/**
 * TensorRT-LLM's v1 block key ({@code hash_algo: v1_block_key}, its default event hash): the 64-bit mix its C++
 * {@code BlockKeyHasher::hash} (cpp/tensorrt_llm/batch_manager/blockKey.cpp) computes for every KV-cache block and
 * publishes in its KV events, and which its Python router recomputes as {@code hash_v1_block_key}
 * (tensorrt_llm/runtime/kv_cache_hash.py): the seed is the block's token count xor the parent key times
 * {@code 0xbf58476d1ce4e5b9} (root parent 0); the first block mixes the request's cache-salt id in; every token id is
 * mixed as a 32-bit value; a LoRA task id is mixed in last. Unseeded and fully specified, so the gateway computes
 * exactly the keys the engine's events carry. Golden vectors: testkit/src/test/python/trtllm_v1_block_key.py.
 *
 * <p>Unlike the gateway's own learned hash this may (with probability 2^-64) return 0; it keys the index directly
 * (exact keys), never a {@link LearnedKeyMap}. Immutable, thread-safe, allocation-free.
 */
public final class TrtllmV1BlockKey implements ChainedTokenHasher {
    /** No LoRA adapter, no cache salt: the keys of base-model requests. */
    public static final TrtllmV1BlockKey PLAIN = new TrtllmV1BlockKey(false, 0, false, 0);

    private static final long UINT32 = 0xFFFFFFFFL;
    private static final long HASH32_CONST = 0x45D9F3BL;
    private static final long HASH64_CONST_1 = 0xBF58476D1CE4E5B9L;
    private static final long HASH64_CONST_2 = 0x94D049BB133111EBL;
    private static final long HASH_COMBINE_CONST = 0x9E3779B9L;
    private static final long PARENT_HASH_CONST = 0xBF58476D1CE4E5B9L;

    private final boolean hasLora;
    private final long loraTaskId;
    private final boolean hasSalt;
    private final long cacheSaltId;

    private TrtllmV1BlockKey(boolean hasLora, long loraTaskId, boolean hasSalt, long cacheSaltId) {
        this.hasLora = hasLora;
        this.loraTaskId = loraTaskId;
        this.hasSalt = hasSalt;
        this.cacheSaltId = cacheSaltId;
    }

    /**
     * The keys of a request with LoRA task id {@code loraTaskId} and/or cache-salt id {@code cacheSaltId} (each null
     * when the request has none). Both are the engine's 64-bit values as the request carries them to the executor.
     */
    public static TrtllmV1BlockKey of(Long loraTaskId, Long cacheSaltId) {
        if (loraTaskId == null && cacheSaltId == null) {
            return PLAIN;
        }
        return new TrtllmV1BlockKey(loraTaskId != null, loraTaskId == null ? 0 : loraTaskId,
            cacheSaltId != null, cacheSaltId == null ? 0 : cacheSaltId);
    }

    /** A sequence's first block chains on parent 0. */
    @Override
    public long rootKey() {
        return 0;
    }

    @Override
    public long blockKey(long parentKey, int[] tokens, int offset, int length) {
        long seed = length ^ (parentKey * PARENT_HASH_CONST);
        if (parentKey == 0 && hasSalt) {
            seed = hash64Mix(cacheSaltId, seed); // the salt enters the first block only
        }
        int end = offset + length;
        for (int i = offset; i < end; i++) {
            seed = hash32Mix(tokens[i] & UINT32, seed);
        }
        if (hasLora) {
            seed = hash64Mix(loraTaskId, seed);
        }
        return seed;
    }

    /** {@code _hash32_mix}: the value wraps to 32 bits (uint32_t in C++) before the size_t terms are added. */
    static long hash32Mix(long value, long seed) {
        value = (((value >>> 16) ^ value) * HASH32_CONST) & UINT32;
        value = (((value >>> 16) ^ value) * HASH32_CONST) & UINT32;
        value = ((value >>> 16) ^ value) & UINT32;
        value = (value + HASH_COMBINE_CONST) & UINT32;
        long combined = value + (seed << 6) + (seed >>> 2);
        return seed ^ combined;
    }

    /** {@code _hash64_mix}: splitmix64's finalizer, then the same combine in 64 bits. */
    static long hash64Mix(long value, long seed) {
        value = (value ^ (value >>> 30)) * HASH64_CONST_1;
        value = (value ^ (value >>> 27)) * HASH64_CONST_2;
        value = value ^ (value >>> 31);
        long combined = value + HASH_COMBINE_CONST + (seed << 6) + (seed >>> 2);
        return seed ^ combined;
    }
}
