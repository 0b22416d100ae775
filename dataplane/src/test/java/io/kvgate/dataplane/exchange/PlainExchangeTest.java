package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.relay.SseFramer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.upstream.EmbeddedEngines;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The relay and the plain exchange over embedded client and engine connections, on the test thread. */
class PlainExchangeTest {
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private static final String SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

    private static String chunk(String s) {
        return Integer.toHexString(s.length()) + "\r\n" + s + "\r\n";
    }

    /** A started plain exchange routed to ep1, its request read off the engine connection. */
    private static PlainExchange started(ExchangeKit k, String body) {
        PlainExchange x = k.plain(body, ExchangeKit.request());
        x.start();
        k.decide(k.ep1);
        k.engineGot(0);
        return x;
    }

    @Test
    void sseIsRelayedEventByEventAtEverySplit() throws Exception {
        String events = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        for (int split = 1; split < events.length(); split++) {
            try (ExchangeKit k = new ExchangeKit("")) {
                started(k, BODY);
                k.engineSends(0, SSE_HEAD + chunk(events.substring(0, split)));
                String first = k.received().body.toString();
                int end = SseFramer.lastEventEnd(io.netty.buffer.Unpooled.copiedBuffer(events.substring(0, split),
                    java.nio.charset.StandardCharsets.UTF_8));
                assertEquals(end < 0 ? "" : events.substring(0, end), first, "only whole events reach the client (split " + split + ")");
                k.engineSends(0, chunk(events.substring(split)) + "0\r\n\r\n");
                assertEquals(events, k.received().body.toString(), "split " + split);
                assertTrue(k.ended);
                assertEquals(1, k.owner.done);
                assertTrue(k.owner.keepAlive);
                assertEquals(List.of(new Completion(k.ep1, Outcome.SUCCESS)), k.engines.outcomes);
            }
        }
    }

