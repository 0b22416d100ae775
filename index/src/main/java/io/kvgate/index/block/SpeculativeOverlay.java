package io.kvgate.index.block;

import io.kvgate.control.clock.NanoClock;

/**
 * Blocks the router has just sent to an endpoint, counted as held by that endpoint for a short TTL: the engine
 * publishes its BlockStored only after the prefill ran, so without this a burst of requests sharing a new prefix
 * would all see an empty index and scatter. An entry stops counting when its TTL lapses or when a lookup finds the
 * index already confirms the same (block, endpoint) (the engine's event arrived).
 *
 * <p>On-heap open addressing over three parallel arrays (key, endpoint, expiry), linear probing, at most half
 * full. Expired entries are reused in place; when the table reaches half full it is compacted (expired entries
 * dropped) into a second pre-allocated table; if it is still half full the new keys are dropped and counted in
 * {@link #dropped()}. A compaction that freed little is not repeated until an eighth of the table's entries can
 * have expired (a histogram of the live entries' expiries, taken during the compaction, says when): under a key
 * rate the table cannot hold for the TTL (#42: 100 KB prompts, ~1,500 new blocks each, 500 req/s), every routed
 * request used to rescan the whole table because one entry had expired since the last compaction. Bounded, no
 * allocation after construction.
 *
 * <p><b>Threading contract:</b> owned by the routing thread; every method is for that thread only.
 */
public final class SpeculativeOverlay {
    private static final int EMPTY = -1;
    /** What a routing rule's overlay holds at most: 2^17 (block, endpoint) entries, 10 MiB. */
    public static final int DEFAULT_RULE_ENTRIES = 1 << 17;
    /** Bytes per slot over the live and the spare table: key, endpoint, expiry, twice. */
    private static final int SLOT_BYTES = 2 * (Long.BYTES + Integer.BYTES + Long.BYTES);
    /** The resolution of the "when can a compaction free enough" estimate: 1/64 of the TTL. */
    private static final int EXPIRY_BUCKETS = 64;
    /** A compaction is worth its full scan once it can free this fraction (1/n) of the table's entries. */
    private static final int WORTHWHILE_FRACTION = 8;

    private final NanoClock clock;
    private final long ttlNs;
    private final int mask;
    private final int maxUsed;

    private long[] keys;
    private int[] endpoints;
    private long[] expiresNs;
    private long[] spareKeys;
    private int[] spareEndpoints;
    private long[] spareExpiresNs;
    private int used;
    private long dropped;
    private long compactions;
    private long noCompactionBeforeNs;
    private boolean compactedBefore;
    /** Live entries by expiry during a compaction: bucket b holds those expiring in (now + b * ttl / n, now + (b + 1) * ttl / n]. */
    private final int[] expiryBuckets = new int[EXPIRY_BUCKETS];

    /**
     * @param capacityEntries (block, endpoint) entries kept at most; the table has 2x that many slots
     * @param ttlNs           how long a routed block counts without confirmation
     */
    public SpeculativeOverlay(int capacityEntries, long ttlNs, NanoClock clock) {
        if (capacityEntries < 1 || capacityEntries > 1 << 28) {
            throw new IllegalArgumentException("overlayCapacityEntries=" + capacityEntries + " must be in 1..268435456");
        }
        if (ttlNs <= 0) {
            throw new IllegalArgumentException("overlayTtlNs=" + ttlNs + " must be > 0");
        }
        int slots = slotsFor(capacityEntries);
        this.clock = clock;
        this.ttlNs = ttlNs;
        this.mask = slots - 1;
        this.maxUsed = slots >>> 1;
        this.keys = new long[slots];
        this.endpoints = new int[slots];
        this.expiresNs = new long[slots];
        this.spareKeys = new long[slots];
        this.spareEndpoints = new int[slots];
        this.spareExpiresNs = new long[slots];
        java.util.Arrays.fill(endpoints, EMPTY);
        java.util.Arrays.fill(spareEndpoints, EMPTY);
    }

    /**
     * Entries of a routing rule's overlay whose engines hold at most {@code kvCapacityBlocks} blocks
     * ({@code kv_capacity_blocks}): routed blocks are on their way into those caches, and more of them than the
     * caches hold would be evicted before they are confirmed; {@link #DEFAULT_RULE_ENTRIES} at most, 1024 at least.
     * Before (review B-7) every rule took 2^17 entries, 10 MiB, whatever its capacity.
     */
    public static int entriesFor(long kvCapacityBlocks) {
        return (int) Math.max(1024, Math.min(DEFAULT_RULE_ENTRIES, kvCapacityBlocks));
    }

    private static int slotsFor(int capacityEntries) {
        return Integer.highestOneBit(Math.max(2, capacityEntries * 2 - 1)) << 1;
    }

    /** Heap bytes (array payloads) of an overlay of {@code capacityEntries}: {@link #heapBytes()} once built. */
    public static long heapBytesFor(int capacityEntries) {
        return (long) slotsFor(capacityEntries) * SLOT_BYTES;
    }

    /** Heap bytes (array payloads) this overlay holds, from the arrays it allocated. */
    public long heapBytes() {
        return (long) (keys.length + expiresNs.length + spareKeys.length + spareExpiresNs.length) * Long.BYTES
            + (long) (endpoints.length + spareEndpoints.length) * Integer.BYTES;
    }

    /** The router sent a prompt with these block keys to {@code endpointId}: count them for the TTL. */
    public void recordRouted(int endpointId, long[] blockKeys, int keyCount) {
        long now = clock.nanoTime();
        long expiry = now + ttlNs;
        for (int i = 0; i < keyCount; i++) {
            if (!put(blockKeys[i], endpointId, expiry, now)) {
                dropped += keyCount - i;
                return;
            }
        }
    }

