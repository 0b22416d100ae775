package io.kvgate.index.block;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Consumer;

import net.openhft.chronicle.bytes.BytesStore;
import net.openhft.chronicle.bytes.RandomDataInput;
import net.openhft.chronicle.hash.Data;
import net.openhft.chronicle.map.ChronicleMap;
import net.openhft.chronicle.map.ExternalMapQueryContext;
import net.openhft.chronicle.map.MapEntry;
import net.openhft.chronicle.map.MapSegmentContext;

/**
 * The exact KV-cache inventory: which (endpoint, DP rank) holders hold which block, keyed by the engine's 64-bit
 * block key, in an off-heap Chronicle Map sized once at startup.
 *
 * <p><b>Threading contract.</b> Exactly one writer thread (the ingest thread) calls {@link #stored},
 * {@link #removed}, {@link #clearRank}, {@link #removeEndpoint} and {@link #close}. Any number of reader threads
 * read through their own {@link BlockIndexReader} ({@link #newReader()}); counters ({@link #blocks(int)},
 * {@link #size()}, ...) are readable from any thread. Readers see every block's holder list atomically (the map's
 * per-segment read lock), but not a snapshot across blocks: a lookup racing with ingest may see block 5 updated
 * and block 4 not yet. That is consistent enough for routing, which is a hint: the worst case is one request
 * scored against an inventory a few microseconds old, exactly as stale as the event stream itself.
 *
 * <p><b>Value layout.</b> See {@link Holders}: 4 bytes per (block, rank) with a reference count, because vLLM
 * stores duplicates and removes each copy.
 *
 * <p><b>Capacity and eviction.</b> The map holds at most {@code capacityBlocks} distinct blocks. When a new block
 * arrives at capacity, the writer evicts a batch of {@code max(1, capacityBlocks / 1024)} blocks from one segment,
 * segments taken round robin, entries in hash-slot order: hash-random victims, O(batch) work amortized over the
 * next batch of inserts, counted in {@link #evictions()}. Random victims are safe: an evicted block only makes the
 * index under-report (a cold window), never report a block the engine does not hold, and the per-endpoint counts
 * stay exact because eviction walks the holder list of each victim.
 *
 * <p><b>Clearing.</b> {@link #clearRank} and {@link #removeEndpoint} walk every segment (O(blocks); a restart,
 * gap or AllBlocksCleared is rare), each segment under its own lock so readers are never blocked for long.
 */
public final class BlockIndex implements AutoCloseable {
    private static final int KEY_BYTES = 8;

    private final BlockIndexConfig config;
    private final ChronicleMap<Long, byte[]> map;
    private final int segments;
    private final int evictBatch;

    // Writer-owned scratch, reused for every operation (no allocation per block).
    private final BytesStore<?, ?> keyStore = BytesStore.wrap(new byte[KEY_BYTES]);
    private final BytesStore<?, ?> valueStore;
    private final int[] cells;
    private final int[] droppedCells;

    // Published counters: written only by the writer (release), read from anywhere (acquire).
    private final AtomicLongArray blocksPerEndpoint;
    private final AtomicLong size = new AtomicLong();
    private final AtomicLong memberships = new AtomicLong();
    private final AtomicLong evictions = new AtomicLong();
    private final AtomicLong insertFailures = new AtomicLong();
    private final AtomicLong unknownRemovals = new AtomicLong();
    private final AtomicLong storedOps = new AtomicLong();
    private final AtomicLong removedOps = new AtomicLong();

    /** Keys whose holder set changed, for the readers' caches. */
    private final ChangeLog changes = new ChangeLog(1 << 16);

    private int evictCursor;
    private final SegmentWalker walker = new SegmentWalker();
    private final BlockIndexReader ownReader;