    @Test
    void midEventDeathEndsWithOneErrorFrameAndDone() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, SSE_HEAD + chunk("data: {\"a\":1}\n\ndata: {\"zzhalf"));
            k.engine(0).close();
            k.client.runPendingTasks();
            String got = k.received().body.toString();
            assertTrue(got.startsWith("data: {\"a\":1}\n\ndata: {\"error\":"), got);
            assertFalse(got.contains("zzhalf"), "the half event is never sent");
            assertTrue(got.endsWith("data: [DONE]\n\n"), got);
            assertTrue(k.ended);
            assertEquals(1, k.metrics.midStreamErrors.sum());
            assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE)), k.engines.outcomes, "a dying engine is charged");
        }
    }

    @Test
    void backPressure_pausesUpstreamUntilTheClientTakesTheBytes() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.writes.holding = true;
            int before = EmbeddedEngines.reads(k.engine(0));
            k.engineSends(0, SSE_HEAD + chunk("data: 1\n\n"));
            assertEquals(before, EmbeddedEngines.reads(k.engine(0)), "no upstream read while the client write is pending");
            k.writes.release();
            assertEquals(before + 1, EmbeddedEngines.reads(k.engine(0)), "the completed write asks for the next chunk");
            k.engineSends(0, chunk("data: 2\n\ndata: [DONE]\n\n") + "0\r\n\r\n");
            assertEquals("data: 1\n\ndata: 2\n\ndata: [DONE]\n\n", k.received().body.toString());
        }
    }

    @Test
    void m3_clientThatStopsReadingIsDisconnectedAndTheEngineIsNotBlamed() throws Exception {
        try (ExchangeKit k = new ExchangeKit("limits: {client_stall_timeout_ms: 5000}")) {
            started(k, BODY);
            k.writes.holding = true;
            k.engineSends(0, SSE_HEAD + chunk("data: 1\n\n"));
            k.advance(4_000); // twice the engine's idle timeout
            assertTrue(k.client.isOpen());
            assertEquals(0, k.owner.done);
            k.advance(1_000);
            assertFalse(k.client.isOpen(), "the stalled client is disconnected");
            assertFalse(k.engine(0).isOpen(), "its upstream is cancelled");
            assertEquals(1, k.owner.done);
            assertFalse(k.owner.keepAlive);
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes, "the healthy engine's breaker is not charged");
        }
    }

    /** B-11: an engine that sends its head, one event, then one byte a second of an event it never finishes. */
    @Test
    void b11_anEngineDrippingAnUnfinishedEventIsEndedAtTheIdleTimeoutFromTheLastCompleteEvent() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) { // upstream.idle_timeout_ms: 2000
            started(k, BODY);
            k.engineSends(0, SSE_HEAD + chunk("data: {\"a\":1}\n\n"));
            k.advance(1_000);
            k.engineSends(0, chunk("d"));
            k.advance(999);
            k.engineSends(0, chunk("a")); // 1.999 s after the last complete event: not yet
            assertEquals(0, k.owner.done, "within the idle timeout of the last complete event");
            for (int second = 0; second < 10 && k.owner.done == 0; second++) {
                k.advance(1_000); // every byte comes before the leg's own idle timer could fire
                k.engineSends(0, chunk("t"));
            }
            assertEquals(1, k.owner.done, "the stream ends; before the fix every byte restarted the idle timer for ever");
            String got = k.received().body.toString();
            assertTrue(got.startsWith("data: {\"a\":1}\n\ndata: {\"error\":") && got.contains("no complete event"), got);
            assertFalse(got.contains("dat\n") || got.contains("data: dat"), "the unfinished event never reaches the client");
            assertTrue(got.endsWith("data: [DONE]\n\n"), got);
            assertTrue(k.ended);
            assertFalse(k.engine(0).isOpen(), "the dripping engine's connection is closed");
            assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE)), k.engines.outcomes, "the engine is charged");
            String metrics = k.metrics.render();
            assertTrue(metrics.contains("kvgate_upstream_errors_total{cause=\"no_progress\",endpoint=\"10.0.0.1:8000\"} 1"), metrics);
            assertTrue(metrics.contains("kvgate_responses_incomplete_total{cause=\"no_progress\"} 1"), metrics);
        }
    }

    /** B-11: complete events at any pace are progress: a slow but live stream is never cut. */
    @Test
    void b11_aSlowStreamOfCompleteEventsIsNotEnded() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, SSE_HEAD);
            for (int i = 0; i < 5; i++) {
                k.advance(1_500);
                k.engineSends(0, chunk("data: {\"i\":" + i + "}\n"));
                k.advance(400);
                k.engineSends(0, chunk("\n")); // completes the event 1.9 s after the previous one
            }
            k.engineSends(0, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            assertEquals(1, k.owner.done);
            assertTrue(k.received().body.toString().endsWith("data: {\"i\":4}\n\ndata: [DONE]\n\n"));
            assertEquals(List.of(new Completion(k.ep1, Outcome.SUCCESS)), k.engines.outcomes);
        }
    }

    /** B-10: an answer cut short keeps the status the client saw and is counted as incomplete, by cause. */
    @Test
    void b10_aTruncatedAnswerAndAStalledClientAreCountedIncomplete() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"choices\":");
            k.engine(0).close();
            k.client.runPendingTasks();
            k.received();
            assertEquals(200, k.head.status().code());
            assertFalse(k.client.isOpen(), "a truncated body can only be signalled by closing");
            String metrics = k.metrics.render();
            assertTrue(metrics.contains("status=\"200\"} 1"), metrics);
            assertTrue(metrics.contains("kvgate_responses_incomplete_total{cause=\"mid_body\"} 1"), metrics);
        }
        try (ExchangeKit k = new ExchangeKit("limits: {client_stall_timeout_ms: 5000}")) {
            started(k, BODY);
            k.writes.holding = true;
            k.engineSends(0, SSE_HEAD + chunk("data: 1\n\n"));
            k.advance(5_000);
            assertFalse(k.client.isOpen());
            String metrics = k.metrics.render();
            assertTrue(metrics.contains("status=\"200\"} 1"), metrics);
            assertTrue(metrics.contains("kvgate_responses_incomplete_total{cause=\"client_stall\"} 1"), metrics);
        }
    }

    @Test
    void engineErrorInTheFlatShapeIsNormalizedAtEverySplit() throws Exception {
        String err = "{\"object\":\"error\",\"message\":\"prompt too long\",\"type\":\"BadRequestError\",\"code\":400}";
        String wire = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: " + err.length() + "\r\n\r\n" + err;
        for (int split = 1; split < wire.length(); split++) {
            try (ExchangeKit k = new ExchangeKit("")) {
                started(k, BODY);
                k.engineSends(0, wire.substring(0, split));
                k.engineSends(0, wire.substring(split));
                k.received();
                assertEquals(400, k.head.status().code());
                assertTrue(k.body.toString().equals("{\"error\":{\"message\":\"prompt too long\",\"type\":\"invalid_request_error\","
                    + "\"param\":null,\"code\":null}}"),
                    k.body.toString());
                assertEquals(List.of(new Completion(k.ep1, Outcome.SUCCESS)), k.engines.outcomes, "4xx is the request's fault");
            }
        }
    }

    @Test
    void l2_headersListedInConnectionAndTheClientsAuthorizationAreNotForwarded() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            k.plain(BODY, ExchangeKit.request("connection", "keep-alive, X-Secret", "x-secret", "s", "authorization", "Bearer k1",
                "x-kvgate-admin-token", "t", "keep-alive", "timeout=5", "x-trace", "kept", "x-request-id", "client-1")).start();
            k.decide(k.ep1);
            String head = k.engineGot(0).toLowerCase();
            assertFalse(head.contains("x-secret"), head);
            assertFalse(head.contains("authorization"), head);
            assertFalse(head.contains("x-kvgate"), head);
            assertFalse(head.contains("keep-alive: timeout"), head);
            assertTrue(head.contains("x-trace: kept"), head);
            assertFalse(head.contains("client-1"), "L3: the engine gets a gateway-unique id: " + head);
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: x-internal\r\nx-internal: 1\r\n\r\nok");
            k.received();
            assertEquals("client-1", k.head.headers().get("x-request-id"), "the client keeps its id");
            assertFalse(k.head.headers().contains("x-internal"));
        }
    }

    @Test
    void connectFailureReroutesWithTheWholeBody() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            k.engines.failConnects = 1;
            k.plain(BODY, ExchangeKit.request()).start();
            k.decide(k.ep1);
            assertEquals(1, k.routing.pending.size(), "re-routed after the connect failure");
            k.decide(k.ep2);
            assertTrue(k.engineGot(0).endsWith("\r\n\r\n" + BODY));
            assertEquals(1, k.metrics.connectRetries.sum());
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            assertEquals("ok", k.received().body.toString());
            assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE), new Completion(k.ep2, Outcome.SUCCESS)), k.engines.outcomes);
        }
    }

    @Test
    void l8_anExceptionBeforeTheLegReturnsTheRoutedEndpoint() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            k.plain(BODY, ExchangeKit.request()).start();
            k.engines.throwOnConnect = true; // a bug between the decision and the leg
            k.decide(k.ep1);
            k.received();
            assertEquals(500, k.head.status().code());
            assertEquals(1, k.owner.done);
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes, "the routed endpoint's load is returned");
        }
    }

    @Test
    void drainEndsALiveStreamWithAnErrorFrameAndDone() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, SSE_HEAD + chunk("data: 1\n\n"));
            k.live.endAll(0);
            k.client.runPendingTasks();
            String got = k.received().body.toString();
            assertTrue(got.startsWith("data: 1\n\ndata: {\"error\":") && got.contains("shutting down") && got.endsWith("data: [DONE]\n\n"), got);
            assertTrue(k.ended);
            assertFalse(k.owner.keepAlive);
            assertFalse(k.engine(0).isOpen(), "the engine request is cancelled");
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes);
        }
    }

    @Test
    void drainAnswersARequestStillRouting503() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            k.plain(BODY, ExchangeKit.request()).start();
            k.live.endAll(0);
            k.client.runPendingTasks();
            assertEquals(503, k.received().head.status().code());
            k.decide(k.ep1); // the late decision returns the endpoint at once
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes);
            assertTrue(k.engines.opened.isEmpty());
        }
    }

    @Test
    void clientGoneWhileRoutingReturnsTheEndpointAndCancelsNothing() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            PlainExchange x = k.plain(BODY, ExchangeKit.request());
            x.start();
            x.onClientGone();
            k.decide(k.ep1);
            assertTrue(k.engines.opened.isEmpty());
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes);
            assertEquals(1, k.metrics.clientDisconnectsMidRequest.sum());
        }
    }

    @Test
    void engine5xxIsRelayedNormalizedAndChargesTheEndpoint() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy");
            k.received();
            assertEquals(503, k.head.status().code());
            assertTrue(k.body.toString().contains("\"message\":\"busy\""), k.body.toString());
            assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE)), k.engines.outcomes);
        }
    }

    @Test
    void twoClientsWithTheSameRequestIdGetDistinctEngineIds() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            k.plain(BODY, ExchangeKit.request("x-request-id", "same")).start();
            k.plain(BODY, ExchangeKit.request("x-request-id", "same")).start();
            k.decide(k.ep1);
            k.decide(k.ep1);
            String a = idOf(k.engineGot(0));
            String b = idOf(k.engineGot(1));
            assertNotEquals(a, b);
        }
    }

    private static String idOf(String head) {
        for (String line : head.split("\r\n")) {
            if (line.toLowerCase().startsWith("x-request-id:")) {
                return line.substring(13).strip();
            }
        }
        throw new AssertionError("no x-request-id in " + head);
    }

    // ---- heads forwarded as bytes --------------------------------------------------------------------------------

    @Test
    void aJsonAnswerIsRelayedWithItsHeadAsBytesAtEverySplit() throws Exception {
        String json = "{\"id\":\"cmpl-1\",\"choices\":[{\"text\":\"ok\"}]}";
        String wire = "HTTP/1.1 200 OK\r\ndate: Mon, 01 Dec 2026 00:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: " + json.length()
            + "\r\ncontent-type: application/json\r\nconnection: keep-alive\r\nx-request-id: engine-id\r\n\r\n" + json;
        for (int split = 1; split < wire.length(); split++) {
            try (ExchangeKit k = new ExchangeKit("")) {
                k.plain(BODY, ExchangeKit.request("x-request-id", "client-9")).start();
                k.decide(k.ep1);
                k.engineGot(0);
                k.engineSends(0, wire.substring(0, split));
                k.engineSends(0, wire.substring(split));
                k.received();
                assertEquals(200, k.head.status().code(), "split " + split);
                assertEquals("client-9", k.head.headers().get("x-request-id"));
                assertEquals("uvicorn", k.head.headers().get("server"));
                assertEquals(String.valueOf(json.length()), k.head.headers().get("content-length"), "the engine's length is kept");
                assertFalse(k.head.headers().contains("connection"));
                assertFalse(k.head.headers().contains("transfer-encoding"));
                assertEquals(json, k.body.toString());
                assertTrue(k.ended);
                assertTrue(k.owner.keepAlive);
                assertEquals(List.of(new Completion(k.ep1, Outcome.SUCCESS)), k.engines.outcomes);
                assertEquals(List.of(k.engine(0)), k.engines.released, "the engine connection goes back to the pool");
            }
        }
    }

    @Test
    void aChunkedJsonAnswerIsRelayedChunked() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
                + chunk("{\"choices\":") + chunk("[]}") + "0\r\n\r\n");
            k.received();
            assertEquals("chunked", k.head.headers().get("transfer-encoding"));
            assertEquals("{\"choices\":[]}", k.body.toString());
            assertTrue(k.ended);
        }
    }

    @Test
    void aMalformedEngineHeadIsA502ThatChargesTheEngine() throws Exception {
        for (String bad : List.of("HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\ncontent-length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK\ncontent-length: 2\n\nok")) {
            try (ExchangeKit k = new ExchangeKit("")) {
                started(k, BODY);
                k.engineSends(0, bad);
                k.received();
                assertEquals(502, k.head.status().code(), bad);
                assertTrue(k.body.toString().contains("upstream_disconnected"), k.body.toString());
                assertFalse(k.engine(0).isOpen(), "the connection is never reused");
                assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE)), k.engines.outcomes);
                assertTrue(k.owner.keepAlive, "the client's connection carries on");
            }
        }
    }

    @Test
    void aMalformedChunkMidBodyEndsTheStreamWithAnErrorFrame() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            k.engineSends(0, SSE_HEAD + chunk("data: 1\n\n"));
            k.engineSends(0, "zz\r\n");
            String got = k.received().body.toString();
            assertTrue(got.startsWith("data: 1\n\ndata: {\"error\":") && got.endsWith("data: [DONE]\n\n"), got);
            assertTrue(k.ended);
            assertEquals(List.of(new Completion(k.ep1, Outcome.FAILURE)), k.engines.outcomes, "a broken engine is charged");
        }
    }

    @Test
    void anSseAnswerThatDeclaresALengthIsChunkedSinceTheRelayMayChangeIt() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            started(k, BODY);
            String events = "data: {\"a\":1}\n\n"; // no [DONE]: the gateway adds an error event and [DONE]
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + events.length()
                + "\r\n\r\n" + events);
            k.received();
            assertFalse(k.head.headers().contains("content-length"));
            assertTrue(k.body.toString().startsWith(events) && k.body.toString().endsWith("data: [DONE]\n\n"), k.body.toString());
            assertTrue(k.ended);
        }
    }
}
