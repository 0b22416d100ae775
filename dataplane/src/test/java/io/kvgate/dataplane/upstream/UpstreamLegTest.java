package io.kvgate.dataplane.upstream;

import static io.kvgate.dataplane.upstream.EmbeddedEngines.bytes;
import static io.kvgate.dataplane.upstream.EmbeddedEngines.reads;
import static io.kvgate.dataplane.upstream.EmbeddedEngines.written;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelPromise;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpMethod;
import io.kvgate.dataplane.wire.EngineRequest;
import io.kvgate.dataplane.wire.ResponseHead;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** {@link UpstreamLeg} over embedded engine connections: resend, 1xx, timeouts on the loop's clock, back-pressure, bounds. */
class UpstreamLegTest {
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private static final UpstreamLeg.Timeouts TIMEOUTS = UpstreamLeg.Timeouts.ofMillis(1_000, 2_000, 5_000);

    private final EmbeddedChannel client = new EmbeddedChannel();
    private final EmbeddedEngines engines = new EmbeddedEngines();
    private final GatewayMetrics metrics = new GatewayMetrics();
    private final EndpointState ep = EmbeddedEngines.endpoint("10.0.0.1", 8000);
    private final List<ByteBuf> inbound = new ArrayList<>();

    {
        client.freezeTime();
    }

    /** Records what the leg reports; optionally aggregates or holds reads on a client write. */
    static class Recorder implements LegListener {
        ResponseHead head;
        final StringBuilder content = new StringBuilder();
        boolean last;
        LegFailure failure;
        String aggregated;
        int aggregateLimit = -1;
        ChannelPromise hold;
        int readCompletes;

        @Override
        public void onHead(UpstreamLeg leg, ResponseHead h) {
            head = h;
            if (aggregateLimit >= 0) {
                leg.aggregate(aggregateLimit);
            }
        }

        @Override
        public void onContent(UpstreamLeg leg, HttpContent c, boolean isLast) {
            content.append(c.content().toString(StandardCharsets.UTF_8));
            c.release();
            last |= isLast;
        }

        @Override
        public void onReadComplete(UpstreamLeg leg) {
            readCompletes++;
            if (hold != null) {
                leg.readAfter(hold);
            } else {
                leg.read();
            }
        }

        @Override
        public void onAggregated(UpstreamLeg leg, ResponseHead h, ByteBuf body) {
            aggregated = body.toString(StandardCharsets.UTF_8);
        }

        @Override
        public void onFailure(UpstreamLeg leg, LegFailure f, Throwable cause) {
            failure = f;
        }
    }

    private final Recorder listener = new Recorder();

    static EngineRequest request(String uri) {
        return new EngineRequest(HttpMethod.POST, uri, new DefaultHttpHeaders(), null);
    }

    private UpstreamLeg leg(String body) {
        return new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/chat/completions"), bytes(body), TIMEOUTS, listener);
    }

    /** Writes engine bytes to {@code ch}, keeping the buffers to check they were all released. */
    private void engineSends(EmbeddedChannel ch, String s) {
        ByteBuf b = bytes(s);
        inbound.add(b);
        ch.writeInbound(b);
    }

    private void advance(long ms) {
        client.advanceTimeBy(ms, TimeUnit.MILLISECONDS);
        client.runScheduledPendingTasks();
    }

    @AfterEach
    void noBufferLeftBehind() {
        for (ByteBuf b : inbound) {
            assertEquals(0, b.refCnt(), "every engine byte buffer is released");
        }
        for (EmbeddedChannel ch : engines.opened) {
            ch.finishAndReleaseAll();
        }
    }

