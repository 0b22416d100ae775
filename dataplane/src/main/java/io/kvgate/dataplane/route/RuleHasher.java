package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.hash.PrefixHashCache;

/**
 * A rule's block keys for a prompt, exactly as its engines publish them (or, in learned-key mode, as the gateway
 * keys the token ids the engines' events carry). Single-threaded: one instance per thread (the routing stage owns
 * one per rule; render routes and admin build their own). Lives in {@code route} because the routing stage is its
 * main user; it depends only on {@code control} and {@code index}.
 */
public final class RuleHasher {
    private final BlockHasher hasher;
    private final Fmix64ChainedTokenHasher learned;
    private final int blockSize;
    private final boolean unsignedKeys;

    public RuleHasher(RuleConfig rule, int prefixCacheEntries) {
        this.blockSize = rule.blockSize();
        HashAlgo algo = HashAlgo.parse(rule.hashAlgo());
        this.unsignedKeys = algo.isVllm();
        if ("learned".equals(rule.kvKeyMode())) {
            this.learned = Fmix64ChainedTokenHasher.INSTANCE;
            this.hasher = null;
        } else {
            this.learned = null;
            BlockHashSpec spec = algo == HashAlgo.SHA256_SGLANG ? BlockHashSpec.sglang(blockSize)
                : BlockHashSpec.vllm(algo, blockSize, rule.hashSeed(), null);
            this.hasher = prefixCacheEntries > 0 ? new BlockHasher(spec, new PrefixHashCache(spec, prefixCacheEntries))
                : new BlockHasher(spec);
        }
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
        int tokenCount = (int) Math.min(tokens.length, (long) maxBlocks * blockSize);
        if (learned != null) {
            int blocks = tokenCount / blockSize;
            long parent = learned.rootKey();
            for (int b = 0; b < blocks; b++) {
                parent = learned.blockKey(parent, tokens, b * blockSize, blockSize);
                keysOut[b] = parent;
            }
            return blocks;
        }
        return hasher.hash(tokens, tokenCount, cacheSalt, keysOut);
    }

    public int blockSize() {
        return blockSize;
    }

    /** Keys as the engine's events carry them: vLLM unsigned decimal, SGLang signed. */
    public String format(long key) {
        return unsignedKeys && learned == null ? Long.toUnsignedString(key) : Long.toString(key);
    }
}
