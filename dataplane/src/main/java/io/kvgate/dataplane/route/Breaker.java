package io.kvgate.dataplane.route;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One endpoint's health gate: the active probe's verdict and the circuit breaker.
 *
 * <p>CLOSED until {@code breaker_failure_threshold} consecutive {@link Outcome#FAILURE}s (engine 5xx, transport
 * failures, timeouts: what the upstream leg classifies; 4xx and abandoned requests never count); then OPEN for
 * {@code breaker_open_ms}; then one trial request (HALF_OPEN) whose outcome closes or re-opens it. A passing active
 * probe moves OPEN to HALF_OPEN early. Completions reach the routing stage as per-event-loop counts (see
 * {@link RouterPort}), so outcomes that finished between two routing batches are applied together: successes first,
 * then failures (a window with both leaves the failures counted).
 *
 * <p>Threading: single writer, the routing stage; the health checker only posts verdicts through {@link #reportProbe}
 * (a one-slot mailbox the stage applies at its next batch); other threads read the volatile state and counters.
 */
public final class Breaker {
    public enum State { CLOSED, OPEN, HALF_OPEN }

    private volatile State state = State.CLOSED;
    private volatile boolean probeHealthy = true;
    private int consecutiveFailures;
    private long openUntilNs;
    private boolean halfOpenTrialInFlight;

    // Mailbox: the health checker writes (one thread), the routing stage reads.
    private volatile boolean probeVerdict = true;
    private volatile int probeReports;
    private int probeReportsSeen;

    /** Requests that failed here (routing stage, release stores; metrics and admin read it). */
    private final AtomicLong failures = new AtomicLong();
    /** Times the breaker opened (routing stage, release stores). */
    private final AtomicLong opens = new AtomicLong();

    public State state() {
        return state;
    }

    /** The last active probe's verdict as the routing stage applied it (true until a probe says otherwise). */
    public boolean probeHealthy() {
        return probeHealthy;
    }

    public long failures() {
        return failures.get();
    }

    public long opens() {
        return opens.get();
    }

    /** Whether the probe and the breaker let a new request through now (routing stage only). */
    boolean allows(long nowNs) {
        if (!probeHealthy) {
            return false;
        }
        return switch (state) {
            case CLOSED -> true;
            case OPEN -> nowNs - openUntilNs >= 0 && !halfOpenTrialInFlight;
            case HALF_OPEN -> !halfOpenTrialInFlight;
        };
    }

    /** A request was routed here (routing stage only): past the open period it is the half-open trial. */
    void onRouted(long nowNs) {
        if (state == State.OPEN && nowNs - openUntilNs >= 0) {
            state = State.HALF_OPEN;
        }
        if (state == State.HALF_OPEN) {
            halfOpenTrialInFlight = true;
        }
    }

    /** Outcomes of requests that finished since the last batch (routing stage only). */
    void onCompleted(long succeeded, long failed, long released, int failureThreshold, long openNs, long nowNs) {
        if (failed > 0) {
            failures.lazySet(failures.get() + failed);
        }
        switch (state) {
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
                    state = State.CLOSED;
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
        opens.lazySet(opens.get() + 1);
        state = State.OPEN;
        openUntilNs = nowNs + openNs;
        halfOpenTrialInFlight = false;
        consecutiveFailures = 0;
    }

    /** An active probe's verdict (health checker thread: one writer). Applied by the routing stage at its next batch. */
    void reportProbe(boolean healthy) {
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
        if (healthy && state == State.OPEN) {
            // A passing probe lets one trial request through rather than waiting for the full open period.
            state = State.HALF_OPEN;
            halfOpenTrialInFlight = false;
        }
    }
}
