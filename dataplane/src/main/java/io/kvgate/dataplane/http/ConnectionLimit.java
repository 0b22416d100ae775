package io.kvgate.dataplane.http;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@code limits.max_connections}: open client connections across all I/O threads. A connection over the limit is
 * closed as soon as it is accepted, before any byte is read or any buffer is allocated for it, and counted (it
 * never reaches the front door, so it cannot hold request memory). Thread-safe.
 */
public final class ConnectionLimit {
    private final AtomicInteger open = new AtomicInteger();
    private final java.util.function.IntSupplier max;

    public ConnectionLimit(int max) {
        this(() -> max);
    }

    /**
     * @param max the limit in effect now, read per accepted connection (a reload that lowers it refuses new
     *            connections until enough of the open ones closed; none is cut)
     */
    public ConnectionLimit(java.util.function.IntSupplier max) {
        this.max = max;
    }

    /** Takes a slot for a new connection; false (nothing taken) when {@code max} are open. */
    public boolean tryAcquire() {
        while (true) {
            int n = open.get();
            if (n >= max.getAsInt()) {
                return false;
            }
            if (open.compareAndSet(n, n + 1)) {
                return true;
            }
        }
    }

    /** Returns the slot of a connection that closed (exactly once per successful {@link #tryAcquire}). */
    public void release() {
        open.decrementAndGet();
    }

    public int open() {
        return open.get();
    }

    public int max() {
        return max.getAsInt();
    }
}
