package io.kvgate.control.clock;

/**
 * The source of time for everything that times out, expires or measures: injected so that timeouts, TTLs,
 * breakers and watchdogs are tested by advancing a {@link ManualClock}, never by sleeping.
 */
@FunctionalInterface
public interface NanoClock {
    /** Monotonic nanoseconds (only differences are meaningful). */
    long nanoTime();

    NanoClock SYSTEM = System::nanoTime;
}
