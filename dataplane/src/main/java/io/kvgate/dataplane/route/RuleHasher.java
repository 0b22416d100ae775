package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.index.block.ChainedTokenHasher;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.LearnedNamespace;
import io.kvgate.index.block.TrtllmV1BlockKey;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.hash.PrefixHashCache;

import java.util.HashMap;
import java.util.Map;

/**
 * A rule's block keys for a prompt, exactly as its engines publish them (or, in learned-key mode, as the gateway
 * keys the token ids the engines' events carry). Single-threaded: one instance per thread (the routing stage owns
 * one per rule; render routes and admin build their own). Lives in {@code route} because the routing stage is its
 * main user; it depends only on {@code control} and {@code index}.
 */
public final class RuleHasher {
    private final BlockHasher hasher;
    private final PrefixHashCache prefixCache;
    /** A 64-bit integer chain: the gateway's learned hash, or TensorRT-LLM's v1 block key (exact); else null. */
    private final ChainedTokenHasher learned;
    /**
     * TensorRT-LLM's v1 block key: a salted request gets no keys, since the engine's salt id is a digest of the salt
     * whose function differs between its builds (BLAKE3 in the LLM API's get_cache_salt_id, SHA-256 in
     * runtime/kv_cache_hash.py), and a LoRA request none (its key holds the adapter's task id, which the request
     * does not carry to the gateway).
     */
    private final boolean trtllmV1;
    /**
     * TensorRT-LLM in learned-key mode: its drained events name each block's {@code cache_salt} and {@code lora_id}, and
     * the ingest roots those sequences in their namespace ({@link LearnedNamespace}); a salted prompt is keyed in its
     * salt's namespace, a LoRA prompt gets no keys (issue #36 item 10, review T5). Other engines' learned keys are the
     * tokens' alone, as their events name neither.
     */
    private final boolean namespacedLearned;
    private final int blockSize;
    private final boolean unsignedKeys;
    /** vLLM keys of LoRA requests: one hasher per adapter name (the name is in every block's extra keys). */
    private final Map<String, BlockHasher> adapterHashers;
    private final HashAlgo algo;
    private final String seed;
    /**
     * {@code hash_seed: auto} not resolved yet: no keys at all, since keys under a guessed seed would look like a
     * cache that is merely cold. The parity probe resolves the seed and a reload builds a new hasher with it.
     */
    private final boolean seedUnresolved;

    /**
     * Bound on distinct adapters one rule hashes for. Adapter names reach the hasher only after the prompt stage
     * matched them against the rule's adapters, so this is a guard, not a policy: past it a LoRA request gets no
     * keys (routed without KV scores) instead of growing memory.
     */
    static final int MAX_ADAPTERS = 256;

    public RuleHasher(RuleConfig rule, int prefixCacheEntries) {
        this.blockSize = rule.blockSize();
        this.trtllmV1 = isTrtllmV1(rule);
        this.namespacedLearned = "learned".equals(rule.kvKeyMode())
            && io.kvgate.dataplane.engine.EngineProfiles.of(rule).namesBlockNamespaces();
        if (trtllmV1) {
            this.unsignedKeys = true; // size_t in its JSON events
            this.algo = null;
            this.seed = rule.hashSeed();
            this.adapterHashers = null;
            this.seedUnresolved = false;
            this.learned = "learned".equals(rule.kvKeyMode()) ? Fmix64ChainedTokenHasher.INSTANCE : TrtllmV1BlockKey.PLAIN;
            this.hasher = null;
            this.prefixCache = null;
            return;
        }
        HashAlgo algo = HashAlgo.parse(rule.hashAlgo());
        this.unsignedKeys = algo.isVllm();
        this.algo = algo;
        this.seed = rule.hashSeed();
        this.adapterHashers = algo.isVllm() && !"learned".equals(rule.kvKeyMode()) ? new HashMap<>() : null;
        this.seedUnresolved = algo.isVllm() && !"learned".equals(rule.kvKeyMode()) && rule.hashSeedAuto();
        BlockHashSpec spec = spec(rule);
        if ("learned".equals(rule.kvKeyMode())) {
            this.learned = Fmix64ChainedTokenHasher.INSTANCE;
            this.hasher = null;
            this.prefixCache = null;
        } else if (spec == null) { // an auto seed not resolved yet
            this.learned = null;
            this.hasher = null;
            this.prefixCache = null;
        } else {
            this.learned = null;
            this.prefixCache = prefixCacheEntries > 0 ? new PrefixHashCache(spec, prefixCacheEntries) : null;
            this.hasher = prefixCache != null ? new BlockHasher(spec, prefixCache) : new BlockHasher(spec);
        }
    }

    /**
     * The engines' block hash of {@code rule} (base model), or null in learned-key mode (the gateway's own keys) and
     * while a {@code hash_seed: auto} is not resolved (no keys yet).
     */
    public static BlockHashSpec spec(RuleConfig rule) {
        if (isTrtllmV1(rule)) {
            return null; // a 64-bit integer chain, no digest
        }
        HashAlgo algo = HashAlgo.parse(rule.hashAlgo());
        if ("learned".equals(rule.kvKeyMode()) || (algo.isVllm() && rule.hashSeedAuto())) {
            return null;
        }
        return switch (algo) {
            case SHA256_SGLANG -> BlockHashSpec.sglang(rule.blockSize());
            case V2_SHA256_64 -> BlockHashSpec.trtllmV2(rule.blockSize());
            default -> BlockHashSpec.vllm(algo, rule.blockSize(), rule.hashSeed(), null);
        };
    }

