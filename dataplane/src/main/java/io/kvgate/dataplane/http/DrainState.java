package io.kvgate.dataplane.http;

/**
 * Whether the client listener is draining. While it is, the front door accepts no new request (503 with
 * {@code Connection: close}), every response it or an exchange writes carries {@code Connection: close} and the
 * connection closes after it, and {@code /health} answers 503 so balancers move traffic away. Requests already in
 * progress finish. Drain can be undone (an operator who drained the wrong gateway). Thread-safe: written by the
 * admin thread or the shutdown path, read by every I/O thread.
 */
public final class DrainState {
    private volatile boolean draining;

    /** Stops new requests on every connection, starting with the next request head read. */
    public void start() {
        draining = true;
    }

    /** Serves new requests again (connections already closed by the drain stay closed). */
    public void undo() {
        draining = false;
    }

    public boolean draining() {
        return draining;
    }
}