    @Test
    void m4_keepAliveResendCarriesTheWholeSmallBody() {
        assertEquals(57, BODY.length());
        EmbeddedChannel stale = engines.addIdle();
        UpstreamLeg leg = leg(BODY);
        leg.start();
        String first = written(stale);
        assertTrue(first.endsWith("\r\n\r\n" + BODY), first);
        stale.close(); // the engine had already closed this pooled connection (the keep-alive race)
        assertEquals(1, engines.opened.size(), "resent once on a fresh connection");
        String resent = written(engines.opened.get(0));
        assertTrue(resent.toLowerCase().contains("content-length: 57"), resent);
        assertTrue(resent.endsWith("\r\n\r\n" + BODY), "the resend carries every body byte: " + resent);
        assertNull(listener.failure, "nobody heard of the race");
        engineSends(engines.opened.get(0), "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assertEquals(UpstreamLeg.State.DONE, leg.state());
        assertEquals(List.of(new Completion(ep, Outcome.SUCCESS)), engines.outcomes);
    }

    @Test
    void l1_informationalResponsesAreSkippedAtEverySplit() {
        String wire = "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
            + "HTTP/1.1 100 Continue\r\n\r\n"
            + "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\nhi";
        for (int split = 1; split < wire.length(); split++) {
            Recorder r = new Recorder();
            UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, r);
            leg.start();
            EmbeddedChannel ch = engines.opened.get(engines.opened.size() - 1);
            written(ch);
            engineSends(ch, wire.substring(0, split));
            engineSends(ch, wire.substring(split));
            assertEquals(200, r.head.status(), "split " + split);
            assertEquals("hi", r.content.toString(), "split " + split);
            assertTrue(r.last);
            assertEquals(UpstreamLeg.State.DONE, leg.state());
            assertSame(ch, engines.released.get(engines.released.size() - 1), "a clean response returns the connection");
        }
        assertTrue(engines.outcomes.stream().allMatch(c -> c.outcome() == Outcome.SUCCESS));
    }

    @Test
    void firstByteTimeoutChargesTheEngine() {
        UpstreamLeg leg = leg(BODY);
        leg.start();
        advance(999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.FIRST_BYTE_TIMEOUT, listener.failure);
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
        assertFalse(engines.opened.get(0).isOpen(), "a timed-out connection is closed, never pooled");
        assertEquals(List.of(new Completion(ep, Outcome.FAILURE)), engines.outcomes);
    }

    /**
     * The connection's one timer outlives its legs: the wake-up the first leg left (its first-byte deadline, 1 s)
     * is not cancelled when it completes, and when it fires it finds the second leg on the connection, not yet due
     * (sent 0.5 s later): that leg times out at its own deadline, no earlier and no later. While the connection
     * sits idle in the pool, a wake-up finds no leg and leaves the connection alone.
     */
    @Test
    void aWakeUpLeftByAnEarlierLegOnTheConnectionRechecksTheCurrentLegsOwnDeadline() {
        EmbeddedChannel conn = engines.addIdle();
        UpstreamLeg first = leg(BODY);
        first.start();
        written(conn);
        engineSends(conn, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assertEquals(UpstreamLeg.State.DONE, first.state());
        assertSame(conn, engines.released.get(0));

        advance(500);
        engines.idle.add(conn); // the pool hands the same connection to the next request
        Recorder second = new Recorder();
        UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/chat/completions"),
            bytes(BODY), TIMEOUTS, second);
        leg.start();
        written(conn);
        advance(500); // t = 1 s: the first leg's wake-up
        assertNull(second.failure, "woken early, the second leg re-checks and waits for its own deadline");
        advance(499);
        assertNull(second.failure);
        advance(1); // t = 1.5 s: 1 s after the second leg was sent
        assertEquals(LegFailure.FIRST_BYTE_TIMEOUT, second.failure);
        assertFalse(conn.isOpen());

        EmbeddedChannel pooled = engines.addIdle();
        UpstreamLeg third = leg(BODY);
        third.start();
        written(pooled);
        engineSends(pooled, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        advance(5_000); // its wake-up fires with the connection idle in the pool
        assertTrue(pooled.isOpen(), "a wake-up with no leg on the connection changes nothing");
        assertEquals(UpstreamLeg.State.DONE, third.state());
    }

    @Test
    void idleTimeoutChargesTheEngineWhileTheGatewayIsReading() {
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        advance(1_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.IDLE_TIMEOUT, listener.failure);
        assertEquals(List.of(new Completion(ep, Outcome.FAILURE)), engines.outcomes);
    }

    @Test
    void m3_idleTimeWhileTheClientHoldsReadsIsNotChargedToTheEngine() {
        listener.hold = client.newPromise();
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        advance(4_000); // twice the engine's idle timeout, but the client is the one not reading
        assertNull(listener.failure);
        ChannelPromise taken = listener.hold;
        listener.hold = null;
        int before = reads(ch);
        taken.setSuccess(); // the client took the bytes: the engine is responsible again from now
        assertEquals(before + 1, reads(ch));
        advance(1_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.IDLE_TIMEOUT, listener.failure, "idle counted from the resume, not from the last bytes");
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
    }

    @Test
    void idleDeadlineAfterTheHeadHoldsWhenTheFirstByteTimerFiresFirst() {
        // first byte 1 s, idle 2 s: the head at 0.9 s leaves the first-byte timer armed (it fires first); when it
        // fires at 1 s it finds the idle deadline (2.9 s) ahead and re-arms for it.
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        advance(900);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        advance(100);
        assertNull(listener.failure, "the first-byte deadline passed after the head: not a first-byte timeout");
        advance(1_899);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.IDLE_TIMEOUT, listener.failure, "idle counted from the last bytes at 0.9 s");
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
    }

