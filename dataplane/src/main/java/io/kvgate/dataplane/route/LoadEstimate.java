package io.kvgate.dataplane.route;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One endpoint's load as this gateway estimates it: what every load-aware policy compares ({@link #load()}).
 *
 * <p>With a fresh engine reading (the scraper's last successful scrape of the engine's {@code /metrics}, not older
 * than {@code load.stale_ms}) it is the engine's running + waiting requests, plus the requests this gateway routed
 * here since that scrape was sent, minus the requests of this gateway that finished here since then, and never less
 * than this gateway's own in-flight count. So other gateways' traffic is visible (it is in the engine's numbers) and
 * a burst this gateway just sent is not invisible until the next scrape. Without a fresh reading (no
 * {@code /metrics}, a failed or slow scrape, scraping off) it is this gateway's in-flight count, as before, flagged
 * {@link LoadSource#STALE} or {@link LoadSource#UNKNOWN}. On top of it, kv_exact rules add
 * {@code kv.prefill_token_weight} times the uncached prompt tokens of this gateway's requests still in prefill here
 * ({@link #prefillTokens()}).
 *
 * <p><b>Other gateways' part, and its age</b> ({@code load.peer_decay: lifetime}, the default). The estimate above is
 * this gateway's in flight now plus the other gateways' part as it was at the scrape: {@code peers = engine running +
 * waiting - this gateway's in flight when the scrape was sent}. This gateway's part is exact; the peers' part is a
 * sample as old as the reading. When requests live shorter than the scrape interval (a 100 ms request, a 250 ms
 * scrape) that sample says next to nothing about the peers' requests now: most of them have finished, others have
 * started, and each replica holds a different sample of the same engine (its scrapes run at their own phase). The
 * bounds and the least-loaded choices then acted on noise of the order of the load itself: with 3 replicas kv_exact
 * walked off cached engines (multi-turn hit ratio -3.1 points) and queued requests behind samples that were already
 * gone (perf/results/fleet-2026-12-02-b.md). So the peers' part is predicted rather than replayed: it reverts from
 * the sample to the peers' mean here (an average of the samples over {@link #PEER_MEAN_WINDOW_NS}) as the sample
 * ages, {@code peers(now) = mean + (sample - mean) * exp(-age / lifetime)}, the best linear predictor of a count of
 * requests that arrive at random and live {@code lifetime} on average (M/M/infinity). The lifetime is this gateway's
 * own requests' mean time in flight here (Little's law over the same window: the time-integral of in-flight over the
 * completions); while it is unknown (fewer than {@link #MIN_LIFETIME_COMPLETIONS} completions in the window) the
 * sample counts in full, as it does with {@code load.peer_decay: none}. Long requests (seconds, a real LLM's) keep a
 * 250 ms-old sample at nearly full weight; requests shorter than the scrape interval see the mean. A peer's lasting
 * burst still shows: in full right after each scrape, and in the mean within the window. Per DP rank the same holds
 * ({@link RankLoad}, which uses this estimate's fresh reading and sample weight).
 *
 * <p>Threading: single writer, the routing stage (every method without "any thread" below); the load scraper posts
 * readings through {@link #publishReading} (a one-slot volatile mailbox the stage takes up at its next batch) and
 * reads the routed/finished totals as baselines; metrics and admin read volatile fields a few requests old.
 */
public final class LoadEstimate {
    /** Where the load estimate comes from now. */
    public enum LoadSource {
        /** A fresh engine reading plus this gateway's requests since it was taken. */
        ENGINE,
        /** The last reading is older than {@code load.stale_ms}: this gateway's in-flight count. */
        STALE,
        /** No reading (never scraped successfully, no metrics page, scraping off): this gateway's in-flight count. */
        UNKNOWN;

        public final String label = name().toLowerCase(java.util.Locale.ROOT);
    }

    /** Window of the peers' mean and of the lifetime estimate: 8 scrapes at the default 250 ms. */
    static final long PEER_MEAN_WINDOW_NS = 2_000_000_000L;
    /** Completions of this gateway's requests (decayed over the window) below which the lifetime is unknown. */
    static final double MIN_LIFETIME_COMPLETIONS = 4.0;

    /** Per DP rank, built on this estimate's reading. */
    final RankLoad ranks = new RankLoad(this);

    /** This gateway's requests in flight here (volatile only for readers on other threads). */
    private volatile int outstanding;
    /** Uncached prompt tokens of requests routed here and still in prefill (kv_exact charges, see RouterPort). */
    private volatile long prefillTokens;
    /** Requests routed here (release stores); the scraper reads it as a reading's baseline. */
    private final AtomicLong routed = new AtomicLong();
    /** Requests routed here that finished, any outcome (release stores); a reading's baseline too. */
    private final AtomicLong completed = new AtomicLong();

    /** Mailbox: the load scraper's last reading (one writer), taken up at the stage's next batch. */
    private volatile EngineReading reading;
    /** The reading in use (null when none is fresh) and where the estimate comes from. */
    private EngineReading fresh;
    private volatile LoadSource loadSource = LoadSource.UNKNOWN;

    /** The reading whose sample is folded into {@link #peerMean} (each one is taken up once). */
    private EngineReading peerFolded;
    /** The peers' mean here (NaN before the first reading) and when it was last updated. */
    private double peerMean = Double.NaN;
    private long peerMeanAtNs;
    /** The peers' part predicted at the last refresh, and the weight its sample had then (1: in full). */
    private double peerPart;
    private double sampleWeight = 1.0;
    /** Time-integral of this gateway's in-flight requests here (request-nanoseconds) and its last update. */
    private long busyNs;
    private long busyAtNs;
    private boolean busyStarted;
    /** Decayed sums over the window: in-flight time and completions, at the last fold, for the lifetime. */
    private double lifeBusyNs;
    private double lifeDone;
    private long lifeAtNs;
    private long lifeBusyMark;
    private long lifeDoneMark;
    private boolean lifeStarted;
    /** {@link #lifetimeNs()} as of the last fold, for other threads (metrics). */
    private volatile double publishedLifetimeNs = -1;

    /** Requests in flight as of the routing stage's last batch (any thread). */
    public int outstanding() {
        return outstanding;
    }

    /**
     * The load estimate the policies compare (see the class comment): routing stage only, where it is exact as of
     * the current decision; other threads may read a slightly older value.
     */
    public int load() {
        EngineReading r = fresh;
        int own = outstanding;
        if (r == null) {
            return own;
        }
        if (sampleWeight == 1.0) {
            long est = (long) r.runningTotal + r.waitingTotal + sinceReading(r);
            return (int) Math.max(own, Math.min(Integer.MAX_VALUE, est));
        }
        return (int) Math.max(own, Math.min(Integer.MAX_VALUE, Math.round(own + peerPart)));
    }

    /** {@link #load()} unrounded: the predicted peers' part is fractional (what kv_exact's cost compares). */
    double estimate() {
        EngineReading r = fresh;
        if (r == null || sampleWeight == 1.0) {
            return load();
        }
        int own = outstanding;
        return Math.max(own, own + peerPart);
    }

    /** {@link #load()} plus {@code tokenWeight} per in-flight uncached prefill token: what kv_exact compares. */
    double cost(double tokenWeight) {
        double l = estimate();
        return tokenWeight == 0 ? l : l + tokenWeight * prefillTokens;
    }

    /** The peers' part of reading {@code r}: the engine's count less this gateway's in flight when it was taken. */
    private static long peerSample(EngineReading r) {
        return (long) r.runningTotal + r.waitingTotal - (r.baseRouted - r.baseCompleted);
    }

    /** The weight the current reading's sample has in the peers' part (1: in full; tests, explain). */
    double sampleWeight() {
        return sampleWeight;
    }

    /** This gateway's requests' mean time in flight here over the window, in ns, or -1 while unknown. */
    double lifetimeNs() {
        return lifeDone < MIN_LIFETIME_COMPLETIONS ? -1 : lifeBusyNs / lifeDone;
    }

    /**
     * This gateway's requests' mean time in flight here as the routing stage last measured it (when it took up a
     * reading), in seconds, or -1 while unknown (any thread; metrics: {@code kvgate_endpoint_lifetime_seconds}).
     */
    public double lifetimeSeconds() {
        double ns = publishedLifetimeNs;
        return ns < 0 ? -1 : ns / 1e9;
    }

    /** Advances the in-flight time-integral to {@code nowNs} (before {@link #outstanding} changes). */
    private void accrue(long nowNs) {
        if (busyStarted) {
            long dt = nowNs - busyAtNs;
            if (dt > 0) {
                busyNs += dt * outstanding;
                busyAtNs = nowNs;
            }
        } else {
            busyStarted = true;
            busyAtNs = nowNs;
        }
    }

    /**
     * Folds the in-flight time and the completions since the last fold into the lifetime's decayed sums (when a new
     * reading is taken up: a few times a second per endpoint).
     */
    private void foldLifetime(long nowNs) {
        accrue(nowNs);
        long done = completed.get();
        if (lifeStarted) {
            long dt = Math.max(0, nowNs - lifeAtNs);
            double keep = Math.exp(-(double) dt / PEER_MEAN_WINDOW_NS);
            lifeBusyNs = lifeBusyNs * keep + (busyNs - lifeBusyMark);
            lifeDone = lifeDone * keep + (done - lifeDoneMark);
        }
        lifeStarted = true;
        publishedLifetimeNs = lifetimeNs();
        lifeAtNs = nowNs;
        lifeBusyMark = busyNs;
        lifeDoneMark = done;
    }

    /** Takes reading {@code r}'s peers' sample into the peers' means (once per reading). */
    private void foldPeerSample(EngineReading r, long nowNs) {
        double keep = Double.isNaN(peerMean) ? 0 : Math.exp(-(double) Math.max(0, r.takenAtNs - peerMeanAtNs) / PEER_MEAN_WINDOW_NS);
        peerMean = peerMean(keep, Double.isNaN(peerMean) ? 0 : peerMean, peerSample(r));
        ranks.foldPeerSamples(r, keep);
        peerMeanAtNs = r.takenAtNs;
        peerFolded = r;
        foldLifetime(nowNs);
    }

    /**
     * An exponentially weighted mean of samples taken at scrape intervals: {@code keep} of the old mean (the first
     * sample: 0, it is the mean).
     */
    static double peerMean(double keep, double mean, long sample) {
        return keep * mean + (1 - keep) * sample;
    }

    /** The weight of a sample {@code ageNs} old: exp(-age / lifetime), 1 while the lifetime is unknown. */
    private double weightAt(long ageNs) {
        double life = lifetimeNs();
        if (life < 0 || ageNs <= 0) {
            return 1.0;
        }
        if (life == 0) {
            return 0.0;
        }
        return Math.exp(-ageNs / life);
    }

    /** This gateway's requests routed here since {@code r} was taken, minus the completions since then. */
    private long sinceReading(EngineReading r) {
        return (routed.get() - r.baseRouted) - (completed.get() - r.baseCompleted);
    }

    /** Where {@link #load()} comes from as of the routing stage's last batch (any thread). */
    public LoadSource loadSource() {
        return loadSource;
    }

    /** Uncached prompt tokens of this gateway's requests still in prefill here (charged by kv_exact rules; any thread). */
    public long prefillTokens() {
        return prefillTokens;
    }

    /** Requests routed here since start (never reset; any thread: the scraper's baseline). */
    public long routedTotal() {
        return routed.get();
    }

    /** Requests routed here that finished since start, any outcome (any thread: the scraper's baseline). */
    public long completedTotal() {
        return completed.get();
    }

    /**
     * A new engine reading (the load scraper: one writer). Null withdraws the last one (scraping turned off).
     * Taken up by the routing stage at its next batch.
     */
    public void publishReading(EngineReading r) {
        this.reading = r;
    }

    /** The last published reading, fresh or not (any thread: metrics, admin), or null. */
    public EngineReading lastReading() {
        return reading;
    }

    /** The reading the estimate uses now, or null (admission control's engine thresholds). */
    EngineReading freshReading() {
        return fresh;
    }

    /**
     * Takes up the last published reading if it is fresh: not older than {@code staleNs} and carrying the request
     * counts (at the start of every batch and duty cycle).
     */
    void refresh(long nowNs, long staleNs) {
        refresh(nowNs, staleNs, true);
    }

    /**
     * As {@link #refresh(long, long)}; {@code peerDecay} ({@code load.peer_decay: lifetime}) predicts the other
     * gateways' part from the reading's age (see the class comment), false counts the sample in full until stale.
     */
    void refresh(long nowNs, long staleNs, boolean peerDecay) {
        EngineReading r = reading;
        LoadSource src;
        if (r == null || !r.hasQueue()) {
            fresh = null;
            src = LoadSource.UNKNOWN;
        } else if (nowNs - r.takenAtNs > staleNs) {
            fresh = null;
            src = LoadSource.STALE;
        } else {
            fresh = r;
            src = LoadSource.ENGINE;
        }
        if (src != loadSource) {
            loadSource = src;
        }
        if (fresh == null || !peerDecay) {
            sampleWeight = 1.0;
            return;
        }
        if (r != peerFolded) {
            foldPeerSample(r, nowNs);
        }
        double w = weightAt(nowNs - r.takenAtNs);
        sampleWeight = w;
        peerPart = peerMean + (peerSample(r) - peerMean) * w;
    }

    /**
     * The two parts of the load estimate for explain output: {@code 5(engine=4 local=+1)} (engine running + waiting,
     * this gateway's requests since the scrape), {@code 2(engine=stale local=2)}, {@code 2(engine=unknown local=2)};
     * then {@code prefill_tokens=N} while requests are in prefill here.
     */
    void explain(StringBuilder out) {
        EngineReading r = fresh;
        out.append(load()).append("(engine=");
        if (r != null) {
            long since = sinceReading(r);
            out.append(r.runningTotal + r.waitingTotal).append(" local=").append(since >= 0 ? "+" : "").append(since);
            if (sampleWeight != 1.0) {
                // The peers' part as predicted: their sample at the scrape, their mean, the sample's weight by age.
                out.append(" peers=").append(peerSample(r)).append("->").append(Math.round(peerPart * 100) / 100.0)
                    .append(" mean=").append(Math.round(peerMean * 100) / 100.0).append(" weight=")
                    .append(Math.round(sampleWeight * 100) / 100.0);
            }
        } else {
            out.append(loadSource.label).append(" local=").append(outstanding);
        }
        long t = prefillTokens;
        if (t > 0) {
            out.append(" prefill_tokens=").append(t);
        }
        out.append(')');
    }

    /** A request was routed here with {@code uncachedTokens} of prefill charged to it. */
    void onRouted(long nowNs, int uncachedTokens) {
        accrue(nowNs);
        outstanding++;
        if (uncachedTokens > 0) {
            prefillTokens = prefillTokens + uncachedTokens;
        }
        routed.lazySet(routed.get() + 1);
    }

    /** {@code n} requests routed here finished since the last batch, any outcome. */
    void onCompleted(long n, long nowNs) {
        accrue(nowNs);
        outstanding = (int) Math.max(0, outstanding - n);
        completed.lazySet(completed.get() + n);
        if (outstanding == 0 && prefillTokens != 0) {
            // Nothing of this gateway is in flight here, so nothing is in prefill either: whatever a request failed to
            // hand back (a bug, or a charge still in a drain queue) cannot outlive the requests it belonged to.
            prefillTokens = 0;
        }
    }

    /** Requests routed here reported {@code tokens} of their charged prefill done. */
    void onPrefillDone(long tokens) {
        long t = prefillTokens - tokens;
        prefillTokens = Math.max(0, t);
    }
}