    private boolean put(long key, int endpointId, long expiry, long now) {
        int s = slot(key);
        int reusable = -1;
        while (endpoints[s] != EMPTY) {
            if (keys[s] == key && endpoints[s] == endpointId) {
                expiresNs[s] = expiry;
                return true;
            }
            if (reusable < 0 && expiresNs[s] - now <= 0) {
                reusable = s;
            }
            s = (s + 1) & mask;
        }
        if (reusable >= 0) {
            keys[reusable] = key;
            endpoints[reusable] = endpointId;
            expiresNs[reusable] = expiry;
            return true;
        }
        if (used >= maxUsed) {
            if (compactedBefore && now - noCompactionBeforeNs < 0) {
                return false; // nothing can have expired since the last compaction: do not rescan the table
            }
            compact(now);
            if (used >= maxUsed) {
                return false;
            }
            s = slot(key);
            while (endpoints[s] != EMPTY) {
                s = (s + 1) & mask;
            }
        }
        keys[s] = key;
        endpoints[s] = endpointId;
        expiresNs[s] = expiry;
        used++;
        return true;
    }

    /** Re-inserts live entries into the spare table and swaps: drops expired entries and their probe chains. */
    private void compact(long now) {
        compactions++;
        int live = 0;
        long earliest = now + ttlNs;
        java.util.Arrays.fill(expiryBuckets, 0);
        for (int s = 0; s <= mask; s++) {
            if (endpoints[s] == EMPTY || expiresNs[s] - now <= 0) {
                continue;
            }
            if (expiresNs[s] - earliest < 0) {
                earliest = expiresNs[s];
            }
            expiryBuckets[bucketOf(expiresNs[s] - now)]++;
            int t = slot(keys[s]);
            while (spareEndpoints[t] != EMPTY) {
                t = (t + 1) & mask;
            }
            spareKeys[t] = keys[s];
            spareEndpoints[t] = endpoints[s];
            spareExpiresNs[t] = expiresNs[s];
            live++;
        }
        java.util.Arrays.fill(endpoints, EMPTY);
        long[] k = keys;
        int[] e = endpoints;
        long[] x = expiresNs;
        keys = spareKeys;
        endpoints = spareEndpoints;
        expiresNs = spareExpiresNs;
        spareKeys = k;
        spareEndpoints = e;
        spareExpiresNs = x;
        used = live;
        int wanted = maxUsed / WORTHWHILE_FRACTION - (maxUsed - live);
        // With room for an eighth of the table, the next compaction is due once anything can have expired (a full
        // table then drops new keys, counted, instead of rescanning every slot on every insert); with less, once an
        // eighth can have.
        noCompactionBeforeNs = wanted <= 0 ? earliest : now + worthwhileAfterNs(wanted);
        compactedBefore = true;
    }

    /** The bucket of an entry expiring {@code remainingNs} (in 1..ttl) from now. */
    private int bucketOf(long remainingNs) {
        return (int) Math.min(EXPIRY_BUCKETS - 1, (remainingNs - 1) * EXPIRY_BUCKETS / ttlNs);
    }

    /**
     * How long after a compaction the next one waits for {@code wanted} more live entries to expire: to the end of
     * the histogram bucket where the expiries, summed from the soonest, reach it (so at least that many have
     * expired by then), or until every live entry has.
     */
    private long worthwhileAfterNs(int wanted) {
        int freed = 0;
        int b = 0;
        for (; b < EXPIRY_BUCKETS - 1; b++) {
            freed += expiryBuckets[b];
            if (freed >= wanted) {
                break;
            }
        }
        return (b + 1) * ttlNs / EXPIRY_BUCKETS + 1;
    }

    /**
     * Marks, for one block, the candidates the overlay still counts: for each live entry of {@code key} whose
     * endpoint is a candidate ({@code candidateOf[endpoint] >= 0}), sets its bit in {@code bits[bitBase..]} unless
     * the index already confirmed it (bit already set), in which case the entry is retired.
     */
    void mark(long key, long now, int[] candidateOf, long[] bits, int bitBase, long[] confirmedBits) {
        int s = slot(key);
        while (endpoints[s] != EMPTY) {
            if (keys[s] == key && expiresNs[s] - now > 0) {
                int ep = endpoints[s];
                int c = ep < candidateOf.length ? candidateOf[ep] : -1;
                if (c >= 0) {
                    long bit = 1L << (c & 63);
                    int w = bitBase + (c >>> 6);
                    if ((confirmedBits[w] & bit) != 0) {
                        expiresNs[s] = now; // the engine's event confirmed it: the overlay entry has done its job
                    } else {
                        bits[w] |= bit;
                    }
                }
            }
            s = (s + 1) & mask;
        }
    }

    /** Whether the overlay currently counts {@code key} for {@code endpointId}. */
    public boolean contains(int endpointId, long key) {
        long now = clock.nanoTime();
        int s = slot(key);
        while (endpoints[s] != EMPTY) {
            if (keys[s] == key && endpoints[s] == endpointId && expiresNs[s] - now > 0) {
                return true;
            }
            s = (s + 1) & mask;
        }
        return false;
    }

    NanoClock clock() {
        return clock;
    }

    /** Keys not recorded because the table was full of live entries. */
    public long dropped() {
        return dropped;
    }

    public long compactions() {
        return compactions;
    }

    /** Occupied slots (live or expired-but-not-yet-reused). */
    public int usedSlots() {
        return used;
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }
}
