package io.kvgate.index.hash;

/**
 * The block-hash algorithms whose keys engines publish in KV events (engine-contracts §3).
 *
 * <ul>
 *   <li>{@link #SHA256_CBOR} — vLLM {@code --prefix-caching-hash-algo sha256_cbor}: SHA-256 over canonical CBOR.</li>
 *   <li>{@link #XXHASH_CBOR} — vLLM {@code --prefix-caching-hash-algo xxhash_cbor}: XXH3-128 (seed 0) over the same
 *       CBOR.</li>
 *   <li>{@link #SHA256_SGLANG} — SGLang's page hash: SHA-256 over the prior digest and little-endian u32 tokens.</li>
 *   <li>{@link #V2_SHA256_64} — TensorRT-LLM's KV cache manager V2 radix key, which its streaming ZeroMQ publisher
 *       (TensorRT-LLM PR #17023) puts in its events: SHA-256 over the parent's full digest and little-endian u32
 *       tokens, the chain rooted at SHA-256 of the request's reuse scope; the key is the first 8 bytes, big-endian,
 *       signed ({@code StreamingEventSink::wireHash}).</li>
 * </ul>
 * vLLM's default {@code sha256} hashes a Python pickle and cannot be reproduced outside Python, so it is deliberately
 * absent. Immutable, thread-safe.
 */
public enum HashAlgo {
    SHA256_CBOR("sha256_cbor", Engine.VLLM, 32),
    XXHASH_CBOR("xxhash_cbor", Engine.VLLM, 16),
    SHA256_SGLANG("sha256_sglang", Engine.SGLANG, 32),
    V2_SHA256_64("v2_sha256_64", Engine.TRTLLM, 32);

    /** Engine name as written in configuration. */
    public static final String ENGINE_VLLM = "vllm";
    /** Engine name as written in configuration. */
    public static final String ENGINE_SGLANG = "sglang";
    /** Engine name as written in configuration. */
    public static final String ENGINE_TRTLLM = "trtllm";

    private enum Engine { VLLM, SGLANG, TRTLLM }

    private final String configName;
    private final Engine engine;
    private final int digestBytes;

    HashAlgo(String configName, Engine engine, int digestBytes) {
        this.configName = configName;
        this.engine = engine;
        this.digestBytes = digestBytes;
    }

    /** The name used in configuration and on the engine command line, e.g. {@code "sha256_cbor"}. */
    public String configName() {
        return configName;
    }

    /** Length of the full digest that chains from block to block: 32 (SHA-256) or 16 (XXH3-128). */
    public int digestBytes() {
        return digestBytes;
    }

    /** True for the vLLM CBOR algorithms (seeded NONE_HASH, unsigned keys from the digest's last 8 bytes). */
    public boolean isVllm() {
        return engine == Engine.VLLM;
    }

    /** True for TensorRT-LLM's V2 radix key (chain rooted at the reuse scope's digest, signed first-8-byte keys). */
    public boolean isTrtllm() {
        return engine == Engine.TRTLLM;
    }

    /** The engine that publishes this algorithm's keys: {@code "vllm"}, {@code "sglang"} or {@code "trtllm"}. */
    public String engineName() {
        return switch (engine) {
            case VLLM -> ENGINE_VLLM;
            case SGLANG -> ENGINE_SGLANG;
            case TRTLLM -> ENGINE_TRTLLM;
        };
    }

    /**
     * Parses a configuration name (exact, lower case).
     *
     * @throws IllegalArgumentException naming the value and every accepted name
     */
    public static HashAlgo parse(String name) {
        if (name != null) {
            for (HashAlgo algo : values()) {
                if (algo.configName.equals(name)) {
                    return algo;
                }
            }
        }
        throw new IllegalArgumentException("hash algorithm '" + name + "' is not supported: accepted names are "
            + acceptedNames() + " (vLLM's default 'sha256' hashes a Python pickle and cannot be reproduced;"
            + " start vLLM with --prefix-caching-hash-algo sha256_cbor or xxhash_cbor)");
    }

    /** {@code "sha256_cbor, xxhash_cbor, sha256_sglang, v2_sha256_64"}. */
    public static String acceptedNames() {
        StringBuilder sb = new StringBuilder();
        for (HashAlgo algo : values()) {
            if (!sb.isEmpty()) {
                sb.append(", ");
            }
            sb.append(algo.configName);
        }
        return sb.toString();
    }

    /**
     * Whether an engine publishes keys computed with this algorithm: vLLM uses sha256_cbor or xxhash_cbor, SGLang
     * uses sha256_sglang, TensorRT-LLM's streaming publisher v2_sha256_64.
     *
     * @throws IllegalArgumentException if {@code engine} is not {@code "vllm"}, {@code "sglang"} or {@code "trtllm"}
     */
    public static boolean engineSupports(String engine, HashAlgo algo) {
        return parseEngine(engine) == algo.engine;
    }

    /**
     * The algorithm to assume for an engine when configuration names none: vLLM → sha256_cbor (the only one of its
     * reproducible algorithms that needs no extra package), SGLang → sha256_sglang (the only one it has),
     * TensorRT-LLM → v2_sha256_64 (the only one of its keys the gateway reproduces).
     *
     * @throws IllegalArgumentException if {@code engine} is not {@code "vllm"}, {@code "sglang"} or {@code "trtllm"}
     */
    public static HashAlgo defaultFor(String engine) {
        return switch (parseEngine(engine)) {
            case VLLM -> SHA256_CBOR;
            case SGLANG -> SHA256_SGLANG;
            case TRTLLM -> V2_SHA256_64;
        };
    }

    /**
     * Checks that an engine and an algorithm agree.
     *
     * @throws IllegalArgumentException naming both values and the rule
     */
    public static void requireCompatible(String engine, HashAlgo algo) {
        if (!engineSupports(engine, algo)) {
            throw new IllegalArgumentException("hash algorithm '" + algo.configName + "' cannot be used with engine '"
                + engine + "': vllm publishes sha256_cbor or xxhash_cbor keys, sglang publishes sha256_sglang keys, trtllm's"
                + " streaming publisher v2_sha256_64 keys");
        }
    }

    private static Engine parseEngine(String engine) {
        if (ENGINE_VLLM.equals(engine)) {
            return Engine.VLLM;
        }
        if (ENGINE_SGLANG.equals(engine)) {
            return Engine.SGLANG;
        }
        if (ENGINE_TRTLLM.equals(engine)) {
            return Engine.TRTLLM;
        }
        throw new IllegalArgumentException("engine '" + engine + "' is not supported: accepted engines are "
            + ENGINE_VLLM + ", " + ENGINE_SGLANG + ", " + ENGINE_TRTLLM);
    }
}
