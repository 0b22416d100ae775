package io.kvgate.dataplane.route;

import java.util.Arrays;

/**
 * One endpoint's recent time to first token as this gateway measured it, and what the load-aware policies make of it
 * (outlier avoidance, issue #41 item 3; docs/routing.md "TTFT-aware load").
 *
 * <p><b>Measurements.</b> A streamed leg reports the time from sending its request to its first body bytes (the
 * engine's first SSE event: the end of prefill, queueing included). A primary leg that lost a hedge race reports how
 * long it had waited when it was cancelled: a lower bound of its TTFT, which only raises the average (a bound below
 * the average says nothing new) but counts as fresh evidence. Both arrive as per-endpoint sums through the event
 * loops' {@link RouterPort} counters, so a batch of them is folded as its mean with the weight of that many samples.
 *
 * <p><b>Recovery.</b> An endpoint the policies avoid gets few requests, so few new measurements: its excess over its
 * fleet's value fades with the age of its last measurement, {@code fleet + (average - fleet) x exp(-age / recover)}
 * ({@code load.ttft_recover_ms}), until it is picked again and re-measured. A persistently slow endpoint so gets a
 * probe about every {@code 1.5 x recover + its TTFT}; a recovered one is back within a few {@code recover}.
 *
 * <p><b>The fleet.</b> The routing stage sets each endpoint's fleet value at every housekeeping: the lower median of
 * the averages of the endpoints its rule may send the same request to (per role on a P/D rule). The lower median, so
 * that one straggler among two or four endpoints does not drag the reference toward itself. An endpoint listed by two
 * rules takes the last rule's fleet.
 *
 * <p><b>The load factor.</b> With {@code load.ttft_aware} on, an endpoint whose recent TTFT is more than
 * {@link #OUTLIER_RATIO} times its fleet's is weighed {@code ratio} times busier: {@link #weigh} turns load {@code l}
 * into {@code (l + 1) x ratio - 1}, the expected wait of one more request if each request ahead of it costs
 * {@code ratio} times the fleet's (an idle straggler at 10x compares like a fast endpoint with 9 requests in
 * flight). Below the ratio the factor is 1, so ordinary jitter changes no routing.
 *
 * <p>Threading: single writer, the routing stage; {@link #recentNs()} is published for other threads (the hedge
 * timer on the event loops, metrics, admin).
 */
public final class TtftEstimate {
    /** Weight of one new measurement in the average (about the last 3 measurements dominate). */
    static final double SAMPLE_WEIGHT = 0.3;
    /** Recent TTFT over this many times the fleet's: the endpoint is an outlier and weighed as busier. */
    static final double OUTLIER_RATIO = 2.0;

    /** Measured average in ns, NaN before the first measurement. */
    private double averageNs = Double.NaN;
    /** When the last measurement (or lower bound) was folded in. */
    private long measuredAtNs;
    /** Routing stage only: the multiplier {@link #weigh} applies (1: not an outlier, or TTFT-aware load off). */
    private double loadFactor = 1.0;
    /** The recent TTFT capped at the fleet's, in ns, -1 while unknown (any thread). */
    private volatile long publishedRecentNs = -1;
    /** The recent TTFT before the cap, in ns, -1 while unknown (any thread: metrics, explain). */
    private volatile long publishedOwnNs = -1;

    /** {@code count} first tokens measured here summing {@code sumNs} (routing stage). */
    void onMeasured(long sumNs, long count, long nowNs) {
        if (count <= 0) {
            return;
        }
        fold((double) sumNs / count, count);
        measuredAtNs = nowNs;
    }

    /**
     * {@code count} legs cancelled here before their first token after waits summing {@code sumNs} (lower bounds of
     * their TTFT; routing stage).
     */
    void onLowerBound(long sumNs, long count, long nowNs) {
        if (count <= 0) {
            return;
        }
        double bound = (double) sumNs / count;
        if (Double.isNaN(averageNs) || bound > averageNs) {
            fold(bound, count);
        }
        measuredAtNs = nowNs; // still slow as of now: the excess starts fading again from here
    }

    private void fold(double meanNs, long count) {
        if (Double.isNaN(averageNs)) {
            averageNs = meanNs;
            return;
        }
        double w = 1 - Math.pow(1 - SAMPLE_WEIGHT, Math.min(count, 64));
        averageNs += w * (meanNs - averageNs);
    }

    /** The measured average in ns, NaN before any (routing stage; the fleet's median is taken over these). */
    double averageNs() {
        return averageNs;
    }

    /**
     * The recent TTFT at {@code nowNs}: the average, its excess over {@code fleetNs} faded by the age of the last
     * measurement; NaN while unmeasured. An endpoint faster than its fleet keeps its own value.
     */
    static double recentNs(double averageNs, long ageNs, double fleetNs, long recoverNs) {
        if (Double.isNaN(averageNs) || Double.isNaN(fleetNs) || averageNs <= fleetNs) {
            return averageNs;
        }
        double keep = ageNs <= 0 ? 1.0 : Math.exp(-(double) ageNs / Math.max(1, recoverNs));
        return fleetNs + (averageNs - fleetNs) * keep;
    }

    /**
     * Applies the fleet's value at {@code nowNs} (routing stage, every housekeeping): the load factor when
     * {@code aware}, and the published recent TTFT.
     */
    void applyFleet(double fleetNs, long nowNs, long recoverNs, boolean aware) {
        double recent = recentNs(averageNs, nowNs - measuredAtNs, fleetNs, recoverNs);
        double ratio = Double.isNaN(recent) || Double.isNaN(fleetNs) || fleetNs <= 0 ? 1.0 : recent / fleetNs;
        loadFactor = aware && ratio > OUTLIER_RATIO ? ratio : 1.0;
        long own = Double.isNaN(recent) ? -1 : Math.round(recent);
        long capped = Double.isNaN(fleetNs) || own < 0 ? own : Math.min(own, Math.round(fleetNs));
        if (own != publishedOwnNs) {
            publishedOwnNs = own;
        }
        if (capped != publishedRecentNs) {
            publishedRecentNs = capped;
        }
    }

    /** The multiplier the load-aware policies apply (routing stage): 1 unless an outlier with TTFT-aware load on. */
    double loadFactor() {
        return loadFactor;
    }

    /**
     * The recent TTFT capped at the fleet's, in ns, or -1 while unmeasured (any thread): what {@code hedge.ttft_factor}
     * multiplies. Capped so that a straggler is hedged on the time another endpoint would take, not on its own.
     */
    public long recentNs() {
        return publishedRecentNs;
    }

    /** The endpoint's own recent TTFT (faded toward the fleet's), in ns, or -1 while unmeasured (any thread). */
    public long ownRecentNs() {
        return publishedOwnNs;
    }

    /** {@code load} weighed by {@code factor}: {@code (load + 1) x factor - 1}, the load itself at factor 1. */
    static double weigh(double load, double factor) {
        return factor == 1.0 ? load : (load + 1) * factor - 1;
    }

    /**
     * The lower median of the measured averages of {@code eps} (NaN when none is measured), sorting a prefix of
     * {@code scratch} (at least {@code eps.length} long) in place.
     */
    static double fleetNs(EndpointState[] eps, double[] scratch) {
        int n = 0;
        for (EndpointState ep : eps) {
            double a = ep.ttft().averageNs();
            if (!Double.isNaN(a)) {
                scratch[n++] = a;
            }
        }
        if (n == 0) {
            return Double.NaN;
        }
        Arrays.sort(scratch, 0, n);
        return scratch[(n - 1) / 2];
    }
}
