package io.kvgate.ingest.codec;

/**
 * Receives decoded KV-cache events, in wire order, on the decoding thread. Arguments are flyweights reused for
 * the next event: read them inside the callback, never keep them. Implementations must not throw; an exception
 * escaping a callback is caught by the decoder, counted as a handler error and ends that frame.
 */
public interface KvEventHandler {
    void onBlockStored(BlockStoredEvent event);

    void onBlockRemoved(BlockRemovedEvent event);

    void onAllBlocksCleared();

    /**
     * A block moved between memory tiers without leaving the engine (TensorRT-LLM's {@code updated} event with a
     * changed {@code cache_level}: offloaded to host memory or onboarded back); {@link Medium} codes. The msgpack
     * engines publish no such event (a move is a removal plus a store there), hence the no-op default.
     */
    default void onBlockMoved(long blockKey, int fromMedium, int toMedium) {
    }
}
