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
 * <p>Threading: the mutable fields are written only by the routing stage (single writer), including configuration
 * changes, which the stage applies when it swaps tables; the health checker reports probe verdicts through
 * {@link #reportProbe} (one volatile write), which the stage applies at its next batch. Other threads (metrics, admin)
 * read through volatile fields and may see a value a few requests old.
 */
public final class EndpointState {
    public enum Breaker { CLOSED, OPEN, HALF_OPEN }

    private final String key;
    private final int id;
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

    /** The engine's own slot count (llama.cpp, read by the health checker), 0 while unknown. */
    public int engineSlots() {
        return engineSlots;
    }

    public void engineSlots(int slots) {
        this.engineSlots = slots;
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
        outstanding++;
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
        outstanding = (int) Math.max(0, outstanding - succeeded - failed - released);
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
