package io.kvgate.dataplane.route;

import com.lmax.disruptor.AlertException;
import com.lmax.disruptor.LiteTimeoutBlockingWaitStrategy;
import com.lmax.disruptor.Sequence;
import com.lmax.disruptor.SequenceBarrier;
import com.lmax.disruptor.TimeoutException;
import com.lmax.disruptor.WaitStrategy;
import java.util.concurrent.TimeUnit;

/**
 * The routing thread's default wait: it sleeps when the ring is empty, publishers never wake it by themselves, and
 * the stage wakes it explicitly ({@link #wake}) once per batch of publishes (one per event-loop turn, see
 * {@link RouterPort}). Under the normal scheduler each wake-up is a futex call and two context switches, so one per
 * turn instead of one per request is what keeps the hand-off cheap on a busy core.
 *
 * <p>The sleep is bounded by the duty period: on timeout the stage runs its housekeeping (completions, probe
 * verdicts, configuration swaps), so state read by metrics and admin is at most one period old even when no request
 * arrives, and a publish whose wake-up was lost costs at most one period, never a hang.
 *
 * <p>Thread-safe.
 */
final class RouterWaitStrategy implements WaitStrategy {
    private final LiteTimeoutBlockingWaitStrategy delegate;

    RouterWaitStrategy(long dutyPeriodNs) {
        this.delegate = new LiteTimeoutBlockingWaitStrategy(dutyPeriodNs, TimeUnit.NANOSECONDS);
    }

    @Override
    public long waitFor(long sequence, Sequence cursor, Sequence dependentSequence, SequenceBarrier barrier)
        throws AlertException, InterruptedException, TimeoutException {
        return delegate.waitFor(sequence, cursor, dependentSequence, barrier);
    }

    /** Called by the ring on every publish: deliberately nothing (the stage wakes the router once per batch). */
    @Override
    public void signalAllWhenBlocking() {
    }

    /** Wakes the routing thread if it sleeps (cheap when it does not: one atomic read-modify-write). */
    void wake() {
        delegate.signalAllWhenBlocking();
    }
}
