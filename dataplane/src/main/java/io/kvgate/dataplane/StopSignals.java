package io.kvgate.dataplane;

import io.kvgate.control.log.Log;
import io.kvgate.control.log.LogSetup;
import java.util.concurrent.CountDownLatch;

/**
 * SIGTERM and SIGINT for {@code serve}: the first releases {@link #awaitStop} (the main thread then runs the shutdown
 * sequence: not ready at once, serving for {@code shutdown.drain_delay_ms}, draining, exit 0); another skips what is
 * left of the delay. Any other way out (System.exit, or a platform that will not let us handle the signals) drains
 * without a delay in a shutdown hook. Threading: installed and awaited by the main thread; the handlers run on the
 * JVM's signal thread and only count down or skip.
 */
final class StopSignals {
    private final CountDownLatch stopAsked = new CountDownLatch(1);
    private final CountDownLatch stopped = new CountDownLatch(1);
    private final boolean handled;

    private StopSignals(Gateway gw, long drainMs) {
        handled = Signals.handle("TERM", () -> stop(gw, drainMs)) != null & Signals.handle("INT", () -> stop(gw, drainMs)) != null;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (stopAsked.getCount() > 0) {
                Log.info("exiting: draining (up to " + drainMs + " ms)");
                gw.close(drainMs);
            }
            LogSetup.shutdown(); // last: the asynchronous loggers' queue is written before the JVM exits
            stopped.countDown();
        }, "kvgate-shutdown"));
    }

    static StopSignals install(Gateway gw, long drainMs) {
        return new StopSignals(gw, drainMs);
    }

    /**
     * Blocks until a stop signal: true when it came through our handler (the caller runs the shutdown sequence), false
     * when the JVM handled it itself (its hooks ran, the process exits 128+signal).
     */
    boolean awaitStop() throws InterruptedException {
        if (!handled) {
            stopped.await();
            return false;
        }
        stopAsked.await();
        return true;
    }

    private void stop(Gateway gw, long drainMs) {
        if (stopAsked.getCount() > 0) {
            stopAsked.countDown();
        } else {
            Log.info("second stop signal: not waiting for balancers any longer");
            gw.shutdown(gw.config().shutdown().drainDelayMs(), drainMs).skipDelay();
        }
    }
}
