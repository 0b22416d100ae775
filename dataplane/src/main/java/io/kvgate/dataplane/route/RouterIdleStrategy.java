package io.kvgate.dataplane.route;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;
import org.agrona.concurrent.IdleStrategy;

/**
 * The dedicated routing thread's default idle strategy ({@code router.wait_strategy: blocking}): it sleeps when a duty
 * cycle found nothing to do, publishers never wake it by themselves, and the stage wakes it explicitly ({@link #wake})
 * once per batch of publishes (one per event-loop turn, see {@link RouterPort}). Each wake-up of a sleeping thread is
 * a futex call and two context switches, so one per turn instead of one per request is what keeps the hand-off cheap
 * on a busy core. (It replaces the Disruptor wait strategy the stage had before it became an Agrona agent, with the
 * same behaviour.)
 *
 * <p>The sleep is bounded by the time until housekeeping is due ({@link RouterAgent#nanosUntilHousekeeping}, at most
 * one duty period), so state read by metrics and admin is at most about one period old even when no request arrives,
 * and a wake-up that is lost costs at most one period, never a hang.
 *
 * <p>{@link #wake} is thread-safe; {@link #idle} runs on the routing thread only.
 */
final class RouterIdleStrategy implements IdleStrategy {
    private final LongSupplier maxSleepNs;
    /** Set by {@link #wake} before it looks for a sleeper; cleared by the routing thread before it sleeps. */
    private final AtomicBoolean wakeRequested = new AtomicBoolean();
    private volatile Thread sleeper;

    RouterIdleStrategy(LongSupplier maxSleepNs) {
        this.maxSleepNs = maxSleepNs;
    }

    /**
     * Wakes the routing thread if it sleeps or is about to (cheap when it does not: a volatile write and read). The
     * request flag is written before the sleeper is read, and the sleeper before the flag is read on the other side,
     * so one of the two always sees the other; an unpark before the park makes the park return at once.
     */
    void wake() {
        wakeRequested.set(true);
        Thread t = sleeper;
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            return;
        }
        idle();
    }

    @Override
    public void idle() {
        sleeper = Thread.currentThread();
        if (!wakeRequested.getAndSet(false)) {
            long ns = maxSleepNs.getAsLong();
            if (ns > 0) {
                LockSupport.parkNanos(this, ns);
            }
            wakeRequested.set(false);
        }
        sleeper = null;
    }

    @Override
    public void reset() {
    }

    @Override
    public String alias() {
        return "blocking";
    }
}
