package io.kvgate.dataplane.route;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * One endpoint's load per data-parallel rank, for requests pinned to a rank (kv_exact with {@code kv.dp_rank_hint}):
 * in flight, routed, finished and uncached prefill tokens per rank, and each rank's estimate built like the
 * endpoint's ({@link LoadEstimate}, whose fresh reading and sample weight it uses). Requests the engine placed itself
 * (no hint) count in the engine's numbers only.
 *
 * <p>Threading: single writer, the routing stage; the load scraper reads the routed/finished totals as a reading's
 * baselines (release stores), metrics and tests read the rest and may see a value a few decisions old.
 */
public final class RankLoad {
    static final int RANKS = EngineReading.MAX_RANKS;

    private final LoadEstimate endpoint;
    private final int[] outstanding = new int[RANKS];
    private final long[] prefill = new long[RANKS];
    /** Pinned requests routed to / finished on each rank (release stores; the scraper reads them as baselines). */
    private final AtomicLongArray routed = new AtomicLongArray(RANKS);
    private final AtomicLongArray completed = new AtomicLongArray(RANKS);
    /** Per rank: the peers' mean of the rank's count (see {@link LoadEstimate}, "other gateways' part"). */
    private final double[] peerMean = new double[RANKS];

    RankLoad(LoadEstimate endpoint) {
        this.endpoint = endpoint;
    }

    /**
     * The load estimate of one DP rank (kv_exact with rank hints scores each rank): the engine's running + waiting on
     * that rank from a fresh reading, plus the requests this gateway pinned to it since the scrape minus those of
     * them that finished, never below the pinned requests in flight there; without a fresh reading of the rank, the
     * pinned requests in flight.
     */
    int load(int rank) {
        EngineReading r = endpoint.freshReading();
        int own = outstanding[rank];
        if (r == null) {
            return own;
        }
        int running = r.running(rank);
        int waiting = r.waiting(rank);
        if (running < 0 && waiting < 0) {
            return own;
        }
        if (endpoint.sampleWeight() != 1.0) {
            return (int) Math.max(own, Math.min(Integer.MAX_VALUE, Math.round(estimate(rank, r))));
        }
        long est = (long) Math.max(0, running) + Math.max(0, waiting) + sinceReading(rank, r);
        return (int) Math.max(own, Math.min(Integer.MAX_VALUE, est));
    }

    /**
     * One rank's estimate with the peers' part predicted as for the endpoint ({@link LoadEstimate#estimate}): this
     * gateway's pinned requests in flight now (routed - finished, cumulative) plus the rank's peers' mean and aged
     * sample.
     */
    private double estimate(int rank, EngineReading r) {
        double peers = peerMean[rank] + (peerSample(r, rank) - peerMean[rank]) * endpoint.sampleWeight();
        long ownNow = routed.get(rank) - completed.get(rank);
        return Math.max(outstanding[rank], ownNow + peers);
    }

    /** {@link #load} plus {@code tokenWeight} per uncached prefill token pinned to the rank. */
    double cost(int rank, double tokenWeight) {
        double l = load(rank);
        EngineReading r = endpoint.freshReading();
        if (r != null && endpoint.sampleWeight() != 1.0 && (r.running(rank) >= 0 || r.waiting(rank) >= 0)) {
            l = estimate(rank, r);
        }
        return tokenWeight == 0 ? l : l + tokenWeight * prefill[rank];
    }

    /** The peers' part of one rank in reading {@code r}: the rank's count less this gateway's pinned requests then. */
    private static long peerSample(EngineReading r, int rank) {
        return (long) Math.max(0, r.running(rank)) + Math.max(0, r.waiting(rank))
            - (r.baseRankRouted(rank) - r.baseRankCompleted(rank));
    }

    private long sinceReading(int rank, EngineReading r) {
        return (routed.get(rank) - r.baseRankRouted(rank)) - (completed.get(rank) - r.baseRankCompleted(rank));
    }

    /** Takes reading {@code r}'s per-rank peers' samples into the means, keeping {@code keep} of the old ones. */
    void foldPeerSamples(EngineReading r, double keep) {
        for (int k = 0; k < r.ranks; k++) {
            peerMean[k] = LoadEstimate.peerMean(keep, peerMean[k], peerSample(r, k));
        }
    }

    /** Pinned requests in flight on {@code rank} (tests, metrics: may be a few decisions old elsewhere). */
    public int outstanding(int rank) {
        return outstanding[rank];
    }

    /** Pinned requests routed to {@code rank} since start (the scraper's baseline). */
    public long routedTotal(int rank) {
        return routed.get(rank);
    }

    /** Pinned requests that finished on {@code rank} since start (the scraper's baseline). */
    public long completedTotal(int rank) {
        return completed.get(rank);
    }

    /** The two parts of one rank's estimate, as {@link LoadEstimate#explain} does for the endpoint. */
    void explain(int rank, StringBuilder out) {
        EngineReading r = endpoint.freshReading();
        out.append(load(rank)).append("(engine=");
        if (r != null && (r.running(rank) >= 0 || r.waiting(rank) >= 0)) {
            long since = sinceReading(rank, r);
            out.append(Math.max(0, r.running(rank)) + Math.max(0, r.waiting(rank))).append(" local=")
                .append(since >= 0 ? "+" : "").append(since);
        } else {
            out.append(r == null ? endpoint.loadSource().label : "unknown").append(" local=").append(outstanding[rank]);
        }
        long t = prefill[rank];
        if (t > 0) {
            out.append(" prefill_tokens=").append(t);
        }
        out.append(')');
    }

    /** A request pinned to {@code rank} was routed with {@code uncachedTokens} of prefill charged (routing stage). */
    void onRouted(int rank, int uncachedTokens) {
        outstanding[rank]++;
        routed.lazySet(rank, routed.get(rank) + 1);
        if (uncachedTokens > 0) {
            prefill[rank] += uncachedTokens;
        }
    }

    /** {@code n} requests pinned to {@code rank} finished (routing stage only; their endpoint completion comes too). */
    void onCompleted(int rank, long n) {
        outstanding[rank] = (int) Math.max(0, outstanding[rank] - n);
        completed.lazySet(rank, completed.get(rank) + n);
        if (outstanding[rank] == 0) {
            prefill[rank] = 0; // as for the endpoint: no pinned request in flight, nothing in prefill
        }
    }

    /** Requests pinned to {@code rank} reported {@code tokens} of their charged prefill done (routing stage only). */
    void onPrefillDone(int rank, long tokens) {
        prefill[rank] = Math.max(0, prefill[rank] - tokens);
    }
}
