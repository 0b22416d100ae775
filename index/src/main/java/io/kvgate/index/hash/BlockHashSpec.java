package io.kvgate.index.hash;

/**
 * Everything that must match an engine's configuration for our keys to equal the keys it publishes.
 *
 * @param algo      the engine's hash algorithm
 * @param blockSize tokens per block: vLLM {@code --block-size} (default 16), SGLang page size (default 1)
 * @param seed      vLLM: the string the engine derived NONE_HASH from (NONE_HASH = H(CBOR(seed))): its
 *                  {@code PYTHONHASHSEED}, or, for sha256_cbor with PYTHONHASHSEED unset,
 *                  {@link #VLLM_DEFAULT_NONE_HASH_SEED}. Ignored for SGLang (may be null there).
 * @param loraName  vLLM: the LoRA adapter name requests are served with (enters every block's extra keys), or
 *                  null for the base model. Ignored for SGLang, whose event hash does not include LoRA.
 *                  Immutable, thread-safe.
 */
public record BlockHashSpec(HashAlgo algo, int blockSize, String seed, String loraName) {

    /**
     * Largest block size accepted. Engines use 1..256 in practice; the bound keeps each hasher's reusable buffer
     * small (≈ 5 bytes per token) and lets every CBOR array header boundary (up to the 4-byte form) be exercised.
     */
    public static final int MAX_BLOCK_SIZE = 65_536;

    /** Largest LoRA name accepted, in chars: names are adapter identifiers, never prose. */
    public static final int MAX_LORA_NAME_CHARS = 1_024;

    /**
     * The seed vLLM derives NONE_HASH from when {@code PYTHONHASHSEED} is unset and the hash algorithm is
     * cryptographic (sha256, sha256_cbor): {@code DEFAULT_NONE_HASH_SEED} in {@code vllm/v1/core/kv_cache_utils.py},
     * returned by {@code resolve_none_hash_seed} since vLLM PR #51875. Python itself refuses it as a PYTHONHASHSEED,
     * so no engine with xxhash_cbor (whose unset seed is {@code os.urandom(32).hex()}) can ever hash it.
     */
    public static final String VLLM_DEFAULT_NONE_HASH_SEED = "vllm-none-hash";

    /** Bound on the seed string (strtoul accepts any number of leading zeros or spaces, so length alone proves nothing). */
    private static final int MAX_SEED_CHARS = 4_096;

    public BlockHashSpec {
        if (algo == null) {
            throw new IllegalArgumentException("algo=null: must be one of " + HashAlgo.acceptedNames());
        }
        if (blockSize <= 0 || blockSize > MAX_BLOCK_SIZE) {
            throw new IllegalArgumentException("blockSize=" + blockSize + ": must be > 0 and <= " + MAX_BLOCK_SIZE
                + " (and equal to the engine's --block-size / page size)");
        }
        if (algo.isVllm()) {
            if (seed == null) {
                throw new IllegalArgumentException("seed=null: must be the engine's PYTHONHASHSEED string for algo="
                    + algo.configName() + " ('" + VLLM_DEFAULT_NONE_HASH_SEED + "' for a sha256_cbor engine started"
                    + " without it; an xxhash_cbor engine without it draws NONE_HASH from os.urandom and its keys"
                    + " cannot be reproduced)");
            }
            if (seed.equals(VLLM_DEFAULT_NONE_HASH_SEED) && algo != HashAlgo.SHA256_CBOR) {
                throw new IllegalArgumentException("seed='" + seed + "': must be the engine's PYTHONHASHSEED for algo="
                    + algo.configName() + ": vLLM uses '" + VLLM_DEFAULT_NONE_HASH_SEED + "' only for sha256/sha256_cbor"
                    + " without PYTHONHASHSEED; " + algo.configName() + " without it draws a random seed per process");
            }
            if (!seed.equals(VLLM_DEFAULT_NONE_HASH_SEED) && !isAcceptedPythonHashSeed(seed)) {
                throw new IllegalArgumentException("seed='" + abbreviate(seed) + "': must be a value Python accepts"
                    + " for PYTHONHASHSEED ('random', empty, or a decimal integer in [0, 4294967295]) or, for"
                    + " sha256_cbor engines started without PYTHONHASHSEED, '" + VLLM_DEFAULT_NONE_HASH_SEED + "'");
            }
            if (loraName != null) {
                if (loraName.isEmpty() || loraName.length() > MAX_LORA_NAME_CHARS) {
                    throw new IllegalArgumentException("loraName='" + abbreviate(loraName) + "': must be null (base"
                        + " model) or 1.." + MAX_LORA_NAME_CHARS + " chars");
                }
                if (Utf8.encodedLength(loraName) < 0) {
                    throw new IllegalArgumentException("loraName='" + abbreviate(loraName) + "': must not contain an"
                        + " unpaired UTF-16 surrogate (it has no UTF-8 form)");
                }
            }
        }
    }

    /** vLLM spec: sha256_cbor or xxhash_cbor, seed string, optional LoRA name. */
    public static BlockHashSpec vllm(HashAlgo algo, int blockSize, String seed, String loraName) {
        return new BlockHashSpec(algo, blockSize, seed, loraName);
    }

    /**
     * TensorRT-LLM spec: the KV cache manager V2 radix key its streaming publisher sends, no seed; LoRA enters the
     * chain's root as the adapter's task id, which the gateway does not know, so only base-model keys are computed.
     */
    public static BlockHashSpec trtllmV2(int tokensPerBlock) {
        return new BlockHashSpec(HashAlgo.V2_SHA256_64, tokensPerBlock, null, null);
    }

    /** SGLang spec: page hash, no seed, no LoRA. */
    public static BlockHashSpec sglang(int pageSize) {
        return new BlockHashSpec(HashAlgo.SHA256_SGLANG, pageSize, null, null);
    }

    /**
     * Python refuses to start unless PYTHONHASHSEED is "random" or what C {@code strtoul(s, &end, 10)} parses
     * completely to a value <= 4294967295 (leading whitespace and a sign allowed). An empty value counts as unset
     * for Python but vLLM still reads "" and hashes it, so it is reproducible and accepted. Rejecting anything else
     * catches typos (e.g. "O" for "0") at startup instead of as a silent 0% hit rate.
     */
    static boolean isAcceptedPythonHashSeed(String seed) {
        if (seed.isEmpty() || seed.equals("random")) {
            return true;
        }
        if (seed.length() > MAX_SEED_CHARS) {
            return false;
        }
        int i = 0;
        int n = seed.length();
        while (i < n && isCSpace(seed.charAt(i))) {
            i++;
        }
        boolean negative = false;
        if (i < n && (seed.charAt(i) == '+' || seed.charAt(i) == '-')) {
            negative = seed.charAt(i) == '-';
            i++;
        }
        int digitsStart = i;
        long value = 0;
        while (i < n && seed.charAt(i) >= '0' && seed.charAt(i) <= '9') {
            value = value * 10 + (seed.charAt(i) - '0');
            if (value > 4_294_967_295L) {
                return false;
            }
            i++;
        }
        if (i == digitsStart || i != n) {
            return false;
        }
        // strtoul negates in unsigned arithmetic: "-0" is 0, any other negative wraps above the limit.
        return !negative || value == 0;
    }

    private static boolean isCSpace(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == 0x0B || c == '\f' || c == '\r';
    }

    private static String abbreviate(String s) {
        return s.length() <= 80 ? s : s.substring(0, 77) + "...";
    }
}
