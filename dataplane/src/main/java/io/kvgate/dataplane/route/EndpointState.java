package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One engine endpoint as the routing stage sees it: load, health and circuit breaker. Identity (the {@link #key()}
 * host:port) survives configuration swaps, so load and health carry over when rules change.
 *
 * <p>Threading: mutable fields are written only by the routing stage (single writer); other threads (metrics, admin,
 * explain) read them through volatile/opaque reads and may see a value a few requests old.
 */
public final class EndpointState {
    public enum Breaker { CLOSED, OPEN, HALF_OPEN }

    private final String key;
    private final int id;
    private volatile EndpointConfig config;
    private volatile String hostHeader;

    // Routing-stage owned.
    private volatile int outstanding;
    private volatile boolean probeHealthy = true;
    private volatile Breaker breaker = Breaker.CLOSED;
    /** Set by an operator (control socket): no new requests; requests in flight finish. Survives reloads. */
    private volatile boolean drained;
    private int consecutiveFailures;
    private long openUntilNs;
    private boolean halfOpenTrialInFlight;
    /** Smooth weighted round robin's running weight (routing stage only). */
    long currentWeight;

    // Counters, any thread.
    public final AtomicLong routed = new AtomicLong();
    public final AtomicLong failures = new AtomicLong();
    public final AtomicLong breakerOpens = new AtomicLong();

    public EndpointState(String key, int id, EndpointConfig config) {
        this.key = key;
        this.id = id;
        this.config = config;
        this.hostHeader = config.host() + ":" + config.port();
    }

    public String key() {
        return key;
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

    void config(EndpointConfig c) {
        this.config = c;
        this.hostHeader = c.host() + ":" + c.port();
    }

    public int outstanding() {
        return outstanding;
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

    /** Whether a new request may go here now (routing stage only: it may move OPEN to HALF_OPEN). */
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
        outstanding++;
        routed.lazySet(routed.get() + 1);
        if (breaker == Breaker.OPEN && nowNs - openUntilNs >= 0) {
            breaker = Breaker.HALF_OPEN;
        }
        if (breaker == Breaker.HALF_OPEN) {
            halfOpenTrialInFlight = true;
        }
    }

    /** A request routed here finished (routing stage only). */
    void onCompleted(boolean success, int failureThreshold, long openNs, long nowNs) {
        if (outstanding > 0) {
            outstanding--;
        }
        halfOpenTrialInFlight = false;
        if (success) {
            consecutiveFailures = 0;
            breaker = Breaker.CLOSED;
            return;
        }
        failures.incrementAndGet();
        consecutiveFailures++;
        if (breaker == Breaker.HALF_OPEN || consecutiveFailures >= failureThreshold) {
            if (breaker != Breaker.OPEN) {
                breakerOpens.incrementAndGet();
            }
            breaker = Breaker.OPEN;
            openUntilNs = nowNs + openNs;
        }
    }

    /** An active probe's verdict (routing stage only). */
    void onProbe(boolean healthy) {
        this.probeHealthy = healthy;
        if (healthy && breaker == Breaker.OPEN) {
            // A passing probe lets one trial request through rather than waiting for the full open period.
            breaker = Breaker.HALF_OPEN;
        }
    }

    @Override
    public String toString() {
        return key;
    }
}
