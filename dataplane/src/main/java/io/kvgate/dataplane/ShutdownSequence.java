package io.kvgate.dataplane;

import io.kvgate.control.clock.NanoClock;
import java.util.concurrent.TimeUnit;

/**
 * The shutdown SIGTERM (or SIGINT) starts, as steps on the gateway's clock so its order and timing are tested by
 * advancing a manual clock:
 * <ol>
 *   <li>{@link Phase#ANNOUNCED} at once: {@code /ready} answers 503 and every response closes its connection, while
 *       the gateway still accepts and serves, for {@code shutdown.drain_delay_ms}: the time balancers need to see the
 *       503 and stop sending (a connection refused in that window would be a failed request);</li>
 *   <li>{@link Phase#DRAINING}: the listener closes, requests in flight get up to the drain timeout to finish;</li>
 *   <li>{@link Phase#STOPPED}: streams still running end with an error event and {@code [DONE]}, everything closes.</li>
 * </ol>
 * One thread drives it ({@link #step} or {@link #run}); {@link #skipDelay} may be called from any thread.
 */
public final class ShutdownSequence {
    public enum Phase { ANNOUNCED, DRAINING, STOPPED }

    /** What each phase does to the gateway. */
    public interface Steps {
        /** Not ready, every response its connection's last; requests are still accepted and served. */
        void announce();

        /** The listener closes; a request that still arrives on an open connection is refused (503). */
        void stopAccepting();

        /** Requests in flight now. */
        long inFlight();

        /** Ends what is still running (streams with an error event) and closes everything. */
        void endAndClose();
    }

    private final NanoClock clock;
    private final Steps steps;
    private final long drainNs;
    private volatile long delayEndNs;
    private long drainEndNs;
    private volatile Phase phase;
    /** Interrupted: no more waiting for balancers or for requests in flight. */
    private volatile boolean cutShort;

    /** Announces the shutdown (the first step) and returns; {@link #step} does the rest as the clock moves. */
    public ShutdownSequence(NanoClock clock, long drainDelayMs, long drainMs, Steps steps) {
        this.clock = clock;
        this.steps = steps;
        this.drainNs = TimeUnit.MILLISECONDS.toNanos(drainMs);
        this.delayEndNs = clock.nanoTime() + TimeUnit.MILLISECONDS.toNanos(drainDelayMs);
        steps.announce();
        this.phase = Phase.ANNOUNCED;
    }

    /** Takes every step the clock and the requests in flight allow now; returns the phase reached. */
    public synchronized Phase step() {
        long now = clock.nanoTime();
        if (phase == Phase.ANNOUNCED && (cutShort || now - delayEndNs >= 0)) {
            steps.stopAccepting();
            drainEndNs = now + drainNs;
            phase = Phase.DRAINING;
        }
        if (phase == Phase.DRAINING && (cutShort || steps.inFlight() == 0 || now - drainEndNs >= 0)) {
            steps.endAndClose();
            phase = Phase.STOPPED;
        }
        return phase;
    }

    /** A second signal: the operator does not want to wait for the balancers; draining starts at the next step. */
    public void skipDelay() {
        delayEndNs = clock.nanoTime();
    }

    public Phase phase() {
        return phase;
    }

    /**
     * Steps until stopped, pausing {@code pollMs} of real time between steps (the gateway's clock is the system's
     * when a signal drives this). An interrupt skips the delay and ends the drain at once.
     */
    public void run(long pollMs) {
        while (step() != Phase.STOPPED) {
            try {
                Thread.sleep(pollMs); // shutdown path only: polls the clock and the in-flight count
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                cutShort = true;
                step();
                return;
            }
        }
    }
}
