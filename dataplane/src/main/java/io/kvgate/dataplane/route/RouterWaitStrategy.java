package io.kvgate.dataplane.route;

import com.lmax.disruptor.AlertException;
import com.lmax.disruptor.LiteBlockingWaitStrategy;
import com.lmax.disruptor.Sequence;
import com.lmax.disruptor.SequenceBarrier;
import com.lmax.disruptor.TimeoutException;
import com.lmax.disruptor.WaitStrategy;

/**
 * Blocking wait for the routing thread that lets publishers skip the wake-up. A completion only changes state the
 * routing stage reads when it decides, and the ring is FIFO, so every completion published before a route request is
 * applied before that request is decided: completions need not wake the routing thread, the next route request does.
 * That saves a futex wake and two context switches per request on a busy core. {@link RoutingStage} publishes
 * quietly only while the ring is less than half full, so a run of completions can never fill it unseen.
 *
 * <p>Thread-safe: the quiet flag is per publishing thread.
 */
final class RouterWaitStrategy implements WaitStrategy {
    private static final ThreadLocal<boolean[]> QUIET = ThreadLocal.withInitial(() -> new boolean[1]);
    private final WaitStrategy delegate = new LiteBlockingWaitStrategy();

    @Override
    public long waitFor(long sequence, Sequence cursor, Sequence dependentSequence, SequenceBarrier barrier)
        throws AlertException, InterruptedException, TimeoutException {
        return delegate.waitFor(sequence, cursor, dependentSequence, barrier);
    }

    @Override
    public void signalAllWhenBlocking() {
        if (!QUIET.get()[0]) {
            delegate.signalAllWhenBlocking();
        }
    }

    /** Runs {@code publish} on this thread without waking the routing thread. */
    static void quietly(Runnable publish) {
        boolean[] q = QUIET.get();
        q[0] = true;
        try {
            publish.run();
        } finally {
            q[0] = false;
        }
    }
}
