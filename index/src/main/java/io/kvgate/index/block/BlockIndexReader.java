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
 * exact by the writer's {@link ChangeLog}: every lookup first drains the keys whose holder set changed since the
 * previous lookup and drops them (a reader a whole log behind drops everything).
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

    private final BlockIndex index;
    private final int maxPromptBlocks;
    private final int words;
    private final BytesStore<?, ?> keyStore = BytesStore.wrap(new byte[KEY_BYTES]);
    private final int[] candidateOf;
    private final long[] indexBits;
    private final long[] overlayBits;
    private final int[] probedStamp;
    // Private cache of probed blocks (key -> endpoint bitmap), invalidated from the writer's change log.
    private final boolean cacheEnabled;
    private final ChangeLog changes;
    private final ChangeLog.Sink invalidator = this::invalidate;
    private final long[] cacheKeys;
    private final long[] cacheBits;
    private final int[] cacheGen;
    private final int cacheMask;
    private int gen = 1;
    private long logHead;
    private long cacheFlushes;
    private int stamp;
    private long probes;
    private long hotHits;
    private long lookups;

    BlockIndexReader(BlockIndex index) {
        this.index = index;
        BlockIndexConfig cfg = index.config();
        this.maxPromptBlocks = cfg.maxPromptBlocks();
        this.words = (cfg.maxEndpoints() + 63) >>> 6;
        this.candidateOf = new int[cfg.maxEndpoints()];
        Arrays.fill(candidateOf, -1);
        this.indexBits = new long[maxPromptBlocks * words];
        this.overlayBits = new long[maxPromptBlocks * words];
        this.probedStamp = new int[maxPromptBlocks];
        this.changes = index.changes();
        this.cacheEnabled = cfg.maxEndpoints() <= 64 && cfg.hotCacheEntries() > 0;
        int slots = cacheEnabled ? Integer.highestOneBit(Math.max(16, cfg.hotCacheEntries() - 1)) << 1 : 1;
        this.cacheKeys = new long[slots];
        this.cacheBits = new long[slots];
        this.cacheGen = new int[slots];
        this.cacheMask = slots - 1;
        this.logHead = changes.tail();
    }

    /** Applies the writer's changes since the last lookup to the private cache. */
    private void syncCache() {
        long r = changes.drain(logHead, invalidator);
        if (r < 0) {
            logHead = -1 - r;
            cacheFlushes++;
            gen++;
            if (gen == 0) {
                Arrays.fill(cacheGen, 0);
                gen = 1;
            }
        } else {
            logHead = r;
        }
    }

    private void invalidate(long key) {
        int s = cacheSlot(key);
        if (cacheKeys[s] == key) {
            cacheGen[s] = 0;
        }
    }

    private int cacheSlot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h >>> 40) & cacheMask;
    }

    private void markCandidates(long bitmap, int base) {
        while (bitmap != 0) {
            int cand = candidateOf[Long.numberOfTrailingZeros(bitmap)];
            if (cand >= 0) {
                indexBits[base + (cand >>> 6)] |= 1L << (cand & 63);
            }
            bitmap &= bitmap - 1;
        }
    }

    /**
     * Copies the holder cells of {@code key} (see {@link Holders}) into {@code cellsOut}; returns how many, 0 when
     * the block is absent. {@code cellsOut} must hold {@code maxEndpoints * 8} cells.
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
            int n = (int) (v.size() / Holders.CELL_BYTES);
            for (int i = 0; i < n; i++) {
                cellsOut[i] = in.readInt(off + (long) i * Holders.CELL_BYTES);
            }
            return n;
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
            int n = (int) (v.size() / Holders.CELL_BYTES);
            for (int i = 0; i < n; i++) {
                if (Holders.endpointOf(in.readInt(off + (long) i * Holders.CELL_BYTES)) == endpointId) {
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
        lookups++;
        int n = Math.min(keyCount, maxPromptBlocks);
        int m = Math.min(endpointCount, candidateOf.length);
        for (int c = 0; c < endpointCount; c++) {
            matchedBlocksOut[c] = 0;
        }
        if (n <= 0 || m <= 0) {
            return;
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
                matchedBlocksOut[c] = depth(keys, n, cc, overlay, now);
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
        }
        int slot = 0;
        if (cacheEnabled) {
            slot = cacheSlot(key);
            if (cacheGen[slot] == gen && cacheKeys[slot] == key) {
                hotHits++;
                markCandidates(cacheBits[slot], base);
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
            if (e != null) {
                Data<byte[]> v = e.value();
                RandomDataInput in = v.bytes();
                long off = v.offset();
                int cellsN = (int) (v.size() / Holders.CELL_BYTES);
                for (int i = 0; i < cellsN; i++) {
                    int ep = Holders.endpointOf(in.readInt(off + (long) i * Holders.CELL_BYTES));
                    bitmap |= 1L << ep; // meaningful only with <= 64 endpoints (cache enabled)
                    int cand = ep < candidateOf.length ? candidateOf[ep] : -1;
                    if (cand >= 0) {
                        indexBits[base + (cand >>> 6)] |= 1L << (cand & 63);
                    }
                }
            }
            if (cacheEnabled) {
                // Absent blocks are cached too (bitmap 0): inserts are in the change log like every change.
                cacheKeys[slot] = key;
                cacheBits[slot] = bitmap;
                cacheGen[slot] = gen;
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

    /** Probes answered by this reader's cache of probed blocks. */
    public long hotHits() {
        return hotHits;
    }

    public long lookups() {
        return lookups;
    }
}
