package io.kvgate.index.block;

import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Predicate;

import net.openhft.chronicle.bytes.BytesStore;
import net.openhft.chronicle.bytes.RandomDataInput;
import net.openhft.chronicle.hash.Data;
import net.openhft.chronicle.map.ChronicleMap;
import net.openhft.chronicle.map.ExternalMapQueryContext;
import net.openhft.chronicle.map.MapEntry;
import net.openhft.chronicle.map.MapSegmentContext;

/**
 * The exact KV-cache inventory: which (endpoint, DP rank) holders hold which block, in which memory tier, keyed by
 * the engine's 64-bit block key, in an off-heap Chronicle Map sized once at startup.
 *
 * <p><b>Threading contract.</b> Exactly one writer thread (the ingest thread) calls {@link #stored},
 * {@link #removed}, {@link #clearRank}, {@link #removeEndpoint}, {@link #reclaimStep} and {@link #close}. Any number
 * of reader threads read through their own {@link BlockIndexReader} ({@link #newReader()}); counters
 * ({@link #blocks(int)}, {@link #size()}, ...) are readable from any thread. Readers see every block's holder list
 * atomically (the map's per-segment read lock), but not a snapshot across blocks: a lookup racing with ingest may
 * see block 5 updated and block 4 not yet. That is consistent enough for routing, which is a hint.
 *
 * <p><b>Value layout.</b> One 8-byte word per (block, holder, tier), see {@link Holders#WORD_BYTES}: the holder, a
 * reference count (vLLM stores duplicates and removes each copy), the memory tier of the event's {@code medium},
 * and the holder's generation.
 *
 * <p><b>Clears in O(1)</b> (review M15). Clearing a holder (engine restart, unfillable gap, malformed frame,
 * AllBlocksCleared, removed endpoint) only bumps its generation: every word stored under an older generation is dead
 * from that instant, for readers (they compare with {@link #generation}) and for the counts, which are kept per
 * endpoint as the number of blocks held by each exact subset of its ranks (256 counters), so a clear moves counts
 * between subsets instead of visiting blocks. Dead words are reclaimed lazily: by the writer whenever it touches
 * their block, and by {@link #reclaimStep}, which the ingest runs when idle, one segment per call. A clear also
 * bumps the {@link #clearEpoch()}, on which readers drop their private caches (O(1)). Work counters
 * ({@link #entriesVisited()}, {@link #clearEntryVisits()}) let tests assert the cost without timing anything.
 * Generations are 30 bits: a holder cleared 2^30 times wraps, and only then is one full walk done for it.
 *
 * <p><b>Capacity and eviction.</b> The map holds at most {@code capacityBlocks} entries (blocks, including blocks
 * whose holders were all cleared and that await reclaim). When a new block arrives at capacity, the writer evicts a
 * batch of {@code max(1, capacityBlocks / 1024)} entries from one segment, segments taken round robin, entries in
 * hash-slot order, counted in {@link #evictions()}. Random victims are safe: an evicted block only makes the index
 * under-report (a cold window), never report a block the engine does not hold.
 */
public final class BlockIndex implements AutoCloseable {
    private static final int KEY_BYTES = 8;
    private static final int RANK_SETS = 1 << Holders.MAX_RANKS;

    private final BlockIndexConfig config;
    private final ChronicleMap<Long, byte[]> map;
    private final int segments;
    private final int evictBatch;
    /** At most 64 endpoints: the change log carries endpoint bitmaps (reader caches exist only then). */
    private final boolean bitmapEndpoints;

    // Writer-owned scratch, reused for every operation (no allocation per block).
    private final BytesStore<?, ?> keyStore = BytesStore.wrap(new byte[KEY_BYTES]);
    private final BytesStore<?, ?> valueStore;
    private final long[] words;