    public BlockIndex(BlockIndexConfig config) {
        this.config = config;
        this.map = ChronicleMap.of(Long.class, byte[].class)
            .name("kvgate-block-index")
            .entries(config.capacityBlocks())
            .averageValueSize((double) Holders.CELL_BYTES * config.avgHoldersPerBlock())
            // Slack for hash skew between segments: a segment that fills before the whole map does may
            // take extra tiers rather than fail the insert.
            .maxBloatFactor(2.0)
            .create();
        this.segments = map.segments();
        this.evictBatch = Math.max(1, config.capacityBlocks() >>> 10);
        int maxCells = config.maxEndpoints() * Holders.MAX_RANKS;
        this.cells = new int[maxCells];
        this.droppedCells = new int[maxCells];
        this.valueStore = BytesStore.wrap(new byte[maxCells * Holders.CELL_BYTES]);
        this.blocksPerEndpoint = new AtomicLongArray(config.maxEndpoints());
        this.ownReader = new BlockIndexReader(this);
    }

    public BlockIndex(int capacityBlocks, int maxEndpoints) {
        this(BlockIndexConfig.of(capacityBlocks, maxEndpoints));
    }

    public BlockIndexConfig config() {
        return config;
    }

    /** A reader for one reader thread (each thread its own: readers hold scratch state). */
    public BlockIndexReader newReader() {
        return new BlockIndexReader(this);
    }

    /**
     * Convenience for the single routing thread: the index's own reader. Not for use from several threads at once;
     * other threads take {@link #newReader()}.
     */
    public void longestPrefix(long[] keys, int keyCount, int[] endpointIds, int endpointCount,
                              int[] matchedBlocksOut) {
        ownReader.longestPrefix(keys, keyCount, endpointIds, endpointCount, matchedBlocksOut, null);
    }

    // ------------------------------------------------------------------ writer side