    /** Whether the rule names TensorRT-LLM's v1 block key, which is not a digest algorithm ({@link HashAlgo}). */
    public static boolean isTrtllmV1(RuleConfig rule) {
        return RuleConfig.TRTLLM_V1_BLOCK_KEY.equals(rule.hashAlgo());
    }

    /** Heap bytes of this hasher's prefix-hash memo (0 without one). */
    public long cacheHeapBytes() {
        return prefixCache == null ? 0 : prefixCache.heapBytes();
    }

    /** Writes the key of every full block of {@code tokens} into {@code keysOut}; returns how many. */
    public int hash(int[] tokens, String cacheSalt, long[] keysOut) {
        return hash(tokens, cacheSalt, keysOut, Integer.MAX_VALUE);
    }

    /**
     * Writes the keys of the first full blocks of {@code tokens}, at most {@code maxBlocks} of them, into
     * {@code keysOut}; returns how many. Block keys chain from the start, so a lookup that only uses the first
     * {@code maxBlocks} blocks never needs the rest hashed (reliability review H4).
     */
    public int hash(int[] tokens, String cacheSalt, long[] keysOut, int maxBlocks) {
        return hash(tokens, cacheSalt, null, keysOut, maxBlocks);
    }

    /**
     * As {@link #hash(int[], String, long[], int)} for a request served by LoRA adapter {@code lora} (null = the
     * base model). vLLM puts the adapter name in every block's extra keys ({@code _gen_lora_extra_hash_keys} →
     * {@code [lora_request.lora_name]}, before the cache salt), so an adapter's blocks never share a key with the
     * base model's. SGLang's page hash has no LoRA input (its events carry the same key for both), and learned keys
     * are token-only, so there the name does not change the keys — except on TensorRT-LLM ({@link #namespacedLearned}).
     *
     * @return the number of keys written; 0 when the adapter name cannot be hashed (over {@link #MAX_ADAPTERS}
     *     distinct names, or not a valid name), the seed is unresolved ({@link #seedUnresolved}), the cache salt
     *     cannot be hashed, or a TensorRT-LLM request runs on an adapter (its radix key's root holds the adapter's
     *     task id, which the gateway does not know) — the request is then routed without KV scores
     */
    public int hash(int[] tokens, String cacheSalt, String lora, long[] keysOut, int maxBlocks) {
        if (seedUnresolved || (lora != null && algo != null && algo.isTrtllm() && learned == null)) {
            return 0;
        }
        boolean v1Exact = trtllmV1 && learned != Fmix64ChainedTokenHasher.INSTANCE;
        if (v1Exact && (lora != null || cacheSalt != null)) {
            return 0; // see trtllmV1: no keys rather than keys that cannot be checked
        }
        BlockHasher h = hasher;
        if (lora != null && adapterHashers != null) {
            h = adapterHasher(lora);
            if (h == null) {
                return 0;
            }
        }
        int tokenCount = (int) Math.min(tokens.length, (long) maxBlocks * blockSize);
        if (learned != null) {
            long namespace = LearnedNamespace.NONE;
            if (namespacedLearned) {
                if (lora != null) {
                    return 0; // the adapter's blocks are namespaced by its engine id, which the request does not carry
                }
                if (cacheSalt != null) {
                    namespace = LearnedNamespace.ofSalt(cacheSalt);
                }
            }
            int blocks = tokenCount / blockSize;
            long parent = LearnedNamespace.root(learned, namespace);
            for (int b = 0; b < blocks; b++) {
                parent = learned.blockKey(parent, tokens, b * blockSize, blockSize);
                keysOut[b] = parent;
            }
            return blocks;
        }
        // A salt the hasher cannot take (BlockHasher.ERR_BAD_CACHE_SALT) is no keys, like any other unhashable input.
        return Math.max(0, h.hash(tokens, tokenCount, cacheSalt, keysOut));
    }

    /**
     * The adapter's hasher, built on first use. No prefix-hash cache: its digests depend on the adapter, and one
     * cache per adapter would multiply the base cache's memory by the adapter count.
     */
    private BlockHasher adapterHasher(String lora) {
        BlockHasher h = adapterHashers.get(lora);
        if (h != null || adapterHashers.size() >= MAX_ADAPTERS) {
            return h;
        }
        try {
            h = new BlockHasher(BlockHashSpec.vllm(algo, blockSize, seed, lora));
        } catch (IllegalArgumentException badName) {
            return null;
        }
        adapterHashers.put(lora, h);
        return h;
    }

    /** True while the rule's {@code hash_seed: auto} is unresolved: {@link #hash} then writes no keys. */
    public boolean seedUnresolved() {
        return seedUnresolved;
    }

    public int blockSize() {
        return blockSize;
    }

    /** Keys as the engine's events carry them: vLLM unsigned decimal, SGLang and TensorRT-LLM signed. */
    public String format(long key) {
        return unsignedKeys && (learned == null || learned instanceof TrtllmV1BlockKey) ? Long.toUnsignedString(key)
            : Long.toString(key);
    }
}