    /** Current generation per holder (endpointId * 8 + rank); written by the writer, read by readers. */
    private final AtomicIntegerArray generations;
    /**
     * Per endpoint, blocks held by exactly rank set {@code s} (bit r = rank r holds a live word), {@code s} in
     * 1..255; allocated on the endpoint's first store. Writer-only.
     */
    private final long[][] rankSetBlocks;

    // Published counters: written only by the writer (release), read from anywhere (acquire).
    private final AtomicLongArray blocksPerEndpoint;
    /**
     * Per endpoint: blocks it came to hold since start (never decreases; removals and clears do not count). Its recent
     * growth is the new prefill work that landed on the engine, from every gateway in front of it (the router's view
     * of the other replicas' placements, {@code kv.spread: recent_work}).
     */
    private final AtomicLongArray addedPerEndpoint;
    private final AtomicLong size = new AtomicLong();
    private final AtomicLong memberships = new AtomicLong();
    private final AtomicLong evictions = new AtomicLong();
    private final AtomicLong insertFailures = new AtomicLong();
    private final AtomicLong unknownRemovals = new AtomicLong();
    private final AtomicLong storedOps = new AtomicLong();
    private final AtomicLong removedOps = new AtomicLong();
    private final AtomicLong clears = new AtomicLong();
    private final AtomicLong reclaimed = new AtomicLong();
    private final AtomicLong entriesVisited = new AtomicLong();
    private final AtomicLong clearEntryVisits = new AtomicLong();
    private final AtomicLong clearEpoch = new AtomicLong();

    /**
     * Blocks whose holder set changed, with the set after the change, for the readers' caches. Readers cache only
     * with at most 64 endpoints; otherwise nobody drains the log and a minimal ring (512 bytes instead of 2 MiB)
     * takes the appends.
     */
    private final ChangeLog changes;

    private int evictCursor;
    private int reclaimCursor;
    /** A clear happened since the reclaim sweep's current lap started: keep sweeping. */
    private boolean staleSinceLapStart;
    private boolean lapHasStale;
    private final SegmentWalker walker = new SegmentWalker();
    /** Created on first use of {@link #longestPrefix}: the gateway's routing stage reads through its own readers. */
    private BlockIndexReader ownReader;

    public BlockIndex(BlockIndexConfig config) {
        this.config = config;
        this.map = ChronicleMap.of(Long.class, byte[].class)
            .name("kvgate-block-index")
            .entries(config.capacityBlocks())
            .averageValueSize((double) Holders.WORD_BYTES * config.avgHoldersPerBlock())
            // Slack for hash skew between segments: a segment that fills before the whole map does may
            // take extra tiers rather than fail the insert.
            .maxBloatFactor(2.0)
            .create();
        this.segments = map.segments();
        this.evictBatch = Math.max(1, config.capacityBlocks() >>> 10);
        this.bitmapEndpoints = config.maxEndpoints() <= 64;
        int maxWords = config.maxEndpoints() * Holders.MAX_RANKS * 3 + 1;
        this.words = new long[maxWords];
        this.valueStore = BytesStore.wrap(new byte[maxWords * Holders.WORD_BYTES]);
        this.blocksPerEndpoint = new AtomicLongArray(config.maxEndpoints());
        this.addedPerEndpoint = new AtomicLongArray(config.maxEndpoints());
        this.generations = new AtomicIntegerArray(config.maxEndpoints() * Holders.MAX_RANKS);
        for (int h = 0; h < generations.length(); h++) {
            generations.setPlain(h, 1);
        }
        this.rankSetBlocks = new long[config.maxEndpoints()][];
        this.changes = new ChangeLog(changeLogEntries(config));
    }

    private static int changeLogEntries(BlockIndexConfig config) {
        return BlockIndexReader.cacheEnabled(config) ? 1 << 16 : 16;
    }

