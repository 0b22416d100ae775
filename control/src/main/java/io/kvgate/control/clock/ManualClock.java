package io.kvgate.control.clock;

import java.util.concurrent.TimeUnit;

/** A {@link NanoClock} that only moves when told to. Thread-safe (volatile reads, atomic advance). */
public final class ManualClock implements NanoClock {
    private volatile long nowNs;

    public ManualClock(long startNs) {
        this.nowNs = startNs;
    }

    public ManualClock() {
        this(1_000_000_000L);
    }

    @Override
    public long nanoTime() {
        return nowNs;
    }

    public synchronized void advance(long amount, TimeUnit unit) {
        nowNs += unit.toNanos(amount);
    }

    public synchronized void advanceNs(long ns) {
        nowNs += ns;
    }
}
