package io.kvgate.index.block;

/**
 * Bounded engine-key to own-key map for learned-key mode: a BlockStored is indexed under the gateway's own
 * chained hash of its tokens; the BlockRemoved that follows carries only the engine key, which this map turns
 * back into the own key. The mapping is a pure function of the engine's chain, so entries never need deleting:
 * a stale entry still maps correctly; entries are only overwritten when the table is crowded.
 *
 * <p>Open addressing with a probe window of {@value #WINDOW} slots; when every slot in the window is taken by
 * other keys, one of them (round robin) is overwritten and {@link #overwrites()} counted. A removal whose mapping
 * was overwritten cannot be applied: the caller counts it and should clear the rank if that matters (see
 * {@code ingest}). Memory: 16 bytes per slot on heap.
 *
 * <p><b>Threading contract:</b> single writer (the ingest thread); not for concurrent use.
 */
public final class LearnedKeyMap {
    static final int WINDOW = 16;

    private final long[] engineKeys;
    private final long[] ownKeys; // 0 = empty (ChainedTokenHasher never returns 0)
    private final int mask;
    private int victim;
    private long overwrites;
    private int used;

    public LearnedKeyMap(int capacityEntries) {
        if (capacityEntries < 16 || capacityEntries > 1 << 29) {
            throw new IllegalArgumentException(
                "learnedKeyCapacity=" + capacityEntries + " must be in 16..536870912");
        }
        int slots = Integer.highestOneBit(capacityEntries - 1) << 1;
        this.engineKeys = new long[slots];
        this.ownKeys = new long[slots];
        this.mask = slots - 1;
    }

    /**
     * Entries for an index of {@code capacityBlocks} blocks: one engine key per (block, holder) the index can keep
     * ({@link BlockIndexConfig#DEFAULT_AVG_HOLDERS_PER_BLOCK} per block), at most {@code maxEntries} (the ingest's
     * configured bound). A mapping for a block the index no longer holds only serves a removal it would ignore.
     */
    public static int entriesFor(long capacityBlocks, int maxEntries) {
        return (int) Math.max(16, Math.min(maxEntries, capacityBlocks * BlockIndexConfig.DEFAULT_AVG_HOLDERS_PER_BLOCK));
    }

    /** Heap bytes (array payloads) of a map of {@code capacityEntries}: {@link #heapBytes()} once built. */
    public static long heapBytesFor(int capacityEntries) {
        return (long) (Integer.highestOneBit(capacityEntries - 1) << 1) * 2 * Long.BYTES;
    }

    /** Heap bytes (array payloads) this map holds. */
    public long heapBytes() {
        return (long) (engineKeys.length + ownKeys.length) * Long.BYTES;
    }

    public void put(long engineKey, long ownKey) {
        int s = slot(engineKey);
        for (int i = 0; i < WINDOW; i++) {
            int t = (s + i) & mask;
            if (ownKeys[t] == 0) {
                engineKeys[t] = engineKey;
                ownKeys[t] = ownKey;
                used++;
                return;
            }
            if (engineKeys[t] == engineKey) {
                ownKeys[t] = ownKey;
                return;
            }
        }
        int t = (s + victim) & mask;
        victim = (victim + 1) & (WINDOW - 1);
        engineKeys[t] = engineKey;
        ownKeys[t] = ownKey;
        overwrites++;
    }

    /** The own key learned for {@code engineKey}, or 0 when unknown. */
    public long get(long engineKey) {
        int s = slot(engineKey);
        for (int i = 0; i < WINDOW; i++) {
            int t = (s + i) & mask;
            if (ownKeys[t] == 0) {
                return 0;
            }
            if (engineKeys[t] == engineKey) {
                return ownKeys[t];
            }
        }
        return 0;
    }

    public long overwrites() {
        return overwrites;
    }

    public int size() {
        return used;
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 31)) & mask;
    }
}
