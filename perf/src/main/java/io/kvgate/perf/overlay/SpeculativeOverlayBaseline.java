package io.kvgate.perf.overlay;

import io.kvgate.control.clock.NanoClock;

/**
 * The speculative overlay's insert path as it was before #42's fix (main {@code 5b5787a}), kept only as the "before"
 * side of {@link OverlayChurnBench}: after a compaction, the next one was due as soon as the earliest live entry
 * expired, so a table that a key rate overflows within the TTL was rescanned whole on nearly every routed request.
 * Only what recording routed blocks runs (no lookups).
 */
final class SpeculativeOverlayBaseline {
    private static final int EMPTY = -1;

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

    SpeculativeOverlayBaseline(int capacityEntries, long ttlNs, NanoClock clock) {
        int slots = Integer.highestOneBit(Math.max(2, capacityEntries * 2 - 1)) << 1;
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

    void recordRouted(int endpointId, long[] blockKeys, int keyCount) {
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
                return false;
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

    private void compact(long now) {
        compactions++;
        int live = 0;
        long earliest = now + ttlNs;
        for (int s = 0; s <= mask; s++) {
            if (endpoints[s] == EMPTY || expiresNs[s] - now <= 0) {
                continue;
            }
            if (expiresNs[s] - earliest < 0) {
                earliest = expiresNs[s];
            }
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
        noCompactionBeforeNs = earliest;
        compactedBefore = true;
    }

    long dropped() {
        return dropped;
    }

    long compactions() {
        return compactions;
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }
}
