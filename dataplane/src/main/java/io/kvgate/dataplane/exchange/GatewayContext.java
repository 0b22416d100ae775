package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.quality.PromptLedger;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.trace.Tracing;
import io.kvgate.dataplane.upstream.UpstreamConnector;
import io.kvgate.dataplane.upstream.UpstreamPool;
import io.netty.channel.EventLoop;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * What every request handler needs, wired once at start-up. Thread-safe components only.
 *
 * <p>{@link #config()} is the configuration applied <em>now</em>: it is read through the gateway's single owner of
 * the applied configuration, so a reload reaches the next request (API keys, limits, timeouts...). Read it once per
 * decision rather than keeping it: a kept copy goes stale at the next reload.
 */
public final class GatewayContext {
    private final Supplier<GatewayConfig> config;
    private final RoutingStage router;
    private final UpstreamPool pool;
    private final GatewayMetrics metrics;
    private final NanoClock clock;
    private final UpstreamConnector connector;
    private final LiveExchanges live;
    private final Function<EventLoop, ExchangeRouting> routing;
    /** Tenants' usage against their limits and the tenant metrics (gateway-wide: survives reloads). */
    private final io.kvgate.dataplane.tenant.Tenants tenants;
    /** Set once at start-up, before the listener binds (so before any I/O thread reads it). */
    private Tracing tracing = Tracing.OFF;
    /** Set once at start-up, before the listener accepts ({@link #accessLog(AccessLog)}). */
    private volatile AccessLog accessLog = AccessLog.OFF;
    private volatile PromptLedger quality = new PromptLedger();
    /** Per rule, the hedge legs' extra prefill against {@code hedge.max_extra_ratio} (gateway-wide: survives reloads). */
    private final HedgeBudgets hedgeBudgets = new HedgeBudgets();

    public GatewayContext(Supplier<GatewayConfig> config, RoutingStage router, UpstreamPool pool, GatewayMetrics metrics,
                          NanoClock clock) {
        this(config, router, pool, metrics, clock, pool, new LiveExchanges(), ExchangeRouting.ports(router));
    }

    /**
     * @param connector where legs get engine connections (the pool; embedded channels in tests)
     * @param live      the exchanges in progress, ended at the drain deadline
     * @param routing   an event loop's way to the routing stage (its {@code RouterPort}; scripted in tests)
     */
    public GatewayContext(Supplier<GatewayConfig> config, RoutingStage router, UpstreamPool pool, GatewayMetrics metrics,
                          NanoClock clock, UpstreamConnector connector, LiveExchanges live,
                          Function<EventLoop, ExchangeRouting> routing) {
        this.config = config;
        this.router = router;
        this.pool = pool;
        this.metrics = metrics;
        this.clock = clock;
        this.connector = connector;
        this.live = live;
        this.routing = routing;
        this.tenants = new io.kvgate.dataplane.tenant.Tenants(clock);
    }

    public HedgeBudgets hedgeBudgets() {
        return hedgeBudgets;
    }

    /** A context over a fixed configuration (tests and tools that never reload). */
    public GatewayContext(GatewayConfig config, RoutingStage router, UpstreamPool pool, GatewayMetrics metrics,
                          NanoClock clock) {
        this(() -> config, router, pool, metrics, clock);
    }

    /** The configuration applied now. */
    public GatewayConfig config() {
        return config.get();
    }

    /**
     * The configuration as the supplier it is read through, for a per-request object that reads it later
     * ({@link io.kvgate.dataplane.relay.Relay}): the one instance, where {@code gw::config} would allocate a method
     * reference per request.
     */
    public Supplier<GatewayConfig> configSupplier() {
        return config;
    }

    public RoutingStage router() {
        return router;
    }

    public UpstreamPool pool() {
        return pool;
    }

    public GatewayMetrics metrics() {
        return metrics;
    }

    public NanoClock clock() {
        return clock;
    }

    public UpstreamConnector connector() {
        return connector;
    }

    public LiveExchanges live() {
        return live;
    }

    /** The gateway's tracer ({@link Tracing#OFF} unless {@code tracing} samples requests). */
    public Tracing tracing() {
        return tracing;
    }

    /** Installs the tracer; at start-up only, before any request. */
    public GatewayContext tracing(Tracing t) {
        this.tracing = t;
        return this;
    }

    /** Where a request's end writes its access-log line ({@code logging.access_log}; off by default). */
    public AccessLog accessLog() {
        return accessLog;
    }

    /** Sets the access log, at start-up. */
    public GatewayContext accessLog(AccessLog log) {
        this.accessLog = log;
        return this;
    }

    /**
     * Routing-quality accounting (reachable / predicted / observed prompt tokens per rule): the gateway's, registered
     * in its metrics; a context built without one (tests) accounts into a ledger nobody reads.
     */
    public PromptLedger quality() {
        return quality;
    }

    /** Sets the routing-quality ledger, at start-up. */
    public GatewayContext quality(PromptLedger ledger) {
        this.quality = ledger;
        return this;
    }

    /** The tenants' limits and counters (who a key names is the applied configuration's: {@link #config()}). */
    public io.kvgate.dataplane.tenant.Tenants tenants() {
        return tenants;
    }

    /** The routing stage as seen from {@code loop}: decisions for requests published here come back on it. */
    public ExchangeRouting routing(EventLoop loop) {
        return routing.apply(loop);
    }
}
