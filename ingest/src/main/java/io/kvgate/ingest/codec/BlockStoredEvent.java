package io.kvgate.ingest.codec;

/**
 * Flyweight view of one decoded BlockStored event, reused by {@link KvEventDecoder} for every event: valid only
 * during the {@link KvEventHandler#onBlockStored} callback; copy what you keep.
 *
 * <p>Tokens: {@code tokens()[0..tokenInts())} holds {@code tokenCells() * intsPerCell()} ints. A cell is one token
 * id ({@code intsPerCell()==1}) or, in SGLang EAGLE bigram mode, the pair {@code (t[j], t[j+1])}
 * ({@code intsPerCell()==2}): SGLang's page hash feeds BOTH elements of every pair to SHA-256 (u32le each), so
 * both are what the engine hashes and both are kept. Block {@code i} covers cells
 * {@code [i*blockSize, (i+1)*blockSize)}, i.e. ints {@code [i*blockSize*intsPerCell, ...)}.
 */
public final class BlockStoredEvent {
    long[] blockKeys;
    int blockCount;
    boolean hasParent;
    long parentKey;
    int[] tokens;
    int tokenInts;
    int intsPerCell;
    int blockSize;
    long loraId;
    boolean hasLoraId;
    int medium;
    /**
     * The learned-key namespace the engine keys this block's sequence in ({@code io.kvgate.index.block.LearnedNamespace}:
     * TensorRT-LLM's per-block {@code cache_salt} and {@code lora_id}), 0 for none.
     */
    long namespace;
    /** {@link Medium#LOCALITY_UNSPECIFIED}, {@link Medium#LOCALITY_LOCAL} or {@link Medium#LOCALITY_REMOTE}. */
    int locality;
    int groupIdx;
    int specKind;

    BlockStoredEvent(long[] blockKeys, int[] tokens) {
        this.blockKeys = blockKeys;
        this.tokens = tokens;
    }

    void reset() {
        blockCount = 0;
        hasParent = false;
        parentKey = 0;
        tokenInts = 0;
        intsPerCell = 1;
        blockSize = 0;
        loraId = 0;
        hasLoraId = false;
        medium = Medium.NONE;
        namespace = 0;
        locality = Medium.LOCALITY_UNSPECIFIED;
        groupIdx = -1;
        specKind = SpecKind.NONE;
    }

    /** Block keys (64-bit patterns), {@code [0, blockCount())}. */
    public long[] blockKeys() {
        return blockKeys;
    }

    public int blockCount() {
        return blockCount;
    }

    public boolean hasParent() {
        return hasParent;
    }

    /** The parent block's key; meaningful only when {@link #hasParent()}. */
    public long parentKey() {
        return parentKey;
    }

    public int[] tokens() {
        return tokens;
    }

    public int tokenInts() {
        return tokenInts;
    }

    /** 1, or 2 in bigram mode. */
    public int intsPerCell() {
        return intsPerCell;
    }

    public int tokenCells() {
        return tokenInts / intsPerCell;
    }

    public int blockSize() {
        return blockSize;
    }

    public boolean hasLoraId() {
        return hasLoraId;
    }

    public long loraId() {
        return loraId;
    }

    /** A {@link Medium} code. */
    public int medium() {
        return medium;
    }

    /** KV cache group index, -1 when absent. */
    public int groupIdx() {
        return groupIdx;
    }

    /** The group's {@code kv_cache_spec_kind} as a {@link SpecKind} code ({@link SpecKind#NONE} when absent). */
    public int specKind() {
        return specKind;
    }

    /** The block's {@code locality} (vLLM #48281): REMOTE storage is not the publishing engine's alone. */
    public int locality() {
        return locality;
    }

    /** The learned-key namespace of the block's sequence (its cache salt, its LoRA adapter), 0 for none. */
    public long namespace() {
        return namespace;
    }
}
