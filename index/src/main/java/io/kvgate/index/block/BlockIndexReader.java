package io.kvgate.index.block;

import java.util.Arrays;

import net.openhft.chronicle.bytes.BytesStore;
import net.openhft.chronicle.bytes.RandomDataInput;
import net.openhft.chronicle.hash.Data;
import net.openhft.chronicle.map.ExternalMapQueryContext;
import net.openhft.chronicle.map.MapEntry;

/**
 * Allocation-free reads of a {@link BlockIndex}: holder lists and longest cached prefix per endpoint.
 *
 * <p><b>Why not one probe per block.</b> A probe costs a map lookup (~100-250 ns off-heap). A block's key depends
 * on all its parents, and engines evict leaves first (SGLang radix tree) or free a request's blocks tail first
 * (vLLM), so the set an engine holds is prefix-closed: if it holds block j it holds 0..j-1. "Holds block j" is
 * then monotone in j, and the longest prefix is found by binary search. One probe returns the whole holder list of
 * a block, so it answers for every candidate at once; probes are memoized per call and shared, so candidates
 * whose searches take the same path pay once. Probe order: block 0 (nobody holds it: done in 1 probe), the last
 * block (everyone who holds it matched all), then bisection: at most {@code 2 + ceil(log2 n)} probes for one
 * candidate, and at most {@code n} for any number of candidates: roughly (distinct held depths) x log2(n / distinct).
 * A 128-block prompt costs 1 probe when nobody holds block 0, ~7-20 when the candidates share a few depths, up to
 * 128 when 64 endpoints hold 64 different depths (measured: perf/results/index-ingest-2026-11-30.md).
 *
 * <p><b>Reader cache.</b> With at most 64 endpoints each reader keeps a private direct-mapped cache of probed blocks
 * (key to endpoint bitmap, absent blocks included), ~20-30 ns per hit instead of ~200 ns per map probe. It is kept
 * exact by the writer's {@link ChangeLog}: every lookup first drains the blocks whose holder set changed since the
 * previous lookup and overwrites the cached ones with the bitmaps the writer logged (a reader a whole log behind,
 * or one that sees a clear, drops everything). Patching instead of dropping is what keeps a lookup off the map
 * while ingest rewrites the very blocks being routed: lookups then read only this reader's own memory and the log,
 * never a segment lock the writer holds (issue #12 item 4: p99 under full-rate ingest vs idle).
 *
 * <p>What the monotone assumption costs when it does not hold (a block missing in the middle of a held chain,
 * e.g. evicted from this index but not from the engine): the search may report the deeper depth. Every probed
 * position below the reported depth was verified held; the unverified ones lie between verified ones.
 *
 * <p><b>Threading contract:</b> one instance per reader thread (it owns scratch arrays); any number of readers run
 * concurrently with the single {@link BlockIndex} writer.
 */
public final class BlockIndexReader {
    private static final int KEY_BYTES = 8;
    private static final int SLOT = 5;
    private static final int KEY = 0;
    private static final int BITS = 1;
    private static final int GPU = 2;
    private static final int CPU = 3;
    private static final int GEN = 4;

    private final BlockIndex index;
    private final int maxPromptBlocks;
    /** Longs per probed position: one bit per candidate of a call (grown only if a call brings more candidates). */
    private int words;
    private final BytesStore<?, ?> keyStore = BytesStore.wrap(new byte[KEY_BYTES]);
    private final int[] candidateOf;
    private long[] indexBits;
    private long[] overlayBits;
    // Per probed position and candidate: the tiers it holds the block in (best tier = GPU, else CPU, else DISK).
    private long[] gpuBits;
    private long[] cpuBits;
    private final int[] probedStamp;
    // rankDepths: the ranks of one endpoint holding each probed position, memoized per call.
    private final int[] rankStamp;
    private final byte[] rankBitsAt;
    private int rankCall;
    // Private cache of probed blocks (key -> endpoint bitmap), invalidated from the writer's change log.
    private final boolean cacheEnabled;
    private final ChangeLog changes;
    private final ChangeLog.Sink patcher = this::patch;
    /**
     * Slot i is {@code cache[i * SLOT, (i + 1) * SLOT)}: key, endpoint bitmap, GPU bitmap, CPU bitmap, generation.
     * One array rather than one per field: a hit or a patch touches one or two cache lines instead of five, which
     * is most of what a lookup costs once it stays off the map.
     */
    private final long[] cache;
    private final int cacheMask;
    private int gen = 1;
    private long logHead;
    private long cacheFlushes;
    private long cachePatches;
    private long clearFlushes;
    private long seenClearEpoch;
    private int stamp;
    private long probes;
    private long hotHits;
    private long lookups;