    /** One copy of {@code key} stored by (endpointId, rank). Writer thread only. */
    public void stored(int endpointId, int rank, long key) {
        checkHolder(endpointId, rank);
        storedOps.setRelease(storedOps.getPlain() + 1);
        if (size.getPlain() >= config.capacityBlocks() && !containsWriter(key)) {
            evictBatch();
        }
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = map.queryContext(keyStore, 0, KEY_BYTES)) {
            c.updateLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e == null) {
                valueStore.writeInt(0, Holders.cell(endpointId, rank, 1));
                try {
                    c.absentEntry().doInsert(c.wrapValueBytesAsData(valueStore, 0, Holders.CELL_BYTES));
                } catch (IllegalStateException full) {
                    // A segment ran out of tiers: drop the block (a cold window, never a phantom) and count it.
                    insertFailures.setRelease(insertFailures.getPlain() + 1);
                    return;
                }
                size.setRelease(size.getPlain() + 1);
                memberships.setRelease(memberships.getPlain() + 1);
                blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) + 1);
                changes.append(key);
                return;
            }
            int n = readCells(e.value());
            int holder = Holders.holder(endpointId, rank);
            boolean endpointSeen = false;
            for (int i = 0; i < n; i++) {
                int cell = cells[i];
                if (Holders.holderOf(cell) == holder) {
                    int ref = Holders.refOf(cell);
                    if (ref < Holders.MAX_REF) {
                        cells[i] = cell + 1;
                        writeBack(c, e, n);
                    }
                    return;
                }
                if (Holders.endpointOf(cell) == endpointId) {
                    endpointSeen = true;
                }
            }
            cells[n] = Holders.cell(endpointId, rank, 1);
            writeBack(c, e, n + 1);
            if (!endpointSeen) {
                memberships.setRelease(memberships.getPlain() + 1);
                blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) + 1);
                changes.append(key);
            }
        }
    }

    /** One copy of {@code key} removed by (endpointId, rank). Unknown blocks are counted and ignored. */
    public void removed(int endpointId, int rank, long key) {
        checkHolder(endpointId, rank);
        removedOps.setRelease(removedOps.getPlain() + 1);
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = map.queryContext(keyStore, 0, KEY_BYTES)) {
            c.updateLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e == null) {
                unknownRemovals.setRelease(unknownRemovals.getPlain() + 1);
                return;
            }
            int n = readCells(e.value());
            int holder = Holders.holder(endpointId, rank);
            int at = -1;
            boolean endpointElsewhere = false;
            for (int i = 0; i < n; i++) {
                int cell = cells[i];
                if (Holders.holderOf(cell) == holder) {
                    at = i;
                } else if (Holders.endpointOf(cell) == endpointId) {
                    endpointElsewhere = true;
                }
            }
            if (at < 0) {
                unknownRemovals.setRelease(unknownRemovals.getPlain() + 1);
                return;
            }
            int ref = Holders.refOf(cells[at]);
            if (ref == Holders.MAX_REF) {
                return; // saturated counts are sticky until the rank is cleared
            }
            if (ref > 1) {
                cells[at] = cells[at] - 1;
                writeBack(c, e, n);
                return;
            }
            cells[at] = cells[n - 1];
            n--;
            if (!endpointElsewhere) {
                memberships.setRelease(memberships.getPlain() - 1);
                blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) - 1);
            }
            if (n == 0) {
                e.doRemove();
                size.setRelease(size.getPlain() - 1);
                changes.append(key);
            } else {
                writeBack(c, e, n);
                if (!endpointElsewhere) {
                    changes.append(key);
                }
            }
        }
    }



    /** Forget everything (endpointId, rank) holds (engine restart, unfillable gap, AllBlocksCleared). */
    public long clearRank(int endpointId, int rank) {
        checkHolder(endpointId, rank);
        return walkAll(SegmentWalker.CLEAR_HOLDER, endpointId, Holders.holder(endpointId, rank));
    }

    /** Forget every rank of an endpoint (endpoint removed from configuration). */
    public long removeEndpoint(int endpointId) {
        checkHolder(endpointId, 0);
        return walkAll(SegmentWalker.CLEAR_ENDPOINT, endpointId, -1);
    }

    private long walkAll(int mode, int endpointId, int holder) {
        walker.start(mode, endpointId, holder);
        for (int s = 0; s < segments; s++) {
            try (MapSegmentContext<Long, byte[], ?> sc = map.segmentContext(s)) {
                sc.forEachSegmentEntry(walker);
            }
            if (mode == SegmentWalker.EVICT && walker.removedBlocks >= walker.budget) {
                break;
            }
        }
        return walker.removedMemberships;
    }

    private void evictBatch() {
        walker.start(SegmentWalker.EVICT, -1, -1);
        walker.budget = evictBatch;
        // Round robin over segments so successive batches spread over the key space; bounded by one full lap.
        for (int tried = 0; tried < segments && walker.removedBlocks < walker.budget; tried++) {
            int s = evictCursor;
            evictCursor = evictCursor + 1 == segments ? 0 : evictCursor + 1;
            try (MapSegmentContext<Long, byte[], ?> sc = map.segmentContext(s)) {
                sc.forEachSegmentEntryWhile(walker);
            }
        }
        evictions.setRelease(evictions.getPlain() + walker.removedBlocks);
    }

    private boolean containsWriter(long key) {
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = map.queryContext(keyStore, 0, KEY_BYTES)) {
            c.readLock().lock();
            return c.entry() != null;
        }
    }

    private int readCells(Data<byte[]> value) {
        RandomDataInput in = value.bytes();
        long off = value.offset();
        int n = (int) (value.size() / Holders.CELL_BYTES);
        for (int i = 0; i < n; i++) {
            cells[i] = in.readInt(off + (long) i * Holders.CELL_BYTES);
        }
        return n;
    }

    private void writeBack(ExternalMapQueryContext<Long, byte[], ?> c, MapEntry<Long, byte[]> e, int n) {
        for (int i = 0; i < n; i++) {
            valueStore.writeInt((long) i * Holders.CELL_BYTES, cells[i]);
        }
        e.doReplaceValue(c.wrapValueBytesAsData(valueStore, 0, (long) n * Holders.CELL_BYTES));
    }

    private void checkHolder(int endpointId, int rank) {
        if (endpointId < 0 || endpointId >= config.maxEndpoints()) {
            throw new IllegalArgumentException(
                "endpointId=" + endpointId + " must be in 0.." + (config.maxEndpoints() - 1));
        }
        if (rank < 0 || rank >= Holders.MAX_RANKS) {
            throw new IllegalArgumentException("rank=" + rank + " must be in 0..7");
        }
    }

    /** Walks segment entries for clear/remove/evict; one instance, reused (no lambda allocation per call). */
    private final class SegmentWalker implements Consumer<MapEntry<Long, byte[]>>,
        java.util.function.Predicate<MapEntry<Long, byte[]>> {
        static final int CLEAR_HOLDER = 0;
        static final int CLEAR_ENDPOINT = 1;
        static final int EVICT = 2;
        int mode;
        int endpointId;
        int holder;
        long removedMemberships;
        long removedBlocks;
        long budget;

        void start(int mode, int endpointId, int holder) {
            this.mode = mode;
            this.endpointId = endpointId;
            this.holder = holder;
            this.removedMemberships = 0;
            this.removedBlocks = 0;
            this.budget = Long.MAX_VALUE;
        }

        @Override
        public void accept(MapEntry<Long, byte[]> e) {
            test(e);
        }

        @Override
        public boolean test(MapEntry<Long, byte[]> e) {
            int n = readCells(e.value());
            int kept = 0;
            int dropped = 0;
            for (int i = 0; i < n; i++) {
                int cell = cells[i];
                boolean drop = switch (mode) {
                    case CLEAR_HOLDER -> Holders.holderOf(cell) == holder;
                    case CLEAR_ENDPOINT -> Holders.endpointOf(cell) == endpointId;
                    default -> true;
                };
                if (drop) {
                    droppedCells[dropped++] = cell;
                } else {
                    cells[kept++] = cell;
                }
            }
            if (dropped == 0) {
                return true;
            }
            // Per-endpoint counts are per distinct (block, endpoint): decrement once per endpoint that has no
            // surviving rank on this block.
            for (int d = 0; d < dropped; d++) {
                int ep = Holders.endpointOf(droppedCells[d]);
                if (listed(droppedCells, 0, d, ep) || listed(cells, 0, kept, ep)) {
                    continue;
                }
                memberships.setRelease(memberships.getPlain() - 1);
                blocksPerEndpoint.setRelease(ep, blocksPerEndpoint.getPlain(ep) - 1);
                removedMemberships++;
            }
            changes.append(e.key().bytes().readLong(e.key().offset()));
            if (kept == 0) {
                e.doRemove();
                size.setRelease(size.getPlain() - 1);
                removedBlocks++;
            } else {
                for (int i = 0; i < kept; i++) {
                    valueStore.writeInt((long) i * Holders.CELL_BYTES, cells[i]);
                }
                e.doReplaceValue(e.context().wrapValueBytesAsData(valueStore, 0,
                    (long) kept * Holders.CELL_BYTES));
            }
            return removedBlocks < budget;
        }

        private static boolean listed(int[] a, int from, int to, int ep) {
            for (int i = from; i < to; i++) {
                if (Holders.endpointOf(a[i]) == ep) {
                    return true;
                }
            }
            return false;
        }
    }

    // ------------------------------------------------------------------ reader support (package)

    ChronicleMap<Long, byte[]> map() {
        return map;
    }

    ChangeLog changes() {
        return changes;
    }

    // ------------------------------------------------------------------ counters (any thread)

    /** Distinct blocks held by any rank of {@code endpointId}: exact. */
    public long blocks(int endpointId) {
        return blocksPerEndpoint.getAcquire(endpointId);
    }

    /** Distinct blocks in the index. */
    public long size() {
        return size.getAcquire();
    }

    /** Distinct (block, endpoint) pairs: the sum of {@link #blocks(int)} over all endpoints. */
    public long memberships() {
        return memberships.getAcquire();
    }

    /** Blocks evicted because the index was at capacity. */
    public long evictions() {
        return evictions.getAcquire();
    }

    /** Inserts dropped because a segment was full (hash skew beyond the map's slack). */
    public long insertFailures() {
        return insertFailures.getAcquire();
    }

    /** Removals for blocks or holders the index did not have (evicted, or missed events). */
    public long unknownRemovals() {
        return unknownRemovals.getAcquire();
    }

    public long storedOps() {
        return storedOps.getAcquire();
    }

    public long removedOps() {
        return removedOps.getAcquire();
    }

    /** Off-heap bytes the map has allocated (its full pre-sized footprint, not only what is filled). */
    public long sizeBytes() {
        return map.offHeapMemoryUsed();
    }

    public int segments() {
        return segments;
    }

    /** Closes the map; writer thread only, after every reader has stopped. */
    @Override
    public void close() {
        map.close();
    }
}
