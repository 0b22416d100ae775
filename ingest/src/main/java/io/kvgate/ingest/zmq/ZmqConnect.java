package io.kvgate.ingest.zmq;

import org.zeromq.ZMQ;

/**
 * How the simulator and the tests connect a JeroMQ socket over TCP: with the same bounded ZMTP handshake the ingest's
 * own subscribers use ({@link RankSubscriber#HANDSHAKE_TIMEOUT_MS}, set on its SUB and replay DEALER).
 *
 * <p>JeroMQ 0.6.0 sometimes loses a freshly connected socket's registration with its I/O thread: when the connecter's
 * selection key is cancelled and the new stream engine registers the same channel in the same pass of
 * {@code zmq.poll.Poller.run()}, {@code keyFor()} still returns the cancelled key, so the channel is never registered
 * again (zeromq/jeromq PR #1022, "connect hand-off race"; still open upstream). The TCP connection is established but
 * the ZMTP greeting is never sent or read: a SUB's subscription never reaches the PUB (every event is dropped), a
 * DEALER's replay request never reaches the ROUTER. Only the handshake timer gets it out, by closing the connection for
 * a reconnect, and its default is 30 s. Reproduced here: 5 of 30 fresh DEALER connections stalled in a repeated
 * {@code KvEventsTest} on the shared 2-core machine (ss showed the peer's 10-byte greeting unread in Recv-Q).
 *
 * <p>Only the connecting side races (an accepted channel is registered fresh), so only {@link #connect} sets the timer.
 */
public final class ZmqConnect {
    /** A stalled attempt costs about this plus the reconnect interval, instead of 30 s. */
    public static final int HANDSHAKE_TIMEOUT_MS = RankSubscriber.HANDSHAKE_TIMEOUT_MS;

    private ZmqConnect() {}

    /** Connects {@code socket} to {@code uri} with the bounded handshake (see the class comment); returns it. */
    public static ZMQ.Socket connect(ZMQ.Socket socket, String uri) {
        socket.setHandshakeIvl(HANDSHAKE_TIMEOUT_MS);
        socket.connect(uri);
        return socket;
    }
}
