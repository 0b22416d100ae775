package io.kvgate.dataplane.http;

/**
 * Whether the client listener is draining, or about to. While it drains, the front door accepts no new request (503
 * with {@code Connection: close}), every response it or an exchange writes carries {@code Connection: close} and the
 * connection closes after it, and {@code /health} answers 503 so balancers move traffic away. Requests already in
 * progress finish. Drain can be undone (an operator who drained the wrong gateway).
 *
 * <p>Before a shutdown drains, it announces itself ({@link #announceShutdown}): for {@code shutdown.drain_delay_ms}
 * the gateway still serves every request, but {@code /ready} and {@code /health} answer 503 and every response closes
 * its connection, so balancers take the gateway out of rotation and keep-alive clients reconnect (to another gateway)
 * while this one still answers; a request sent on a connection that would otherwise idle until the listener closes
 * gets no 503. Thread-safe: written by the admin thread or the shutdown path, read by every I/O thread.
 */
public final class DrainState {
    private volatile boolean draining;
    private volatile boolean shuttingDown;

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

    /** A shutdown has begun: not ready, every response is its connection's last, requests are still served. */
    public void announceShutdown() {
        shuttingDown = true;
    }

    public boolean shuttingDown() {
        return shuttingDown;
    }

    /** Whether the response starting now must be its connection's last ({@code Connection: close}). */
    public boolean closesConnections() {
        return draining || shuttingDown;
    }
}
