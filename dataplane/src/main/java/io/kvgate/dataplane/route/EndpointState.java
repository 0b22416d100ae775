package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;

/**
 * One engine endpoint as the routing stage sees it. Identity (the {@link #key()} host:port) survives configuration
 * swaps, so load and health carry over when rules change. The state is split by writer, each part with its own
 * threading contract, held here as final fields so a decision pays one field load per part:
 * <ul>
 *   <li>{@link Breaker}: the active probe's verdict and the circuit breaker;</li>
 *   <li>{@link LoadEstimate}: this gateway's in-flight count, the engine's readings, the other gateways' part;</li>
 *   <li>{@link RankLoad}: the same per data-parallel rank;</li>
 *   <li>{@link TtftEstimate}: the recent time to first token measured here, and its weight on the load;</li>
 *   <li>{@link EngineFacts}: what the probes learnt about the engine (the router never reads it).</li>
 * </ul>
 *
 * <p>Threading: single writer, the routing stage (configuration changes are applied when it swaps tables, an
 * operator's drain when its ring command comes up: {@link RoutingStage#drain}); other threads read through volatile
 * fields and may see a value a few requests old.
 */
public final class EndpointState {
    private final String key;
    private final int id;
    /** Rendezvous-hash input of session affinity ({@link Rendezvous#seed}): from the key alone, equal in every replica. */
    private final long affinitySeed;
    private volatile EndpointConfig config;
    private volatile String hostHeader;
    /** Set by an operator through the routing stage: no new requests; requests in flight finish. Survives reloads. */
    private volatile boolean drained;
    /** Smooth weighted round robin's running weight (routing stage only). */
    long currentWeight;

    private final Breaker breaker = new Breaker();
    private final LoadEstimate load = new LoadEstimate();
    private final RankLoad rankLoad = load.ranks;
    private final EngineFacts facts = new EngineFacts();
    private final TtftEstimate ttft = new TtftEstimate();

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

    public Breaker breaker() {
        return breaker;
    }

    public LoadEstimate loadEstimate() {
        return load;
    }

    public RankLoad rankLoad() {
        return rankLoad;
    }

    public EngineFacts facts() {
        return facts;
    }

    public TtftEstimate ttft() {
        return ttft;
    }

    /** Requests in flight as of the routing stage's last batch. */
    public int outstanding() {
        return load.outstanding();
    }

    /** The load estimate the policies compare ({@link LoadEstimate#load}). */
    public int load() {
        return load.load();
    }

    /** {@link #load()} plus {@code tokenWeight} per in-flight uncached prefill token: what kv_exact compares. */
    double cost(double tokenWeight) {
        return load.cost(tokenWeight);
    }

    /** The DP ranks this endpoint schedules on ({@code dp_ranks}, 1..8). */
    public int ranks() {
        return Math.max(1, Math.min(RankLoad.RANKS, config.dpRanks()));
    }

    public boolean probeHealthy() {
        return breaker.probeHealthy();
    }

    public boolean drained() {
        return drained;
    }

    /** Operator drain (routing stage only, from its ring command): policies skip this endpoint for new requests. */
    void drained(boolean on) {
        this.drained = on;
    }

    /** Whether a new request may go here now (routing stage only). */
    boolean available(long nowNs) {
        return !drained && breaker.allows(nowNs);
    }

    /** A request was routed here (routing stage only). */
    void onRouted(long nowNs) {
        onRouted(nowNs, 0, -1);
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
        load.onRouted(nowNs, uncachedTokens);
        if (rank >= 0 && rank < RankLoad.RANKS) {
            rankLoad.onRouted(rank, uncachedTokens);
        }
        breaker.onRouted(nowNs);
    }

    /**
     * Requests routed here finished since the last batch (routing stage only): {@code succeeded} + {@code failed} +
     * {@code released} of them.
     */
    void onCompleted(long succeeded, long failed, long released, int failureThreshold, long openNs, long nowNs) {
        load.onCompleted(succeeded + failed + released, nowNs);
        breaker.onCompleted(succeeded, failed, released, failureThreshold, openNs, nowNs);
    }

    /** An active probe's verdict (health checker thread: one writer). Applied by the routing stage at its next batch. */
    public void reportProbe(boolean healthy) {
        breaker.reportProbe(healthy);
    }

    @Override
    public String toString() {
        return key;
    }
}