    @Test
    void idleDeadlineEarlierThanTheFirstByteDeadlineReArmsTheTimer() {
        UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/chat/completions"), bytes(BODY), UpstreamLeg.Timeouts.ofMillis(10_000, 2_000, 5_000),
            listener);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        advance(1_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.IDLE_TIMEOUT, listener.failure, "the 2 s idle deadline, not the 10 s first-byte one");
    }

    @Test
    void aFirstByteDeadlineLaterThanTheIdleOneStillHolds() {
        // The timer is first armed at the earlier (idle) deadline; with no head by then it re-arms for the first byte.
        UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/chat/completions"),
            bytes(BODY), UpstreamLeg.Timeouts.ofMillis(10_000, 2_000, 5_000), listener);
        leg.start();
        advance(2_000);
        assertNull(listener.failure, "no head within the idle timeout is not an idle timeout");
        advance(7_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.FIRST_BYTE_TIMEOUT, listener.failure);
    }

    @Test
    void aHeadAfterALateFirstByteGetsIdleChecksFromItsArrival() {
        UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/chat/completions"),
            bytes(BODY), UpstreamLeg.Timeouts.ofMillis(10_000, 2_000, 5_000), listener);
        leg.start();
        advance(5_000); // past the idle timeout, within the first-byte one
        engineSends(engines.opened.get(0), "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n");
        advance(1_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.IDLE_TIMEOUT, listener.failure, "idle from the head at 5 s, not the first-byte deadline at 10 s");
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
    }

    @Test
    void clientStallEndsTheLegWithoutChargingTheEngine() {
        listener.hold = client.newPromise();
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        advance(4_999);
        assertNull(listener.failure);
        advance(1);
        assertEquals(LegFailure.CLIENT_STALL, listener.failure);
        assertFalse(ch.isOpen(), "the engine's work is cancelled");
        assertEquals(List.of(new Completion(ep, Outcome.RELEASED)), engines.outcomes, "the engine is not blamed");
        listener.hold.setSuccess(); // a late write completion reads nothing
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
    }

    @Test
    void backPressure_nextUpstreamReadWaitsForTheClientWrite() {
        listener.hold = client.newPromise();
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        int afterSend = reads(ch);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n6\r\ndata:1\r\n");
        assertEquals(1, listener.readCompletes);
        assertEquals(afterSend, reads(ch), "paused: no read while the client write is pending");
        ChannelPromise p = listener.hold;
        listener.hold = null;
        p.setSuccess();
        assertEquals(afterSend + 1, reads(ch), "resumed by the write's completion");
        engineSends(ch, "0\r\n\r\n");
        assertTrue(listener.last);
        assertEquals(UpstreamLeg.State.DONE, leg.state());
    }

    @Test
    void engine5xxChargesTheBreakerAnd4xxDoesNot() {
        leg(BODY).start();
        engineSends(engines.opened.get(0), "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        Recorder second = new Recorder();
        new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, second).start();
        engineSends(engines.opened.get(1), "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        assertEquals(List.of(new Completion(ep, Outcome.FAILURE), new Completion(ep, Outcome.SUCCESS)), engines.outcomes);
        assertTrue(metrics.render().contains("kvgate_upstream_errors_total{cause=\"engine_5xx\",endpoint=\"10.0.0.1:8000\"} 1"));
    }

    @Test
    void aLoadingEngines503IsNotChargedButAnotherEngines503AndItsOther5xxAre() {
        leg(BODY).answers503WhileLoading(true).start();
        engineSends(engines.opened.get(0), "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, new Recorder()).answers503WhileLoading(true).start();
        engineSends(engines.opened.get(1), "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
        new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, new Recorder()).start();
        engineSends(engines.opened.get(2), "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        assertEquals(List.of(new Completion(ep, Outcome.RELEASED), new Completion(ep, Outcome.FAILURE),
            new Completion(ep, Outcome.FAILURE)), engines.outcomes);
        assertTrue(metrics.render().contains("kvgate_upstream_errors_total{cause=\"engine_loading\",endpoint=\"10.0.0.1:8000\"} 1"));
        assertTrue(metrics.render().contains("kvgate_upstream_errors_total{cause=\"engine_5xx\",endpoint=\"10.0.0.1:8000\"} 2"));
    }

    @Test
    void aggregationIsBoundedAndNeverTruncatedAtEverySplit() {
        String over = "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 17\r\n\r\n{\"error\":\"12345\"}";
        for (int split = 1; split < over.length(); split++) {
            Recorder r = new Recorder();
            r.aggregateLimit = 16;
            UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, r);
            leg.start();
            EmbeddedChannel ch = engines.opened.get(engines.opened.size() - 1);
            engineSends(ch, over.substring(0, split));
            engineSends(ch, over.substring(split));
            assertEquals(LegFailure.RESPONSE_TOO_LARGE, r.failure, "split " + split);
            assertNull(r.aggregated);
            assertFalse(ch.isOpen());
        }
        Recorder fits = new Recorder();
        fits.aggregateLimit = 17;
        new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, fits).start();
        engineSends(engines.opened.get(engines.opened.size() - 1), over);
        assertEquals("{\"error\":\"12345\"}", fits.aggregated);
    }

    @Test
    void m7_cancelDuringAggregationReleasesTheAggregate() {
        listener.aggregateLimit = 1 << 20;
        UpstreamLeg leg = leg(BODY);
        leg.start();
        EmbeddedChannel ch = engines.opened.get(0);
        engineSends(ch, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"choices\":[");
        assertTrue(leg.cancel());
        assertFalse(leg.cancel(), "one teardown");
        assertEquals(UpstreamLeg.State.CANCELLED, leg.state());
        assertNull(listener.failure, "cancel does not call back");
        assertEquals(List.of(new Completion(ep, Outcome.RELEASED)), engines.outcomes);
        // noBufferLeftBehind() checks the aggregated bytes were released.
    }

    @Test
    void connectFailureIsReportedAndCharged() {
        engines.failConnects = 1;
        UpstreamLeg leg = leg(BODY);
        leg.start();
        assertEquals(LegFailure.CONNECT, listener.failure);
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
        assertEquals(List.of(new Completion(ep, Outcome.FAILURE)), engines.outcomes);
    }

    @Test
    void l8_aListenerExceptionEndsTheLegAsInternalWithoutChargingTheEngine() {
        Recorder throwing = new Recorder() {
            @Override
            public void onHead(UpstreamLeg leg, ResponseHead h) {
                throw new IllegalStateException("bug in a listener");
            }
        };
        UpstreamLeg leg = new UpstreamLeg(engines, client.eventLoop(), ep, engines, metrics, request("/v1/completions"), bytes(BODY), TIMEOUTS, throwing);
        leg.start();
        engineSends(engines.opened.get(0), "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi");
        assertEquals(LegFailure.INTERNAL, throwing.failure);
        assertEquals(UpstreamLeg.State.FAILED, leg.state());
        assertFalse(engines.opened.get(0).isOpen());
        assertEquals(List.of(new Completion(ep, Outcome.RELEASED)), engines.outcomes);
    }
}
