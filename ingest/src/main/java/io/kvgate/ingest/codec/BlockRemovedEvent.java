package io.kvgate.ingest.codec;

/** Flyweight view of one decoded BlockRemoved event; valid only during the callback. */
public final class BlockRemovedEvent {
    long[] blockKeys;
    int blockCount;
    int medium;
    /** {@link Medium#LOCALITY_UNSPECIFIED}, {@link Medium#LOCALITY_LOCAL} or {@link Medium#LOCALITY_REMOTE}. */
    int locality;
    int groupIdx;

    BlockRemovedEvent(long[] blockKeys) {
        this.blockKeys = blockKeys;
    }

    void reset() {
        blockCount = 0;
        medium = Medium.NONE;
        locality = Medium.LOCALITY_UNSPECIFIED;
        groupIdx = -1;
    }

    public long[] blockKeys() {
        return blockKeys;
    }

    public int blockCount() {
        return blockCount;
    }

    /** A {@link Medium} code. */
    public int medium() {
        return medium;
    }

    /** KV cache group index, -1 when absent. */
    public int groupIdx() {
        return groupIdx;
    }

    /** The block's {@code locality} (vLLM #48281): REMOTE storage is not the publishing engine's alone. */
    public int locality() {
        return locality;
    }
}
