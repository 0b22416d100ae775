package io.kvgate.ingest.zmq;

import io.kvgate.index.block.Holders;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Consumer;

/**
 * The block size each endpoint's engine says it keys at (every stored event carries it), checked against the
 * block size the gateway keys that endpoint's requests at. A mismatch means zero hits however warm the cache: vLLM
 * keys at {@code --block-size} x DCP (and picks a backend-specific size when {@code --block-size} is absent),
 * SGLang at page size x DCP, TensorRT-LLM at {@code tokens_per_block} (default 32). Mismatching stored events are
 * counted per endpoint and warned about once per endpoint; the index is left as it is (detection only: a learned
 * rule does not adopt the engine's size).
 *
 * <p><b>Threading:</b> {@link #expect} from the configuration thread, {@link #observe} from the ingest thread (the
 * index's single writer), the readers from any thread.
 */
public final class EventBlockSizes {
    private final AtomicIntegerArray expected = new AtomicIntegerArray(Holders.MAX_ENDPOINTS);
    private final AtomicIntegerArray last = new AtomicIntegerArray(Holders.MAX_ENDPOINTS);
    private final AtomicLongArray mismatches = new AtomicLongArray(Holders.MAX_ENDPOINTS);
    /** The endpoints already warned about, until their expected size changes (ingest thread only). */
    private final boolean[] warned = new boolean[Holders.MAX_ENDPOINTS];
    /** How the warning names each endpoint (its host:port and rule), set with its expected size. */
    private final java.util.concurrent.atomic.AtomicReferenceArray<String> names =
        new java.util.concurrent.atomic.AtomicReferenceArray<>(Holders.MAX_ENDPOINTS);
    private final Consumer<String> warn;
    /** Per endpoint: stored events whose cells are token pairs (SGLang's EAGLE bigram radix keys). */
    private final AtomicLongArray bigramEvents = new AtomicLongArray(Holders.MAX_ENDPOINTS);
    /** The endpoints already warned about bigram cells (ingest thread only). */
    private final boolean[] bigramWarned = new boolean[Holders.MAX_ENDPOINTS];

    public EventBlockSizes(Consumer<String> warn) {
        this.warn = warn;
    }

    /**
     * The block size the gateway keys {@code endpointId} at (its rule's {@code block_size}; 0 = do not check), and
     * how warnings name the endpoint.
     */
    public void expect(int endpointId, int blockSize, String name) {
        if (!inRange(endpointId)) {
            return;
        }
        names.set(endpointId, name);
        if (expected.getAndSet(endpointId, blockSize) != blockSize) {
            mismatches.set(endpointId, 0); // a new configuration is judged afresh
        }
    }

    /** A stored event of {@code endpointId} keyed at {@code blockSize} tokens per block (ingest thread). */
    void observe(int endpointId, int blockSize) {
        if (!inRange(endpointId) || blockSize <= 0) {
            return;
        }
        if (last.get(endpointId) != blockSize) {
            last.set(endpointId, blockSize);
        }
        int want = expected.get(endpointId);
        if (want <= 0) {
            return;
        }
        if (blockSize == want) {
            warned[endpointId] = false;
            return;
        }
        mismatches.incrementAndGet(endpointId);
        if (!warned[endpointId]) {
            warned[endpointId] = true;
            warn.accept("endpoint " + names.get(endpointId) + ": the engine's KV events carry block_size " + blockSize
                + " but its rule keys requests at block_size " + want + ": no prefix can match (vLLM keys at"
                + " --block-size x DCP, SGLang at page size x DCP, TensorRT-LLM at tokens_per_block, default 32);"
                + " set the rule's block_size to " + blockSize);
        }
    }

    /**
     * A stored event of {@code endpointId} whose cells hold {@code intsPerCell} token ids (ingest thread). SGLang
     * running EAGLE speculative decoding keys its radix tree by token pairs {@code (t_i, t_i+1)} and hashes both ids
     * of every pair into the page hash; the gateway hashes prompts one token per cell, so such pages never match:
     * counted and warned about once per endpoint.
     */
    void observeCells(int endpointId, int intsPerCell) {
        if (intsPerCell != 2 || endpointId < 0 || endpointId >= Holders.MAX_ENDPOINTS) {
            return;
        }
        bigramEvents.incrementAndGet(endpointId);
        if (!bigramWarned[endpointId]) {
            bigramWarned[endpointId] = true;
            String name = names.get(endpointId);
            warn.accept("endpoint " + (name != null ? name : "#" + endpointId) + ": the engine's KV events key pages by token pairs (SGLang"
                + " EAGLE speculative decoding: bigram radix keys) but the gateway hashes prompts one token per cell, so"
                + " no prefix can match; run the rule's SGLang engines without EAGLE, or route the rule by another policy");
        }
    }

    /** Stored events of the endpoint whose cells are token pairs (SGLang EAGLE bigram keys): never matched. */
    public long bigramEvents(int endpointId) {
        return endpointId >= 0 && endpointId < Holders.MAX_ENDPOINTS ? bigramEvents.get(endpointId) : 0;
    }

    /** The block size of the endpoint's latest stored event, 0 before any. */
    public int lastEventBlockSize(int endpointId) {
        return inRange(endpointId) ? last.get(endpointId) : 0;
    }

    /** Stored events whose block size differed from the expected one since it was set. */
    public long mismatches(int endpointId) {
        return inRange(endpointId) ? mismatches.get(endpointId) : 0;
    }

    /** The endpoint's latest stored event differs from the expected block size. */
    public boolean mismatched(int endpointId) {
        if (!inRange(endpointId)) {
            return false;
        }
        int seen = last.get(endpointId);
        int want = expected.get(endpointId);
        return seen > 0 && want > 0 && seen != want;
    }

    private static boolean inRange(int endpointId) {
        return endpointId >= 0 && endpointId < Holders.MAX_ENDPOINTS;
    }
}
