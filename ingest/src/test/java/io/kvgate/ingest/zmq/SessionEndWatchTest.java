package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;

import io.kvgate.control.clock.ManualClock;
import org.junit.jupiter.api.Test;

/**
 * Review B-2: a connecting SUB whose connection ended without ZeroMQ's reconnect attempt is declared ended after
 * {@link RankSubscriber#SESSION_END_GRACE_NS} on the injected clock; the connection events come from JeroMQ's I/O
 * thread in order (fed here directly).
 */
class SessionEndWatchTest {
    private static final long GRACE = RankSubscriber.SESSION_END_GRACE_NS;
    private final ManualClock clock = new ManualClock();
    private final AtomicInteger wakes = new AtomicInteger();
    private final RankSubscriber.PeerEvents events = new RankSubscriber.PeerEvents(wakes::incrementAndGet);
    private final RankSubscriber.SessionEndWatch watch = new RankSubscriber.SessionEndWatch();

    private void event(int type) {
        events.consume(new zmq.ZMQ.Event(type, "tcp://127.0.0.1:1", null));
    }

    private boolean ended() {
        return watch.ended(events.unansweredDisconnect, clock.nanoTime());
    }

    @Test
    void aDisconnectWithoutReconnectAttemptEndsTheSessionAfterTheGraceExactly() {
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED);
        assertFalse(ended());
        event(zmq.ZMQ.ZMQ_EVENT_DISCONNECTED);
        assertFalse(ended(), "first seen now");
        clock.advanceNs(GRACE - 1);
        assertFalse(ended());
        clock.advanceNs(1);
        assertTrue(ended());
        assertEquals(2, wakes.get(), "connect and disconnect wake the agent");
    }

    @Test
    void zeroMqsReconnectAttemptAnswersTheDisconnect() {
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED);
        event(zmq.ZMQ.ZMQ_EVENT_DISCONNECTED);
        assertFalse(ended());
        event(zmq.ZMQ.ZMQ_EVENT_CONNECT_RETRIED);
        clock.advanceNs(10 * GRACE);
        assertFalse(ended(), "ZeroMQ is reconnecting: the session lives");
        // A later disconnect is timed from when it is first seen, not from the earlier one.
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED);
        event(zmq.ZMQ.ZMQ_EVENT_DISCONNECTED);
        assertFalse(ended());
        clock.advanceNs(GRACE / 2);
        assertFalse(ended());
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED); // reconnected at once: answered too
        clock.advanceNs(GRACE);
        assertFalse(ended());
    }

    @Test
    void aSecondUnansweredDisconnectRestartsTheGrace() {
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED);
        event(zmq.ZMQ.ZMQ_EVENT_DISCONNECTED);
        assertFalse(ended());
        clock.advanceNs(GRACE - 1);
        event(zmq.ZMQ.ZMQ_EVENT_CONNECTED);
        event(zmq.ZMQ.ZMQ_EVENT_DISCONNECTED);
        assertFalse(ended(), "another disconnect: timed afresh");
        clock.advanceNs(GRACE - 1);
        assertFalse(ended());
        clock.advanceNs(1);
        assertTrue(ended());
    }
}
