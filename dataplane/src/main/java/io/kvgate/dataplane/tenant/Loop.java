package io.kvgate.dataplane.tenant;

import io.netty.util.concurrent.EventExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The event loop a request belongs to, as the limit store sees it: where a store's answer is handed back (never run on
 * the store client's own thread) and whose timer bounds the wait for it. An interface so the store's logic is tested
 * on a manual loop and clock.
 */
public interface Loop {
    /** Runs {@code task} on the loop (later, in order). */
    void execute(Runnable task);

    /** Runs {@code task} on the loop after {@code delayNs}; the returned handle cancels it. */
    Runnable schedule(Runnable task, long delayNs);

    /** A Netty event loop. */
    static Loop of(EventExecutor executor) {
        return new Loop() {
            @Override
            public void execute(Runnable task) {
                executor.execute(task);
            }

            @Override
            public Runnable schedule(Runnable task, long delayNs) {
                var f = executor.schedule(task, delayNs, TimeUnit.NANOSECONDS);
                return () -> f.cancel(false);
            }
        };
    }
}
