package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One engine endpoint as the routing stage sees it: load, health and circuit breaker. Identity (the {@link #key()}
 * host:port) survives configuration swaps, so load and health carry over when rules change.
 *
 * <p>Breaker: CLOSED until {@code breaker_failure_threshold} consecutive {@link Outcome#FAILURE}s (engine 5xx,
 * transport failures, timeouts: what the upstream leg classifies; 4xx and abandoned requests never count); then OPEN
 * for {@code breaker_open_ms}; then one trial request (HALF_OPEN) whose outcome closes or re-opens it. A passing
 * active probe moves OPEN to HALF_OPEN early. Completions reach the routing stage as per-event-loop counts (see
 * {@link RouterPort}), so outcomes that finished between two routing batches are applied together: successes first,
 * then failures (a window with both leaves the failures counted).
 *
 * <p><b>Load estimate</b> ({@link #load()}): what every load-aware policy compares. With a fresh engine reading (the
 * scraper's last successful scrape of the engine's {@code /metrics}, not older than {@code load.stale_ms}) it is the
 * engine's running + waiting requests, plus the requests this gateway routed here since that scrape was sent, minus
 * the requests of this gateway that finished here since then, and never less than this gateway's own in-flight
 * count. So other gateways' traffic is visible (it is in the engine's numbers) and a burst this gateway
 * just sent is not invisible until the next scrape. Without a fresh reading (no {@code /metrics}, a failed or slow
 * scrape, scraping off) it is this gateway's in-flight count, as before, flagged {@link LoadSource#STALE} or
 * {@link LoadSource#UNKNOWN}. On top of it, kv_exact rules add {@code kv.prefill_token_weight} times the uncached
 * prompt tokens of this gateway's requests still in prefill here ({@link #prefillTokens()}).
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
 * burst still shows: in full right after each scrape, and in the mean within the window.
 *
 * <p>Threading: the mutable fields are written only by the routing stage (single writer), including configuration
 * changes, which the stage applies when it swaps tables; the health checker reports probe verdicts through
 * {@link #reportProbe} (one volatile write), which the stage applies at its next batch; the load scraper publishes
 * engine readings through {@link #publishReading} (one volatile write), which the stage takes up at its next batch.
 * Other threads (metrics, admin) read through volatile fields and may see a value a few requests old.
 */
public final class EndpointState {
    public enum Breaker { CLOSED, OPEN, HALF_OPEN }

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

    private final String key;
    private final int id;
    /** Rendezvous-hash input of session affinity ({@link Rendezvous#seed}): from the key alone, equal in every replica. */
    private final long affinitySeed;
    private volatile EndpointConfig config;
    private volatile String hostHeader;

    // Routing-stage owned (volatile only for readers on other threads).
    private volatile int outstanding;
    private volatile boolean probeHealthy = true;
    private volatile Breaker breaker = Breaker.CLOSED;
    /** Set by an operator (control socket): no new requests; requests in flight finish. Survives reloads. */
    private volatile boolean drained;
    private int consecutiveFailures;
    private long openUntilNs;
    private boolean halfOpenTrialInFlight;
    private int probeReportsSeen;
    /** Smooth weighted round robin's running weight (routing stage only). */
    long currentWeight;

    // Written by the health checker (one thread), read by the routing stage.
    private volatile boolean probeVerdict = true;
    private volatile int probeReports;
    /** llama.cpp: the server's slot count as its {@code GET /slots} reported it, 0 while unknown. */
    private volatile int engineSlots;
    /**
     * The engine's context length in tokens as the model probe last read it ({@code GET /v1/models}
     * {@code max_model_len}, SGLang's {@code /get_server_info}, llama.cpp's {@code /props}), 0 while unknown. Written
     * by the probe thread only; read per request by the I/O threads ({@link Rule#contextLength}).
     */
    private volatile int engineContextLen;
    /**
     * The completion routes the engine is known not to mount ({@link #ROUTE_CHAT}, {@link #ROUTE_COMPLETIONS} bits), as
     * the model probe last read them (vLLM's route table, {@code GET /openapi.json}; SGLang's {@code is_embedding} in
     * {@code /get_server_info}); 0 while unknown or when it serves both. Written by the probe thread, read per request
     * by the I/O threads ({@link Rule#endpointsServing}).
     */
    private volatile int unmountedRoutes;
    /** Where {@link #unmountedRoutes} was read ("GET /openapi.json", ...), null while unknown. */
    private volatile String routesSource;
    /**
     * The tool-call parser the engine says it runs (SGLang's {@code tool_call_parser} server argument): a name, ""
     * for none, null while unknown (vLLM does not publish it).
     */
    private volatile String statedToolCallParser;
    public static final int ROUTE_CHAT = 1;
    public static final int ROUTE_COMPLETIONS = 2;

    // Written by the load scraper (one thread), taken up by the routing stage at its next batch.
    private volatile EngineReading reading;
    // Routing-stage owned: the reading in use (null when none is fresh) and where the estimate comes from.
    private EngineReading fresh;
    private volatile LoadSource loadSource = LoadSource.UNKNOWN;
    // Routing-stage owned: the other gateways' part of the estimate (see the class comment).
    /** Window of the peers' mean and of the lifetime estimate: 8 scrapes at the default 250 ms. */
    static final long PEER_MEAN_WINDOW_NS = 2_000_000_000L;
    /** Completions of this gateway's requests (decayed over the window) below which the lifetime is unknown. */
    static final double MIN_LIFETIME_COMPLETIONS = 4.0;
    /** The reading whose sample is folded into {@link #peerMean} (the routing stage takes each one up once). */
    private EngineReading peerFolded;
    /** The peers' mean here (NaN before the first reading) and when it was last updated. */
    private double peerMean = Double.NaN;
    private long peerMeanAtNs;
    /** Per DP rank: the peers' mean of the pinned estimate ({@link #rankLoad}). */
    private final double[] rankPeerMean = new double[EngineReading.MAX_RANKS];
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

    /** Uncached prompt tokens of requests routed here and still in prefill (kv_exact charges, see RouterPort). */
    private volatile long prefillTokens;

    // Counters, any thread.
    /** Requests routed here (routing stage, release stores); the scraper reads it as a reading's baseline. */
    public final AtomicLong routed = new AtomicLong();
    /** Requests routed here that finished, any outcome (routing stage, release stores); a reading's baseline too. */
    private final AtomicLong completed = new AtomicLong();

    // Per DP rank, for requests pinned to a rank (kv_exact with kv.dp_rank_hint): routing stage writes.
    private static final int RANKS = EngineReading.MAX_RANKS;
    private final int[] rankOutstanding = new int[RANKS];
    private final long[] rankPrefill = new long[RANKS];
    /** Pinned requests routed to / finished on each rank (release stores; the scraper reads them as baselines). */
    private final java.util.concurrent.atomic.AtomicLongArray rankRouted = new java.util.concurrent.atomic.AtomicLongArray(RANKS);
    private final java.util.concurrent.atomic.AtomicLongArray rankCompleted = new java.util.concurrent.atomic.AtomicLongArray(RANKS);
    public final AtomicLong failures = new AtomicLong();
    public final AtomicLong breakerOpens = new AtomicLong();

    public EndpointState(String key, int id, EndpointConfig config) {
        this.key = key;
        this.id = id;
        this.affinitySeed = Rendezvous.seed(key);
        this.config = config;
        this.hostHeader = config.host() + ":" + config.port();
    }

    public String key() {
        return key;
    }

    long affinitySeed() {
        return affinitySeed;
    }

    /** Dense id used by the block index and per-endpoint arrays. */
    public int id() {
        return id;
    }

    public EndpointConfig config() {
        return config;
    }

    /** The {@code Host} header engines get, built once. */
    public String hostHeader() {
        return hostHeader;
    }

    /** Routing stage only (applied with the table that names it). */
    void config(EndpointConfig c) {
        if (c.equals(config)) {
            return;
        }
        this.config = c;
        this.hostHeader = c.host() + ":" + c.port();
    }

    /** Requests in flight as of the routing stage's last batch. */
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
    double loadEstimate() {
        EngineReading r = fresh;
        if (r == null || sampleWeight == 1.0) {
            return load();
        }
        int own = outstanding;
        return Math.max(own, own + peerPart);
    }

    /** The peers' part of reading {@code r}: the engine's count less this gateway's in flight when it was taken. */
    private static long peerSample(EngineReading r) {
        return (long) r.runningTotal + r.waitingTotal - (r.baseRouted - r.baseCompleted);
    }

    /** The peers' part of one rank in reading {@code r} (as {@link #peerSample}), or 0 when the rank is unknown. */
    private static long rankPeerSample(EngineReading r, int rank) {
        return (long) Math.max(0, r.running(rank)) + Math.max(0, r.waiting(rank))
            - (r.baseRankRouted(rank) - r.baseRankCompleted(rank));
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
     * reading), in seconds, or -1 while unknown (metrics: {@code kvgate_endpoint_lifetime_seconds}).
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
     * Folds the in-flight time and the completions since the last fold into the lifetime's decayed sums (routing
     * stage, when a new reading is taken up: a few times a second per endpoint).
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
        for (int k = 0; k < r.ranks; k++) {
            rankPeerMean[k] = peerMean(keep, rankPeerMean[k], rankPeerSample(r, k));
        }
        peerMeanAtNs = r.takenAtNs;
        peerFolded = r;
        foldLifetime(nowNs);
    }

    /**
     * An exponentially weighted mean of samples taken at scrape intervals: {@code keep} of the old mean (the first
     * sample: 0, it is the mean).
     */
    private static double peerMean(double keep, double mean, long sample) {
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

    /** Where {@link #load()} comes from as of the routing stage's last batch. */
    public LoadSource loadSource() {
        return loadSource;
    }

    /** Uncached prompt tokens of this gateway's requests still in prefill here (charged by kv_exact rules). */
    public long prefillTokens() {
        return prefillTokens;
    }

    /** {@link #load()} plus {@code tokenWeight} per in-flight uncached prefill token: what kv_exact compares. */
    double cost(double tokenWeight) {
        double l = loadEstimate();
        return tokenWeight == 0 ? l : l + tokenWeight * prefillTokens;
    }

    /** The DP ranks this endpoint schedules on ({@code dp_ranks}, 1..8). */
    public int ranks() {
        return Math.max(1, Math.min(RANKS, config.dpRanks()));
    }

    /**
     * The load estimate of one DP rank (kv_exact with rank hints scores each rank): the engine's running + waiting on
     * that rank from a fresh reading, plus the requests this gateway pinned to it since the scrape minus those of
     * them that finished, never below the pinned requests in flight there; without a fresh reading of the rank, the
     * pinned requests in flight. Requests the engine placed itself (no hint) count in the engine's numbers only.
     */
    int rankLoad(int rank) {
        EngineReading r = fresh;
        int own = rankOutstanding[rank];
        if (r == null) {
            return own;
        }
        int running = r.running(rank);
        int waiting = r.waiting(rank);
        if (running < 0 && waiting < 0) {
            return own;
        }
        if (sampleWeight != 1.0) {
            return (int) Math.max(own, Math.min(Integer.MAX_VALUE, Math.round(rankEstimate(rank, r))));
        }
        long since = (rankRouted.get(rank) - r.baseRankRouted(rank)) - (rankCompleted.get(rank) - r.baseRankCompleted(rank));
        long est = (long) Math.max(0, running) + Math.max(0, waiting) + since;
        return (int) Math.max(own, Math.min(Integer.MAX_VALUE, est));
    }

    /**
     * One rank's estimate with the peers' part predicted as for the endpoint ({@link #loadEstimate}): this gateway's
     * pinned requests in flight now (routed - finished, cumulative) plus the rank's peers' mean and aged sample.
     */
    private double rankEstimate(int rank, EngineReading r) {
        double peers = rankPeerMean[rank] + (rankPeerSample(r, rank) - rankPeerMean[rank]) * sampleWeight;
        long ownNow = rankRouted.get(rank) - rankCompleted.get(rank);
        return Math.max(rankOutstanding[rank], ownNow + peers);
    }

    /** {@link #rankLoad} plus {@code tokenWeight} per uncached prefill token pinned to the rank. */
    double rankCost(int rank, double tokenWeight) {
        double l = rankLoad(rank);
        EngineReading r = fresh;
        if (r != null && sampleWeight != 1.0 && (r.running(rank) >= 0 || r.waiting(rank) >= 0)) {
            l = rankEstimate(rank, r);
        }
        return tokenWeight == 0 ? l : l + tokenWeight * rankPrefill[rank];
    }

    /** Pinned requests in flight on {@code rank} (tests, metrics: may be a few decisions old elsewhere). */
    public int rankOutstanding(int rank) {
        return rankOutstanding[rank];
    }

    /** Pinned requests routed to {@code rank} since start (the scraper's baseline). */
    public long rankRoutedTotal(int rank) {
        return rankRouted.get(rank);
    }

    /** Pinned requests that finished on {@code rank} since start (the scraper's baseline). */
    public long rankCompletedTotal(int rank) {
        return rankCompleted.get(rank);
    }

    /** The two parts of one rank's estimate, as {@link #explainLoad} does for the endpoint. */
    void explainRankLoad(int rank, StringBuilder out) {
        EngineReading r = fresh;
        out.append(rankLoad(rank)).append("(engine=");
        if (r != null && (r.running(rank) >= 0 || r.waiting(rank) >= 0)) {
            long since = (rankRouted.get(rank) - r.baseRankRouted(rank)) - (rankCompleted.get(rank) - r.baseRankCompleted(rank));
            out.append(Math.max(0, r.running(rank)) + Math.max(0, r.waiting(rank))).append(" local=")
                .append(since >= 0 ? "+" : "").append(since);
        } else {
            out.append(r == null ? loadSource.label : "unknown").append(" local=").append(rankOutstanding[rank]);
        }
        long t = rankPrefill[rank];
        if (t > 0) {
            out.append(" prefill_tokens=").append(t);
        }
        out.append(')');
    }

    /** Requests routed here since start (never reset; the scraper's baseline). */
    public long routedTotal() {
        return routed.get();
    }

    /** Requests routed here that finished since start, any outcome (the scraper's baseline). */
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

    /** The last published reading, fresh or not (metrics, admin), or null. */
    public EngineReading lastReading() {
        return reading;
    }

    /** The reading the estimate uses now, or null (routing stage: admission control's engine thresholds). */
    EngineReading freshReading() {
        return fresh;
    }

    /**
     * Takes up the last published reading if it is fresh: not older than {@code staleNs} and carrying the request
     * counts (routing stage, at the start of every batch and duty cycle).
     */
    void refreshLoad(long nowNs, long staleNs) {
        refreshLoad(nowNs, staleNs, true);
    }

    /**
     * As {@link #refreshLoad(long, long)}; {@code peerDecay} ({@code load.peer_decay: lifetime}) predicts the other
     * gateways' part from the reading's age (see the class comment), false counts the sample in full until stale.
     */
    void refreshLoad(long nowNs, long staleNs, boolean peerDecay) {
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
    void explainLoad(StringBuilder out) {
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

    /** The engine's own slot count (llama.cpp, read by the health checker), 0 while unknown. */
    public int engineSlots() {
        return engineSlots;
    }

    public void engineSlots(int slots) {
        this.engineSlots = slots;
    }

    /** The engine's context length as discovered, 0 while unknown. */
    public int engineContextLen() {
        return engineContextLen;
    }

    public void engineContextLen(int tokens) {
        this.engineContextLen = tokens;
    }

    /** {@link #ROUTE_CHAT} / {@link #ROUTE_COMPLETIONS} bits of the routes the engine does not mount (0: none known). */
    public int unmountedRoutes() {
        return unmountedRoutes;
    }

    /** Where the engine's route table was read, null while it is unknown (every route is assumed mounted). */
    public String routesSource() {
        return routesSource;
    }

    /** The model probe's reading of the engine's routes ({@code source} null: unknown, nothing excluded). */
    public void routes(int unmounted, String source) {
        this.routesSource = source;
        this.unmountedRoutes = unmounted;
    }

    /** The engine's own tool-call parser: a name, "" for none, null while unknown. */
    public String statedToolCallParser() {
        return statedToolCallParser;
    }

    /** Model probe: what the engine's server info said ({@code null}: it does not say). */
    public void statedToolCallParser(String parser) {
        this.statedToolCallParser = parser;
    }

    /** The bit of {@link #unmountedRoutes} for the chat or the text completions route. */
    public static int routeBit(boolean chat) {
        return chat ? ROUTE_CHAT : ROUTE_COMPLETIONS;
    }

    public boolean probeHealthy() {
        return probeHealthy;
    }

    public Breaker breaker() {
        return breaker;
    }

    public boolean drained() {
        return drained;
    }

    /** Operator drain: policies skip this endpoint for new requests until {@code drained(false)}. */
    public void drained(boolean on) {
        this.drained = on;
    }

    /** Whether a new request may go here now (routing stage only). */
    boolean available(long nowNs) {
        if (!probeHealthy || drained) {
            return false;
        }
        return switch (breaker) {
            case CLOSED -> true;
            case OPEN -> nowNs - openUntilNs >= 0 && !halfOpenTrialInFlight;
            case HALF_OPEN -> !halfOpenTrialInFlight;
        };
    }

    /** A request was routed here (routing stage only). */
    void onRouted(long nowNs) {
        onRouted(nowNs, 0);
    }

    /** A request was routed here with {@code uncachedTokens} of prefill charged to it (routing stage only). */
    void onRouted(long nowNs, int uncachedTokens) {
        onRouted(nowNs, uncachedTokens, -1);
    }

    /**
     * A request was routed here, pinned to DP rank {@code rank} (-1: the engine places it), with
     * {@code uncachedTokens} of prefill charged to it (routing stage only).
     */
    void onRouted(long nowNs, int uncachedTokens, int rank) {
        accrue(nowNs);
        outstanding++;
        if (uncachedTokens > 0) {
            prefillTokens = prefillTokens + uncachedTokens;
        }
        if (rank >= 0 && rank < RANKS) {
            rankOutstanding[rank]++;
            rankRouted.lazySet(rank, rankRouted.get(rank) + 1);
            if (uncachedTokens > 0) {
                rankPrefill[rank] += uncachedTokens;
            }
        }
        routed.lazySet(routed.get() + 1);
        if (breaker == Breaker.OPEN && nowNs - openUntilNs >= 0) {
            breaker = Breaker.HALF_OPEN;
        }
        if (breaker == Breaker.HALF_OPEN) {
            halfOpenTrialInFlight = true;
        }
    }

    /**
     * Requests routed here finished since the last batch (routing stage only): {@code succeeded} + {@code failed} +
     * {@code released} of them.
     */
    void onCompleted(long succeeded, long failed, long released, int failureThreshold, long openNs, long nowNs) {
        accrue(nowNs);
        outstanding = (int) Math.max(0, outstanding - succeeded - failed - released);
        completed.lazySet(completed.get() + succeeded + failed + released);
        if (outstanding == 0 && prefillTokens != 0) {
            // Nothing of this gateway is in flight here, so nothing is in prefill either: whatever a request failed to
            // hand back (a bug, or a charge still in a drain queue) cannot outlive the requests it belonged to.
            prefillTokens = 0;
        }
        if (failed > 0) {
            failures.lazySet(failures.get() + failed);
        }
        switch (breaker) {
            case CLOSED -> {
                if (succeeded > 0) {
                    consecutiveFailures = 0;
                }
                consecutiveFailures = (int) Math.min(Integer.MAX_VALUE, consecutiveFailures + failed);
                if (consecutiveFailures >= failureThreshold) {
                    open(openNs, nowNs);
                }
            }
            case HALF_OPEN -> {
                if (failed > 0) {
                    open(openNs, nowNs);
                } else if (succeeded > 0) {
                    breaker = Breaker.CLOSED;
                    consecutiveFailures = 0;
                    halfOpenTrialInFlight = false;
                } else if (released > 0) {
                    halfOpenTrialInFlight = false; // the trial said nothing: let the next request try
                }
            }
            case OPEN -> {
                // Requests routed before the breaker opened: their outcomes change nothing; the trial decides.
            }
        }
    }

    /** {@code n} requests pinned to {@code rank} finished (routing stage only; their endpoint completion comes too). */
    void onRankCompleted(int rank, long n) {
        rankOutstanding[rank] = (int) Math.max(0, rankOutstanding[rank] - n);
        rankCompleted.lazySet(rank, rankCompleted.get(rank) + n);
        if (rankOutstanding[rank] == 0) {
            rankPrefill[rank] = 0; // as for the endpoint: no pinned request in flight, nothing in prefill
        }
    }

    /** Requests pinned to {@code rank} reported {@code tokens} of their charged prefill done (routing stage only). */
    void onRankPrefillDone(int rank, long tokens) {
        rankPrefill[rank] = Math.max(0, rankPrefill[rank] - tokens);
    }

    /** Requests routed here reported {@code tokens} of their charged prefill done (routing stage only). */
    void onPrefillDone(long tokens) {
        long t = prefillTokens - tokens;
        prefillTokens = Math.max(0, t);
    }

    private void open(long openNs, long nowNs) {
        breakerOpens.lazySet(breakerOpens.get() + 1);
        breaker = Breaker.OPEN;
        openUntilNs = nowNs + openNs;
        halfOpenTrialInFlight = false;
        consecutiveFailures = 0;
    }

    /** An active probe's verdict (health checker thread: one writer). Applied by the routing stage at its next batch. */
    public void reportProbe(boolean healthy) {
        probeVerdict = healthy;
        probeReports = probeReports + 1;
    }

    /** Applies a probe verdict reported since the last call (routing stage only). */
    void applyProbeReport() {
        int reports = probeReports;
        if (reports == probeReportsSeen) {
            return;
        }
        probeReportsSeen = reports;
        boolean healthy = probeVerdict;
        probeHealthy = healthy;
        if (healthy && breaker == Breaker.OPEN) {
            // A passing probe lets one trial request through rather than waiting for the full open period.
            breaker = Breaker.HALF_OPEN;
            halfOpenTrialInFlight = false;
        }
    }

    @Override
    public String toString() {
        return key;
    }
}