    /**
     * Scratch is sized for {@code maxCandidates} candidates per call and {@code maxPromptBlocks} blocks per prompt
     * (capped by the index's limit): its per-position bit sets are {@code maxPromptBlocks x ceil(maxCandidates / 64)}
     * longs, four of them. Sized for the index's 1024 endpoint ids instead, every reader took 4 MiB whatever the rule
     * (review B-7); a rule scores its own endpoints, so its reader needs one long per position up to 64 of them.
     */
    BlockIndexReader(BlockIndex index, int maxCandidates, int maxPromptBlocks) {
        this.index = index;
        BlockIndexConfig cfg = index.config();
        if (maxCandidates < 1 || maxPromptBlocks < 1) {
            throw new IllegalArgumentException("maxCandidates=" + maxCandidates + " maxPromptBlocks=" + maxPromptBlocks
                + ": must be >= 1");
        }
        this.maxPromptBlocks = Math.min(maxPromptBlocks, cfg.maxPromptBlocks());
        this.candidateOf = new int[cfg.maxEndpoints()];
        Arrays.fill(candidateOf, -1);
        allocateCandidateBits(wordsFor(Math.min(maxCandidates, cfg.maxEndpoints())));
        this.probedStamp = new int[this.maxPromptBlocks];
        this.rankStamp = new int[this.maxPromptBlocks];
        this.rankBitsAt = new byte[this.maxPromptBlocks];
        this.changes = index.changes();
        this.cacheEnabled = cacheEnabled(cfg);
        int slots = cacheSlots(cfg);
        this.cache = new long[slots * SLOT];
        this.cacheMask = slots - 1;
        this.logHead = changes.tail();
        this.seenClearEpoch = index.clearEpoch();
    }

    BlockIndexReader(BlockIndex index) {
        this(index, index.config().maxEndpoints(), index.config().maxPromptBlocks());
    }

    private static int wordsFor(int candidates) {
        return Math.max(1, (candidates + 63) >>> 6);
    }

    private void allocateCandidateBits(int words) {
        this.words = words;
        this.indexBits = new long[maxPromptBlocks * words];
        this.overlayBits = new long[maxPromptBlocks * words];
        this.gpuBits = new long[maxPromptBlocks * words];
        this.cpuBits = new long[maxPromptBlocks * words];
    }

    static boolean cacheEnabled(BlockIndexConfig cfg) {
        return cfg.maxEndpoints() <= 64 && cfg.hotCacheEntries() > 0;
    }

    private static int cacheSlots(BlockIndexConfig cfg) {
        return cacheEnabled(cfg) ? Integer.highestOneBit(Math.max(16, cfg.hotCacheEntries() - 1)) << 1 : 1;
    }

    /**
     * Heap bytes (array payloads) of a reader of index {@code cfg} sized for {@code maxCandidates} candidates and
     * {@code maxPromptBlocks} blocks: what {@link #heapBytes()} reports once it is built.
     */
    public static long heapBytesFor(BlockIndexConfig cfg, int maxCandidates, int maxPromptBlocks) {
        long positions = Math.min(maxPromptBlocks, cfg.maxPromptBlocks());
        long words = wordsFor(Math.min(maxCandidates, cfg.maxEndpoints()));
        return 4 * positions * words * Long.BYTES // index, overlay, GPU and CPU bits
            + positions * (2L * Integer.BYTES + 1) // probed and rank stamps, rank bits
            + (long) cfg.maxEndpoints() * Integer.BYTES // candidate of each endpoint id
            + (long) cacheSlots(cfg) * SLOT * Long.BYTES
            + KEY_BYTES;
    }

