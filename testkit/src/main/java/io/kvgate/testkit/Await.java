package io.kvgate.testkit;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * Waits, bounded, for something real processes or sockets do (an engine probed, a scrape taken, a queue filled):
 * polls every 10 ms and fails naming what did not happen. Not for timeouts under test: those run on an injected clock.
 */
public final class Await {
    private static final long POLL_MS = 10;

    private Await() {
    }

    /** Polls {@code cond} until it holds; past {@code timeout} fails with {@code what}. */
    public static void until(Duration timeout, String what, BooleanSupplier cond) throws InterruptedException {
        until(timeout, what, cond, () -> "");
    }

    /** As {@link #until(Duration, String, BooleanSupplier)}; the failure also shows {@code state}, read then. */
    public static void until(Duration timeout, String what, BooleanSupplier cond, Supplier<String> state)
        throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                String s = state.get();
                throw new AssertionError("not within " + timeout.toMillis() + " ms: " + what + (s.isEmpty() ? "" : "; " + s));
            }
            TimeUnit.MILLISECONDS.sleep(POLL_MS);
        }
    }
}
