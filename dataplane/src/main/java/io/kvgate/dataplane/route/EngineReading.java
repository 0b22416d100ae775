package io.kvgate.dataplane.route;

import java.util.Arrays;

/**
 * One scrape of an engine's Prometheus page, as the routing stage uses it: per DP rank the requests the engine runs,
 * the requests waiting in its queue and its KV-cache usage, plus what this gateway had routed to the endpoint when
 * the scrape was sent, so the routing stage can add exactly the requests it dispatched (and subtract those that
 * finished) since the engine counted. Immutable: the scraper builds one per successful scrape and publishes it with
 * one volatile write ({@link LoadEstimate#publishReading}); the routing thread reads the reference, never a lock.
 */
public final class EngineReading {
    /** DP ranks a reading carries (the block index's bound, {@code dp_ranks} 1..8). */
    public static final int MAX_RANKS = 8;

    /** When the scrape was sent ({@link io.kvgate.control.clock.NanoClock} of the gateway). */
    final long takenAtNs;
    /** {@link LoadEstimate#routedTotal()} and {@link LoadEstimate#completedTotal()} when the scrape was sent. */
    final long baseRouted;
    final long baseCompleted;
    /** Per DP rank: the requests this gateway pinned to the rank ({@code X-data-parallel-rank}) and saw finish. */
    private final long[] baseRankRouted;
    private final long[] baseRankCompleted;
    /** Ranks seen: the highest rank label + 1 (1 when the engine labels none). */
    final int ranks;
    private final int[] running;
    private final int[] waiting;
    private final double[] kvUsage;
    final int runningTotal;
    final int waitingTotal;
    /** The fullest rank's KV-cache usage in [0, 1], NaN when the page had none. */
    final double kvUsageMax;

    /**
     * @param running per rank, -1 where the page had no series (counts 0 in the totals)
     * @param waiting per rank, as {@code running}
     * @param kvUsage per rank in [0, 1], NaN where unknown
     */
    public EngineReading(long takenAtNs, long baseRouted, long baseCompleted, int[] running, int[] waiting, double[] kvUsage) {
        this(takenAtNs, baseRouted, baseCompleted, new long[0], new long[0], running, waiting, kvUsage);
    }

    /**
     * @param baseRankRouted    per rank, {@link RankLoad#routedTotal} when the scrape was sent
     * @param baseRankCompleted per rank, {@link RankLoad#completedTotal} then
     */
    public EngineReading(long takenAtNs, long baseRouted, long baseCompleted, long[] baseRankRouted, long[] baseRankCompleted,
                         int[] running, int[] waiting, double[] kvUsage) {
        this.baseRankRouted = java.util.Arrays.copyOf(baseRankRouted, MAX_RANKS);
        this.baseRankCompleted = java.util.Arrays.copyOf(baseRankCompleted, MAX_RANKS);
        int n = Math.max(1, Math.min(MAX_RANKS, Math.max(running.length, Math.max(waiting.length, kvUsage.length))));
        this.takenAtNs = takenAtNs;
        this.baseRouted = baseRouted;
        this.baseCompleted = baseCompleted;
        this.ranks = n;
        this.running = fit(running, n);
        this.waiting = fit(waiting, n);
        this.kvUsage = new double[n];
        Arrays.fill(this.kvUsage, Double.NaN);
        System.arraycopy(kvUsage, 0, this.kvUsage, 0, Math.min(n, kvUsage.length));
        int r = 0;
        int w = 0;
        double u = Double.NaN;
        for (int i = 0; i < n; i++) {
            r += Math.max(0, this.running[i]);
            w += Math.max(0, this.waiting[i]);
            if (!Double.isNaN(this.kvUsage[i]) && (Double.isNaN(u) || this.kvUsage[i] > u)) {
                u = this.kvUsage[i];
            }
        }
        this.runningTotal = r;
        this.waitingTotal = w;
        this.kvUsageMax = u;
    }

    private static int[] fit(int[] a, int n) {
        int[] out = new int[n];
        Arrays.fill(out, -1);
        System.arraycopy(a, 0, out, 0, Math.min(n, a.length));
        return out;
    }

    /** Whether the page carried the request counts (running or waiting) the load estimate is built on. */
    public boolean hasQueue() {
        for (int i = 0; i < ranks; i++) {
            if (running[i] >= 0 || waiting[i] >= 0) {
                return true;
            }
        }
        return false;
    }

    long baseRankRouted(int rank) {
        return baseRankRouted[rank];
    }

    long baseRankCompleted(int rank) {
        return baseRankCompleted[rank];
    }

    public long takenAtNs() {
        return takenAtNs;
    }

    public int ranks() {
        return ranks;
    }

    /** Requests running on {@code rank}, -1 when the page did not say. */
    public int running(int rank) {
        return rank < ranks ? running[rank] : -1;
    }

    /** Requests waiting on {@code rank}, -1 when the page did not say. */
    public int waiting(int rank) {
        return rank < ranks ? waiting[rank] : -1;
    }

    /** KV-cache usage of {@code rank} in [0, 1], NaN when the page did not say. */
    public double kvUsage(int rank) {
        return rank < ranks ? kvUsage[rank] : Double.NaN;
    }

    public int runningTotal() {
        return runningTotal;
    }

    public int waitingTotal() {
        return waitingTotal;
    }

    public double kvUsageMax() {
        return kvUsageMax;
    }

    @Override
    public String toString() {
        return "EngineReading{running=" + Arrays.toString(running) + ", waiting=" + Arrays.toString(waiting) + ", kvUsage="
            + Arrays.toString(kvUsage) + "}";
    }
}
