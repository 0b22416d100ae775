package io.kvgate.dataplane.pd;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Conditional P/D: whether a request skips the prefill leg and is served by its decode endpoint alone. It does when
 * the decode endpoint already holds every full block of the prompt (per the KV index, when the decode endpoints
 * publish events), or when the part it does not hold is shorter than {@code pd.min_uncached_tokens}: moving a short
 * prefill's KV across costs more time than computing it where it is needed.
 *
 * <p>Lookups run on the request's event loop: one {@link BlockIndexReader} and one {@link RuleHasher} per rule per
 * event-loop thread (both are single-threaded), created on first use. Prompts whose tokens the gateway does not know
 * (a text prompt on a rule without a tokenizer) are always split.
 */
final class PdPath {
    private final Supplier<BlockIndex> index;
    private final ThreadLocal<PerThread> perThread = ThreadLocal.withInitial(PerThread::new);

    PdPath(Supplier<BlockIndex> index) {
        this.index = index;
    }

    private static final class PerThread {
        BlockIndex index;
        BlockIndexReader reader;
        final Map<RuleConfig, RuleHasher> hashers = new IdentityHashMap<>();
        long[] keys = new long[64];
        final int[] ids = new int[1];
        final int[] matched = new int[1];
    }

    /**
     * The pure decision: local when the decode endpoint holds every full block of a prompt of at least one block,
     * or when the tokens it does not hold are fewer than {@code minUncached}.
     */
    static boolean local(int promptTokens, int cachedTokens, int blockSize, int minUncached) {
        int fullBlockTokens = promptTokens / blockSize * blockSize;
        boolean holdsPrompt = fullBlockTokens > 0 && cachedTokens >= fullBlockTokens;
        return holdsPrompt || promptTokens - cachedTokens < minUncached;
    }

    /**
     * Whether {@code tokens} may be only the routing prefix of a longer prompt (the prompt stage keeps at most
     * {@link io.kvgate.index.block.BlockIndexConfig#DEFAULT_MAX_PROMPT_BLOCKS} blocks): its length then says nothing
     * about the uncached part, and the request is split.
     */
    static boolean truncated(int[] tokens, int blockSize) {
        return tokens.length >= (long) io.kvgate.index.block.BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS * blockSize;
    }

    /**
     * Tokens of the prompt (whole blocks, from the start) that {@code decode} holds according to the KV index; 0 when
     * the rule's decode endpoints publish no events or the gateway has no index.
     */
    int cachedTokens(RuleConfig rule, EndpointState decode, int[] tokens, String cacheSalt) {
        if (decode.config().kvEvents() == null) {
            return 0;
        }
        BlockIndex idx = index.get();
        if (idx == null) {
            return 0;
        }
        PerThread t = perThread.get();
        if (t.index != idx) { // first use on this thread, or the gateway's index was replaced
            t.index = idx;
            t.reader = idx.newReader(1, idx.config().maxPromptBlocks()); // one candidate: the decode endpoint
            t.hashers.clear();
        }
        if (t.hashers.size() > 256) {
            t.hashers.clear(); // configuration reloads replaced the rules: drop the old ones' hashers
        }
        RuleHasher hasher = t.hashers.computeIfAbsent(rule, r -> new RuleHasher(r, 0));
        int blocks = tokens.length / hasher.blockSize();
        if (t.keys.length < blocks) {
            t.keys = new long[Math.max(blocks, t.keys.length * 2)];
        }
        int n = hasher.hash(tokens, cacheSalt, t.keys);
        t.ids[0] = decode.id();
        t.reader.longestPrefix(t.keys, n, t.ids, 1, t.matched, null);
        return t.matched[0] * hasher.blockSize();
    }
}
