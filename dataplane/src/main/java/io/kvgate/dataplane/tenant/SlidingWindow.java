package io.kvgate.dataplane.tenant;

/**
 * A count over the last {@code buckets × bucketNs} (60 × 1 s for a per-minute limit, 1,440 × 1 min for a per-day one):
 * in any window of that length aligned to the buckets the sum never exceeds what was admitted, so a limit holds over
 * every minute, not only over calendar minutes (a fixed window admits twice its limit across a boundary). A bucket
 * leaves whole when its time is up, which is what {@code x-ratelimit-reset-*} and {@code Retry-After} report.
 *
 * <p>Times are the injected clock's nanoseconds. Not thread-safe: guarded by its tenant's {@link TenantUsage}.
 * Advancing costs at most one pass over the buckets (after an idle window), usually one slot.
 */
final class SlidingWindow {
    private final int buckets;
    private final long bucketNs;
    private final long[] counts;
    /** The newest bucket (epoch = time / bucketNs) seen: slots of older epochs within the window still count. */
    private long head = Long.MIN_VALUE;
    private long sum;

    SlidingWindow(int buckets, long bucketNs) {
        this.buckets = buckets;
        this.bucketNs = bucketNs;
        this.counts = new long[buckets];
    }

    long epoch(long nowNs) {
        return Math.floorDiv(nowNs, bucketNs);
    }

    /** Moves the window to {@code nowNs}: buckets that left it are cleared. */
    void advance(long nowNs) {
        long e = epoch(nowNs);
        if (head == Long.MIN_VALUE) {
            head = e;
            return;
        }
        if (e <= head) {
            return;
        }
        long steps = Math.min(e - head, buckets);
        for (long x = e - steps + 1; x <= e; x++) {
            int i = (int) Math.floorMod(x, (long) buckets);
            sum -= counts[i];
            counts[i] = 0;
        }
        head = e;
    }

    /** What the window holds now (after {@link #advance}). */
    long sum() {
        return sum;
    }

    /** Adds {@code amount} to the current bucket (after {@link #advance}); returns the bucket's epoch for {@link #adjust}. */
    long add(long amount) {
        counts[(int) Math.floorMod(head, (long) buckets)] += amount;
        sum += amount;
        return head;
    }

    /**
     * Corrects bucket {@code epoch} by {@code delta} (a settled reservation: the actual tokens minus the reserved), if it
     * is still in the window (after {@link #advance}); a bucket is never taken below zero.
     */
    void adjust(long epoch, long delta) {
        if (epoch > head || epoch <= head - buckets) {
            return; // it left the window: what it held no longer counts either way
        }
        int i = (int) Math.floorMod(epoch, (long) buckets);
        long d = Math.max(-counts[i], delta);
        counts[i] += d;
        sum += d;
    }

    /**
     * How long until {@code needed} more fits under {@code limit} as buckets leave (0: it fits now), or -1 when it
     * never can ({@code needed > limit}).
     */
    long nsUntilFits(long limit, long needed, long nowNs) {
        if (sum + needed <= limit) {
            return 0;
        }
        if (needed > limit) {
            return -1;
        }
        long freed = 0;
        for (long x = head - buckets + 1; x <= head; x++) {
            freed += counts[(int) Math.floorMod(x, (long) buckets)];
            if (sum - freed + needed <= limit) {
                return Math.max(0, (x + buckets) * bucketNs - nowNs);
            }
        }
        return Math.max(0, (head + buckets) * bucketNs - nowNs);
    }

    /** How long until the window is empty again (its newest non-empty bucket leaves); 0 when it is. */
    long nsUntilEmpty(long nowNs) {
        for (long x = head; x > head - buckets; x--) {
            if (counts[(int) Math.floorMod(x, (long) buckets)] != 0) {
                return Math.max(0, (x + buckets) * bucketNs - nowNs);
            }
        }
        return 0;
    }
}