    /** Heap bytes (array payloads) this reader holds, from the arrays it allocated. */
    public long heapBytes() {
        return (long) (indexBits.length + overlayBits.length + gpuBits.length + cpuBits.length + cache.length) * Long.BYTES
            + (long) (probedStamp.length + rankStamp.length + candidateOf.length) * Integer.BYTES + rankBitsAt.length
            + KEY_BYTES;
    }

    /** Blocks of a prompt a lookup considers. */
    public int maxPromptBlocks() {
        return maxPromptBlocks;
    }

    /** Applies the writer's changes since the last lookup to the private cache. */
    private void syncCache() {
        long epoch = index.clearEpoch();
        if (epoch != seenClearEpoch) {
            // A holder was cleared in O(1) (no per-block change log entries): every cached bitmap may hold it.
            seenClearEpoch = epoch;
            clearFlushes++;
            logHead = changes.tail();
            dropCache();
            return;
        }
        long r = changes.drain(logHead, patcher);
        if (r < 0) {
            logHead = -1 - r;
            cacheFlushes++;
            dropCache();
        } else {
            logHead = r;
        }
    }

    private void dropCache() {
        gen++;
        if (gen == 0) {
            for (int i = GEN; i < cache.length; i += SLOT) {
                cache[i] = 0;
            }
            gen = 1;
        }
    }

    /** A logged change: a block this reader caches takes its new holder bitmaps; others are left to probe. */
    private void patch(long key, long holders, long gpu, long cpu) {
        int s = cacheSlot(key);
        if (cache[s + KEY] == key && cache[s + GEN] == gen) {
            cache[s + BITS] = holders;
            cache[s + GPU] = gpu;
            cache[s + CPU] = cpu;
            cachePatches++;
        }
    }