    /**
     * Heap bytes (array payloads) the index itself holds for {@code config} with {@code endpointsStoring} endpoints
     * that have stored blocks (each gets its rank-set counters on its first store); readers are counted apart
     * ({@link BlockIndexReader#heapBytesFor}). The blocks themselves are off heap ({@link #sizeBytes()}).
     */
    public static long heapBytesFor(BlockIndexConfig config, int endpointsStoring) {
        long maxWords = (long) config.maxEndpoints() * Holders.MAX_RANKS * 3 + 1;
        return maxWords * Long.BYTES * 2 // words + valueStore
            + (long) config.maxEndpoints() * Holders.MAX_RANKS * Integer.BYTES // generations
            + (long) config.maxEndpoints() * Long.BYTES // blocks per endpoint
            + (long) config.maxEndpoints() * 8 // rank-set rows (references)
            + (long) Math.min(endpointsStoring, config.maxEndpoints()) * RANK_SETS * Long.BYTES
            + (long) changeLogEntries(config) * 4 * Long.BYTES
            + KEY_BYTES;
    }

    /** The change log's capacity in entries (tests: it follows whether readers cache). */
    int changeLogCapacity() {
        return changes.capacity();
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
     * A reader for one reader thread whose lookups score at most {@code maxCandidates} endpoints (more are taken,
     * at the cost of growing its scratch once) on at most {@code maxPromptBlocks} blocks (capped by the index's
     * {@link BlockIndexConfig#maxPromptBlocks()}). Heap: {@link BlockIndexReader#heapBytesFor}.
     */
    public BlockIndexReader newReader(int maxCandidates, int maxPromptBlocks) {
        return new BlockIndexReader(this, maxCandidates, maxPromptBlocks);
    }

    /**
     * Convenience for the single routing thread: the index's own reader. Not for use from several threads at once;
     * other threads take {@link #newReader()}.
     */
    public void longestPrefix(long[] keys, int keyCount, int[] endpointIds, int endpointCount,
                              int[] matchedBlocksOut) {
        if (ownReader == null) {
            ownReader = new BlockIndexReader(this);
        }
        ownReader.longestPrefix(keys, keyCount, endpointIds, endpointCount, matchedBlocksOut, null);
    }

    // ------------------------------------------------------------------ writer side

    /** One copy of {@code key} stored by (endpointId, rank) in GPU memory. Writer thread only. */
    public void stored(int endpointId, int rank, long key) {
        stored(endpointId, rank, key, Holders.TIER_GPU);
    }

    /** One copy of {@code key} stored by (endpointId, rank) in memory tier {@code tier}. Writer thread only. */
    public void stored(int endpointId, int rank, long key, int tier) {
        checkHolder(endpointId, rank);
        if (tier < Holders.TIER_GPU || tier > Holders.TIER_DISK) {
            throw new IllegalArgumentException("tier=" + tier + " must be 0..2");
        }
        storedOps.setRelease(storedOps.getPlain() + 1);
        if (size.getPlain() >= config.capacityBlocks() && !containsWriter(key)) {
            evictBatch();
        }
        int holder = Holders.holder(endpointId, rank);
        int gen = generations.getPlain(holder);
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = map.queryContext(keyStore, 0, KEY_BYTES)) {
            c.updateLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            entriesVisited.setRelease(entriesVisited.getPlain() + 1);
            if (e == null) {
                valueStore.writeLong(0, Holders.word(Holders.cell(endpointId, rank, 1), tier, gen));
                try {
                    c.absentEntry().doInsert(c.wrapValueBytesAsData(valueStore, 0, Holders.WORD_BYTES));
                } catch (IllegalStateException full) {
                    // A segment ran out of tiers: drop the block (a cold window, never a phantom) and count it.
                    insertFailures.setRelease(insertFailures.getPlain() + 1);
                    return;
                }
                size.setRelease(size.getPlain() + 1);
                rankSetChanged(endpointId, 0, 1 << rank);
                words[0] = Holders.word(Holders.cell(endpointId, rank, 1), tier, gen);
                logChange(key, 1);
                return;
            }
            int before = readWords(e.value());
            int n = dropDead(before);
            int oldSet = liveRankSet(n, endpointId);
            for (int i = 0; i < n; i++) {
                long w = words[i];
                int cell = Holders.cellOf(w);
                if (Holders.holderOf(cell) == holder && Holders.tierOf(w) == tier) {
                    if (Holders.refOf(cell) < Holders.MAX_REF) {
                        words[i] = w + 1;
                        writeBack(c, e, n);
                    } else if (n != before) {
                        writeBack(c, e, n);
                    }
                    return;
                }
            }
            words[n] = Holders.word(Holders.cell(endpointId, rank, 1), tier, gen);
            writeBack(c, e, n + 1);
            rankSetChanged(endpointId, oldSet, oldSet | (1 << rank));
            logChange(key, n + 1);
        }
    }

    /** One copy of {@code key} removed by (endpointId, rank) from GPU memory (or any tier if not held on GPU). */
    public void removed(int endpointId, int rank, long key) {
        removed(endpointId, rank, key, Holders.TIER_ANY);
    }

    /**
     * One copy of {@code key} removed by (endpointId, rank) from tier {@code tier} ({@link Holders#TIER_ANY}: the
     * fastest tier holding it). Unknown blocks are counted and ignored.
     */
    public void removed(int endpointId, int rank, long key, int tier) {
        checkHolder(endpointId, rank);
        removedOps.setRelease(removedOps.getPlain() + 1);
        int holder = Holders.holder(endpointId, rank);
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = map.queryContext(keyStore, 0, KEY_BYTES)) {
            c.updateLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            entriesVisited.setRelease(entriesVisited.getPlain() + 1);
            if (e == null) {
                unknownRemovals.setRelease(unknownRemovals.getPlain() + 1);
                return;
            }
            int before = readWords(e.value());
            int n = dropDead(before);
            int oldSet = liveRankSet(n, endpointId);
            int at = -1;
            for (int i = 0; i < n; i++) {
                long w = words[i];
                if (Holders.holderOf(Holders.cellOf(w)) == holder && (tier == Holders.TIER_ANY
                    ? at < 0 || Holders.tierOf(w) < Holders.tierOf(words[at]) : Holders.tierOf(w) == tier)) {
                    at = i;
                }
            }
            if (at < 0) {
                unknownRemovals.setRelease(unknownRemovals.getPlain() + 1);
                finish(c, e, key, n, before);
                return;
            }
            int ref = Holders.refOf(Holders.cellOf(words[at]));
            if (ref == Holders.MAX_REF) {
                finish(c, e, key, n, before); // saturated counts are sticky until the rank is cleared
                return;
            }
            if (ref > 1) {
                words[at] = words[at] - 1;
                writeBack(c, e, n);
                return;
            }
            words[at] = words[n - 1];
            n--;
            int newSet = liveRankSet(n, endpointId);
            rankSetChanged(endpointId, oldSet, newSet);
            finish(c, e, key, n, -1);
            if (n > 0) {
                logChange(key, n); // finish logged the removal of an emptied entry itself
            }
        }
    }

    /** Writes the entry back after dead words were dropped ({@code n != before}), or removes it when empty. */
    private void finish(ExternalMapQueryContext<Long, byte[], ?> c, MapEntry<Long, byte[]> e, long key, int n,
                        int before) {
        if (n == 0) {
            e.doRemove();
            size.setRelease(size.getPlain() - 1);
            logChange(key, 0);
        } else if (n != before) {
            writeBack(c, e, n);
        }
    }

    /**
     * Forget everything (endpointId, rank) holds (engine restart, unfillable gap, malformed frame, AllBlocksCleared):
     * O(1) in the size of the index (a generation bump and 256 counter moves). Returns the (block, endpoint)
     * memberships lost: blocks no other rank of the endpoint holds.
     */
    public long clearRank(int endpointId, int rank) {
        checkHolder(endpointId, rank);
        clears.setRelease(clears.getPlain() + 1);
        long[] sets = rankSetBlocks[endpointId];
        if (sets == null) {
            return 0; // the endpoint never stored anything
        }
        int bit = 1 << rank;
        long held = 0;
        long lost = 0;
        for (int s = 1; s < RANK_SETS; s++) {
            if ((s & bit) == 0 || sets[s] == 0) {
                continue;
            }
            long count = sets[s];
            held += count;
            sets[s] = 0;
            int rest = s & ~bit;
            if (rest == 0) {
                lost += count;
            } else {
                sets[rest] += count;
            }
        }
        if (held == 0) {
            return 0; // nothing to forget: no generation spent, reader caches kept
        }
        int holder = Holders.holder(endpointId, rank);
        int gen = generations.getPlain(holder);
        if (gen == Holders.MAX_GENERATION) {
            // 2^30 clears of one holder: its generations would wrap. Walk once to remove every word it has, old
            // generations included, then start over at 1.
            walkAll(SegmentWalker.DROP_HOLDER, holder);
            gen = 0;
        }
        generations.setRelease(holder, gen + 1);
        if (lost != 0) {
            memberships.setRelease(memberships.getPlain() - lost);
            blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) - lost);
        }
        staleSinceLapStart = true;
        clearEpoch.setRelease(clearEpoch.getPlain() + 1);
        return lost;
    }

    /** Forget every rank of an endpoint (endpoint removed from configuration); O(1) like {@link #clearRank}. */
    public long removeEndpoint(int endpointId) {
        checkHolder(endpointId, 0);
        long lost = 0;
        for (int r = 0; r < Holders.MAX_RANKS; r++) {
            lost += clearRank(endpointId, r);
        }
        return lost;
    }

    /**
     * Reclaims dead words (of cleared holders) in one segment, if any clear left some; called by the ingest when it
     * is idle, so the lock of one segment is held at a time. Returns the entries visited (0 = nothing to do).
     */
    public int reclaimStep() {
        if (!staleSinceLapStart && !lapHasStale) {
            return 0;
        }
        if (reclaimCursor == 0) {
            // A lap starts: it covers every clear made before this point.
            lapHasStale = staleSinceLapStart;
            staleSinceLapStart = false;
        }
        walker.start(SegmentWalker.RECLAIM, -1);
        try (MapSegmentContext<Long, byte[], ?> sc = map.segmentContext(reclaimCursor)) {
            sc.forEachSegmentEntryWhile(walker);
        }
        reclaimCursor = reclaimCursor + 1 == segments ? 0 : reclaimCursor + 1;
        if (reclaimCursor == 0) {
            lapHasStale = false;
        }
        return (int) Math.max(1, walker.visited);
    }

    /** Runs {@link #reclaimStep} until no dead word is left (tests, and shutdown of a cleared endpoint set). */
    public void reclaimAll() {
        for (int guard = 0; guard < 4 * segments + 4 && reclaimStep() > 0; guard++) {
            // each step is one segment; two laps at most
        }
    }

    private void rankSetChanged(int endpointId, int oldSet, int newSet) {
        if (oldSet == newSet) {
            return;
        }
        long[] sets = rankSetBlocks[endpointId];
        if (sets == null) {
            sets = new long[RANK_SETS];
            rankSetBlocks[endpointId] = sets;
        }
        if (oldSet != 0) {
            sets[oldSet]--;
        }
        if (newSet != 0) {
            sets[newSet]++;
        }
        if (oldSet == 0) {
            memberships.setRelease(memberships.getPlain() + 1);
            blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) + 1);
            addedPerEndpoint.setRelease(endpointId, addedPerEndpoint.getPlain(endpointId) + 1);
        } else if (newSet == 0) {
            memberships.setRelease(memberships.getPlain() - 1);
            blocksPerEndpoint.setRelease(endpointId, blocksPerEndpoint.getPlain(endpointId) - 1);
        }
    }

    /**
     * Logs the holder set of {@code key} as {@code words[0..n)} now stands (live words only), for the readers' caches:
     * called by every change of a block's endpoint set or tiers, while the segment is still locked (see
     * {@link ChangeLog}). The bitmaps are what {@link BlockIndexReader} caches: only indexes of at most 64
     * endpoints have reader caches, larger ones log the key alone.
     */
    private void logChange(long key, int n) {
        long holders = 0;
        long gpu = 0;
        long cpu = 0;
        if (bitmapEndpoints) {
            for (int i = 0; i < n; i++) {
                long w = words[i];
                long bit = 1L << Holders.endpointOf(Holders.cellOf(w));
                holders |= bit;
                int tier = Holders.tierOf(w);
                if (tier == Holders.TIER_GPU) {
                    gpu |= bit;
                } else if (tier == Holders.TIER_CPU) {
                    cpu |= bit;
                }
            }
        }
        changes.append(key, holders, gpu, cpu);
    }

    /** Ranks of {@code endpointId} with a live word among {@code words[0..n)} (dead words already dropped). */
    private int liveRankSet(int n, int endpointId) {
        int set = 0;
        for (int i = 0; i < n; i++) {
            int cell = Holders.cellOf(words[i]);
            if (Holders.endpointOf(cell) == endpointId) {
                set |= 1 << Holders.rankOf(cell);
            }
        }
        return set;
    }

    /** Compacts {@code words[0..n)} to the live words; returns how many remain (dead ones counted as reclaimed). */
    private int dropDead(int n) {
        int kept = 0;
        for (int i = 0; i < n; i++) {
            long w = words[i];
            if (Holders.generationOf(w) == generations.getPlain(Holders.holderOf(Holders.cellOf(w)))) {
                words[kept++] = w;
            }
        }
        if (kept != n) {
            reclaimed.setRelease(reclaimed.getPlain() + (n - kept));
        }
        return kept;
    }

    private void walkAll(int mode, int holder) {
        walker.start(mode, holder);
        for (int s = 0; s < segments; s++) {
            try (MapSegmentContext<Long, byte[], ?> sc = map.segmentContext(s)) {
                sc.forEachSegmentEntryWhile(walker);
            }
        }
        clearEntryVisits.setRelease(clearEntryVisits.getPlain() + walker.visited);
    }

    private void evictBatch() {
        walker.start(SegmentWalker.EVICT, -1);
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

    private int readWords(Data<byte[]> value) {
        RandomDataInput in = value.bytes();
        long off = value.offset();
        int n = (int) (value.size() / Holders.WORD_BYTES);
        for (int i = 0; i < n; i++) {
            words[i] = in.readLong(off + (long) i * Holders.WORD_BYTES);
        }
        return n;
    }

    private void writeBack(ExternalMapQueryContext<Long, byte[], ?> c, MapEntry<Long, byte[]> e, int n) {
        for (int i = 0; i < n; i++) {
            valueStore.writeLong((long) i * Holders.WORD_BYTES, words[i]);
        }
        e.doReplaceValue(c.wrapValueBytesAsData(valueStore, 0, (long) n * Holders.WORD_BYTES));
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

    /** Walks segment entries to reclaim, evict or drop one holder; one instance, reused (no lambda per call). */
    private final class SegmentWalker implements Predicate<MapEntry<Long, byte[]>> {
        static final int RECLAIM = 0;
        static final int EVICT = 1;
        static final int DROP_HOLDER = 2;
        int mode;
        int holder;
        long removedBlocks;
        long visited;
        long budget;

        void start(int mode, int holder) {
            this.mode = mode;
            this.holder = holder;
            this.removedBlocks = 0;
            this.visited = 0;
            this.budget = Long.MAX_VALUE;
        }

        @Override
        public boolean test(MapEntry<Long, byte[]> e) {
            visited++;
            entriesVisited.setRelease(entriesVisited.getPlain() + 1);
            int before = readWords(e.value());
            int n = dropDead(before);
            if (mode == DROP_HOLDER) {
                int kept = 0;
                for (int i = 0; i < n; i++) {
                    if (Holders.holderOf(Holders.cellOf(words[i])) != holder) {
                        words[kept++] = words[i];
                    }
                }
                n = kept; // its live words were already uncounted by clearRank
            } else if (mode == EVICT) {
                // Per-endpoint counts stay exact: each endpoint with a live rank on the victim loses one block.
                for (int i = 0; i < n; i++) {
                    int ep = Holders.endpointOf(Holders.cellOf(words[i]));
                    if (firstWordOf(ep, n) == i) {
                        rankSetChanged(ep, liveRankSet(n, ep), 0);
                    }
                }
                n = 0;
            }
            if (n == before) {
                return removedBlocks < budget;
            }
            logChange(e.key().bytes().readLong(e.key().offset()), n);
            if (n == 0) {
                e.doRemove();
                size.setRelease(size.getPlain() - 1);
                removedBlocks++;
            } else {
                for (int i = 0; i < n; i++) {
                    valueStore.writeLong((long) i * Holders.WORD_BYTES, words[i]);
                }
                e.doReplaceValue(e.context().wrapValueBytesAsData(valueStore, 0, (long) n * Holders.WORD_BYTES));
            }
            return removedBlocks < budget;
        }

        private int firstWordOf(int ep, int n) {
            for (int i = 0; i < n; i++) {
                if (Holders.endpointOf(Holders.cellOf(words[i])) == ep) {
                    return i;
                }
            }
            return -1;
        }
    }

    // ------------------------------------------------------------------ reader support (package)

    ChronicleMap<Long, byte[]> map() {
        return map;
    }

    ChangeLog changes() {
        return changes;
    }

    /** The current generation of holder {@code endpointId * 8 + rank}: words of other generations are dead. */
    int generation(int holder) {
        return generations.getAcquire(holder);
    }

    /** Whether a stored word is live (its holder not cleared since it was stored). */
    boolean live(long word) {
        return Holders.generationOf(word) == generations.getAcquire(Holders.holderOf(Holders.cellOf(word)));
    }

    // ------------------------------------------------------------------ counters (any thread)

    /** Distinct blocks held by any rank of {@code endpointId}: exact. */
    public long blocks(int endpointId) {
        return blocksPerEndpoint.getAcquire(endpointId);
    }

    /** Blocks {@code endpointId} came to hold since start (monotonic; any thread): see {@code addedPerEndpoint}. */
    public long blocksAdded(int endpointId) {
        return addedPerEndpoint.getAcquire(endpointId);
    }

    /** Entries in the map: blocks, including blocks whose holders were all cleared and await reclaim. */
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

    /** Holder clears ({@link #clearRank}, and 8 per {@link #removeEndpoint}). */
    public long clears() {
        return clears.getAcquire();
    }

    /** Dead words (of cleared holders) dropped so far, by touching writes or {@link #reclaimStep}. */
    public long reclaimed() {
        return reclaimed.getAcquire();
    }

    /** Map entries the writer has visited (one per store/remove, one per entry a sweep walks): a work counter. */
    public long entriesVisited() {
        return entriesVisited.getAcquire();
    }

    /** Map entries visited on behalf of clears (only at a generation wrap): stays 0 in practice. */
    public long clearEntryVisits() {
        return clearEntryVisits.getAcquire();
    }

    /** Bumped by every clear that forgot something; readers drop their caches when it moves. */
    public long clearEpoch() {
        return clearEpoch.getAcquire();
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