    /** Offset in {@link #cache} of the slot for {@code key}. */
    private int cacheSlot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return ((int) (h >>> 40) & cacheMask) * SLOT;
    }

    private void markCandidates(long bitmap, long gpu, long cpu, int base) {
        while (bitmap != 0) {
            int ep = Long.numberOfTrailingZeros(bitmap);
            int cand = candidateOf[ep];
            if (cand >= 0) {
                long bit = 1L << (cand & 63);
                int w = base + (cand >>> 6);
                indexBits[w] |= bit;
                if ((gpu & (1L << ep)) != 0) {
                    gpuBits[w] |= bit;
                }
                if ((cpu & (1L << ep)) != 0) {
                    cpuBits[w] |= bit;
                }
            }
            bitmap &= bitmap - 1;
        }
    }

    /**
     * Copies the live holder cells of {@code key} (see {@link Holders}: one cell per (endpoint, rank), its
     * reference count summed over memory tiers) into {@code cellsOut}; returns how many, 0 when the block is absent
     * or only cleared holders had it. {@code cellsOut} must hold {@code maxEndpoints * 8} cells.
     */
    public int holders(long key, int[] cellsOut) {
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = index.map().queryContext(keyStore, 0, KEY_BYTES)) {
            c.readLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e == null) {
                return 0;
            }
            Data<byte[]> v = e.value();
            RandomDataInput in = v.bytes();
            long off = v.offset();
            int n = (int) (v.size() / Holders.WORD_BYTES);
            int out = 0;
            for (int i = 0; i < n; i++) {
                long w = in.readLong(off + (long) i * Holders.WORD_BYTES);
                if (!index.live(w)) {
                    continue;
                }
                int cell = Holders.cellOf(w);
                int j = 0;
                while (j < out && Holders.holderOf(cellsOut[j]) != Holders.holderOf(cell)) {
                    j++;
                }
                if (j == out) {
                    cellsOut[out++] = cell;
                } else {
                    int ref = Math.min(Holders.MAX_REF, Holders.refOf(cellsOut[j]) + Holders.refOf(cell));
                    cellsOut[j] = (cellsOut[j] & ~0xFFFF) | ref;
                }
            }
            return out;
        }
    }

    /**
     * The fastest memory tier ({@link Holders#TIER_GPU}, ...) in which any rank of {@code endpointId} holds
     * {@code key}, or -1 when it does not hold it.
     */
    public int tier(int endpointId, long key) {
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = index.map().queryContext(keyStore, 0, KEY_BYTES)) {
            c.readLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e == null) {
                return -1;
            }
            Data<byte[]> v = e.value();
            RandomDataInput in = v.bytes();
            long off = v.offset();
            int n = (int) (v.size() / Holders.WORD_BYTES);
            int best = -1;
            for (int i = 0; i < n; i++) {
                long w = in.readLong(off + (long) i * Holders.WORD_BYTES);
                if (Holders.endpointOf(Holders.cellOf(w)) == endpointId && index.live(w)
                    && (best < 0 || Holders.tierOf(w) < best)) {
                    best = Holders.tierOf(w);
                }
            }
            return best;
        }
    }

    /** Whether any rank of {@code endpointId} holds {@code key}. */
    public boolean holds(int endpointId, long key) {
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> c = index.map().queryContext(keyStore, 0, KEY_BYTES)) {
            c.readLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e == null) {
                return false;
            }
            Data<byte[]> v = e.value();
            RandomDataInput in = v.bytes();
            long off = v.offset();
            int n = (int) (v.size() / Holders.WORD_BYTES);
            for (int i = 0; i < n; i++) {
                long w = in.readLong(off + (long) i * Holders.WORD_BYTES);
                if (Holders.endpointOf(Holders.cellOf(w)) == endpointId && index.live(w)) {
                    return true;
                }
            }
            return false;
        }
    }

    /**
     * For each candidate {@code endpointIds[c]}, the number of leading blocks of {@code keys[0..keyCount)} that
     * any of its ranks holds (union over ranks), written to {@code matchedBlocksOut[c]}. Candidates outside
     * {@code 0..maxEndpoints-1} score 0; duplicate candidates get the same score.
     *
     * @param overlay speculative overlay of the same (routing) thread, or null
     */
    public void longestPrefix(long[] keys, int keyCount, int[] endpointIds, int endpointCount,
                              int[] matchedBlocksOut, SpeculativeOverlay overlay) {
        longestPrefix(keys, keyCount, endpointIds, endpointCount, matchedBlocksOut, null, overlay);
    }

    /**
     * As {@link #longestPrefix(long[], int, int[], int, int[], SpeculativeOverlay)}, and for each candidate with a
     * match the memory tier of its LAST matched block in {@code tierOut[c]} ({@link Holders#TIER_GPU} when the
     * match is speculative or empty): engines offload least-recently-used blocks first, and a prefix's tail is used
     * by fewer requests than its head, so the last block is where a prefix is slowest. {@code tierOut} may be null.
     */
    public void longestPrefix(long[] keys, int keyCount, int[] endpointIds, int endpointCount,
                              int[] matchedBlocksOut, int[] tierOut, SpeculativeOverlay overlay) {
        lookups++;
        int n = Math.min(keyCount, maxPromptBlocks);
        int m = Math.min(endpointCount, candidateOf.length);
        for (int c = 0; c < endpointCount; c++) {
            matchedBlocksOut[c] = 0;
            if (tierOut != null) {
                tierOut[c] = Holders.TIER_GPU;
            }
        }
        if (n <= 0 || m <= 0) {
            return;
        }
        if (m > words << 6) {
            // More candidates than this reader was sized for (its rule's endpoint count): grow once, never shrink.
            allocateCandidateBits(wordsFor(m));
        }
        for (int c = 0; c < m; c++) {
            int ep = endpointIds[c];
            if (ep >= 0 && ep < candidateOf.length && candidateOf[ep] < 0) {
                candidateOf[ep] = c;
            }
        }
        if (cacheEnabled) {
            syncCache();
        }
        stamp++;
        if (stamp == 0) { // wrapped: old stamps could alias
            Arrays.fill(probedStamp, 0);
            stamp = 1;
        }
        long now = overlay == null ? 0 : overlay.clock().nanoTime();
        try {
            for (int c = 0; c < m; c++) {
                int ep = endpointIds[c];
                if (ep < 0 || ep >= candidateOf.length) {
                    continue;
                }
                int cc = candidateOf[ep]; // duplicates share the first occurrence's bit
                int d = depth(keys, n, cc, overlay, now);
                matchedBlocksOut[c] = d;
                if (tierOut != null && d > 0) {
                    tierOut[c] = tierAt(d - 1, cc); // position d - 1 was probed on the way (held)
                }
            }
        } finally {
            for (int c = 0; c < m; c++) {
                int ep = endpointIds[c];
                if (ep >= 0 && ep < candidateOf.length) {
                    candidateOf[ep] = -1;
                }
            }
        }
    }

    /**
     * For one endpoint, the number of leading blocks of {@code keys[0..depth)} each of its DP ranks
     * {@code 0..ranks-1} holds, written to {@code depthOut[r]} (from the index alone: the speculative overlay has no
     * ranks). Each rank's cache is prefix-closed like the endpoint's, so each is a binary search; one probe answers
     * for every rank and probes are shared between the ranks' searches: at most {@code ranks x (1 + log2 depth)}
     * probes, usually far fewer (ranks that hold the whole prefix cost one together). Pass the endpoint's union
     * depth from {@link #longestPrefix} as {@code depth}: no rank holds more.
     */
    public void rankDepths(long[] keys, int depth, int endpointId, int ranks, int[] depthOut) {
        int n = Math.min(depth, maxPromptBlocks);
        int m = Math.min(ranks, Holders.MAX_RANKS);
        if (++rankCall == 0) {
            java.util.Arrays.fill(rankStamp, 0);
            rankCall = 1;
        }
        for (int r = 0; r < m; r++) {
            depthOut[r] = 0;
        }
        if (n <= 0) {
            return;
        }
        int last = rankBits(keys, n - 1, endpointId);
        int first = rankBits(keys, 0, endpointId);
        for (int r = 0; r < m; r++) {
            int bit = 1 << r;
            if ((last & bit) != 0) {
                depthOut[r] = n;
                continue;
            }
            if ((first & bit) == 0) {
                continue; // 0
            }
            int lo = 1;
            int hi = n - 1; // position 0 held, position n-1 not
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if ((rankBits(keys, mid, endpointId) & bit) != 0) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            depthOut[r] = lo;
        }
    }

    /** The ranks of {@code endpointId} holding {@code keys[pos]} as a bit set, memoized for the current call. */
    private int rankBits(long[] keys, int pos, int endpointId) {
        if (rankStamp[pos] == rankCall) {
            return rankBitsAt[pos] & 0xFF;
        }
        probes++;
        int bits = 0;
        keyStore.writeLong(0, keys[pos]);
        try (ExternalMapQueryContext<Long, byte[], ?> c = index.map().queryContext(keyStore, 0, KEY_BYTES)) {
            c.readLock().lock();
            MapEntry<Long, byte[]> e = c.entry();
            if (e != null) {
                Data<byte[]> v = e.value();
                RandomDataInput in = v.bytes();
                long off = v.offset();
                int words = (int) (v.size() / Holders.WORD_BYTES);
                for (int i = 0; i < words; i++) {
                    long w = in.readLong(off + (long) i * Holders.WORD_BYTES);
                    int cell = Holders.cellOf(w);
                    if (Holders.endpointOf(cell) == endpointId && index.live(w)) {
                        bits |= 1 << Holders.rankOf(cell);
                    }
                }
            }
        }
        rankStamp[pos] = rankCall;
        rankBitsAt[pos] = (byte) bits;
        return bits;
    }

    private int depth(long[] keys, int n, int c, SpeculativeOverlay overlay, long now) {
        if (!held(keys, 0, c, overlay, now)) {
            return 0;
        }
        if (n == 1 || held(keys, n - 1, c, overlay, now)) {
            return n;
        }
        int lo = 1;
        int hi = n - 1; // position 0 held, position n-1 not: the answer is in [1, n-1]
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (held(keys, mid, c, overlay, now)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    private int tierAt(int pos, int c) {
        int w = pos * words + (c >>> 6);
        long bit = 1L << (c & 63);
        if ((indexBits[w] & bit) == 0 || (gpuBits[w] & bit) != 0) {
            return Holders.TIER_GPU; // speculative (overlay only) or held on GPU
        }
        return (cpuBits[w] & bit) != 0 ? Holders.TIER_CPU : Holders.TIER_DISK;
    }

    private boolean held(long[] keys, int pos, int c, SpeculativeOverlay overlay, long now) {
        int base = pos * words;
        if (probedStamp[pos] != stamp) {
            probe(keys[pos], base, overlay, now);
            probedStamp[pos] = stamp;
        }
        long bit = 1L << (c & 63);
        int w = base + (c >>> 6);
        return ((indexBits[w] | overlayBits[w]) & bit) != 0;
    }

    private void probe(long key, int base, SpeculativeOverlay overlay, long now) {
        probes++;
        for (int w = 0; w < words; w++) {
            indexBits[base + w] = 0;
            overlayBits[base + w] = 0;
            gpuBits[base + w] = 0;
            cpuBits[base + w] = 0;
        }
        int slot = 0;
        if (cacheEnabled) {
            slot = cacheSlot(key);
            if (cache[slot + GEN] == gen && cache[slot + KEY] == key) {
                hotHits++;
                markCandidates(cache[slot + BITS], cache[slot + GPU], cache[slot + CPU], base);
                if (overlay != null) {
                    overlay.mark(key, now, candidateOf, overlayBits, base, indexBits);
                }
                return;
            }
        }
        keyStore.writeLong(0, key);
        try (ExternalMapQueryContext<Long, byte[], ?> ctx = index.map().queryContext(keyStore, 0, KEY_BYTES)) {
            ctx.readLock().lock();
            MapEntry<Long, byte[]> e = ctx.entry();
            long bitmap = 0;
            long gpu = 0;
            long cpu = 0;
            if (e != null) {
                Data<byte[]> v = e.value();
                RandomDataInput in = v.bytes();
                long off = v.offset();
                int wordsN = (int) (v.size() / Holders.WORD_BYTES);
                for (int i = 0; i < wordsN; i++) {
                    long word = in.readLong(off + (long) i * Holders.WORD_BYTES);
                    if (!index.live(word)) {
                        continue; // a cleared holder's word, not reclaimed yet
                    }
                    int ep = Holders.endpointOf(Holders.cellOf(word));
                    int tier = Holders.tierOf(word);
                    long epBit = 1L << ep; // meaningful only with <= 64 endpoints (cache enabled)
                    bitmap |= epBit;
                    if (tier == Holders.TIER_GPU) {
                        gpu |= epBit;
                    } else if (tier == Holders.TIER_CPU) {
                        cpu |= epBit;
                    }
                    int cand = ep < candidateOf.length ? candidateOf[ep] : -1;
                    if (cand >= 0) {
                        long bit = 1L << (cand & 63);
                        int w = base + (cand >>> 6);
                        indexBits[w] |= bit;
                        if (tier == Holders.TIER_GPU) {
                            gpuBits[w] |= bit;
                        } else if (tier == Holders.TIER_CPU) {
                            cpuBits[w] |= bit;
                        }
                    }
                }
            }
            if (cacheEnabled) {
                // Absent blocks are cached too (bitmap 0): inserts are in the change log like every change.
                cache[slot + KEY] = key;
                cache[slot + BITS] = bitmap;
                cache[slot + GPU] = gpu;
                cache[slot + CPU] = cpu;
                cache[slot + GEN] = gen;
            }
        }
        if (overlay != null) {
            overlay.mark(key, now, candidateOf, overlayBits, base, indexBits);
        }
    }

    /** Map probes issued by this reader (for the probes-per-lookup metric). */
    public long probes() {
        return probes;
    }

    /** Times the reader fell a whole change-log behind and dropped its cache. */
    public long cacheFlushes() {
        return cacheFlushes;
    }

    /** Cached blocks updated in place from the writer's change log (instead of being probed again). */
    public long cachePatches() {
        return cachePatches;
    }

    /** Times a clear (O(1) in the index) made this reader drop its cache. */
    public long clearFlushes() {
        return clearFlushes;
    }

    /** Probes answered by this reader's cache of probed blocks. */
    public long hotHits() {
        return hotHits;
    }

    public long lookups() {
        return lookups;
    }
}
