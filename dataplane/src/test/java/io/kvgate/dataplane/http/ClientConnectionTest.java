package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.chatPost;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.wire.EngineResponseDecoder;
import io.kvgate.dataplane.wire.RelayHead;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The client connection and the request stages behind it over an {@link EmbeddedChannel}, split at every byte, on channel time. */
class ClientConnectionTest {
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private FrontDoorHarness h;

    @BeforeEach
    void setUp() throws Exception {
        h = new FrontDoorHarness();
    }

    @AfterEach
    void tearDown() {
        h.close();
    }

    private static String statusLine(String out) {
        return out.isEmpty() ? "" : out.substring(0, out.indexOf("\r\n"));
    }

    /** Answers the in-flight exchange with a small JSON 200 and tells the front door it is done. */
    private void answer(int i, boolean keepAlive) {
        answer(h, i, keepAlive);
    }

    private static void answer(FrontDoorHarness on, int i, boolean keepAlive) {
        on.contexts.get(i).writeAndFlush(small200());
        on.owners.get(i).onExchangeDone(keepAlive);
    }

    private static FullHttpResponse small200() {
        var r = new io.netty.handler.codec.http.DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK,
            Unpooled.copiedBuffer("{}", StandardCharsets.US_ASCII));
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 2);
        return r;
    }

    /** Relays an engine's chunked SSE answer through the front door's context the way the exchange layer does. */
    private void relayChunkedEngineAnswer(int i) {
        ChannelHandlerContext ctx = h.contexts.get(i);
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(ascii("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            + "9\r\ndata: a\n\n\r\n0\r\n\r\n"));
        ResponseHead head = engine.readInbound();
        ctx.write(RelayHead.relay(ctx.alloc(), head, "rid", null, false, false));
        head.release();
        ctx.write(engine.readInbound());
        ctx.writeAndFlush(engine.readInbound());
        engine.finishAndReleaseAll();
        h.owners.get(i).onExchangeDone(true);
    }

    // ---- split sweeps ----------------------------------------------------------------------------------------

    @Test
    void aChatPostSplitAtEveryByteIsParsedOnceWithTheSameBody() {
        byte[] req = chatPost(BODY, AUTH).getBytes(StandardCharsets.UTF_8);
        for (int split = 1; split < req.length; split++) {
            EmbeddedChannel ch = h.channel();
            ch.writeInbound(Unpooled.wrappedBuffer(req, 0, split));
            ch.writeInbound(Unpooled.wrappedBuffer(req, split, req.length - split));
            assertEquals(split, h.started.size(), "split at " + split);
            ParsedRequest p = h.started.get(split - 1);
            assertEquals("m", p.model());
            assertTrue(p.chat());
            assertEquals("", output(ch), "nothing written before the exchange answers (split " + split + ")");
            ch.finishAndReleaseAll();
        }
    }

    @Test
    void aChatPostFedOneByteAtATimeIsParsedOnce() {
        byte[] req = chatPost(BODY, AUTH).getBytes(StandardCharsets.UTF_8);
        EmbeddedChannel ch = h.channel();
        for (int i = 0; i < req.length; i++) {
            ch.writeInbound(Unpooled.wrappedBuffer(req, i, 1));
            assertEquals(i == req.length - 1 ? 1 : 0, h.started.size(), "after byte " + i);
        }
        assertEquals("m", h.started.get(0).model());
        ch.finishAndReleaseAll();
    }

    @Test
    void aRequestThatStraddlesAReloadIsJudgedByTheConfigurationOfItsHead() throws Exception {
        // The head arrives under max_body_bytes 4096 and key k1; a reload then lowers the limit and changes the key
        // before the body. The request keeps the generation its head captured; the next request gets the new one.
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + "x".repeat(1500) + "\"}]}";
        String req = chatPost(body, AUTH);
        int headEnd = req.indexOf("\r\n\r\n") + 4;
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(req.substring(0, headEnd)));
        h.applied.set(io.kvgate.control.config.GatewayConfig.parse(FrontDoorHarness.BASE_YAML
            .replace("max_body_bytes: 4096", "max_body_bytes: 1024").replace("api_keys: [k1]", "api_keys: [k2]")));
        ch.writeInbound(ascii(req.substring(headEnd)));
        assertEquals(1, h.started.size(), "read, validated and started under the head's limits");
        assertEquals(body, h.bodies.get(0));
        answer(0, true);
        output(ch);
        ch.writeInbound(ascii(req));
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)), "the next request is judged by the reload");
        ch.finishAndReleaseAll();
    }

    @Test
    void everyRefusalOnTheHeadHoldsForEverySplitOfTheHead() {
        String head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n";
        byte[] req = head.getBytes(StandardCharsets.US_ASCII);
        for (int split = 1; split < req.length; split++) {
            EmbeddedChannel ch = h.channel();
            ch.writeInbound(Unpooled.wrappedBuffer(req, 0, split));
            ch.writeInbound(Unpooled.wrappedBuffer(req, split, req.length - split));
            assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)), "split at " + split);
            assertFalse(ch.isOpen(), "a refused head with a body to come closes the connection (split " + split + ")");
            ch.finishAndReleaseAll();
        }
        assertEquals(0, h.started.size());
    }

    @Test
    void theForwardedBodyCarriesTheAnswerRewritesEditsAfterTheEngineFieldRemoval() throws Exception {
        try (FrontDoorHarness aliased = new FrontDoorHarness(FrontDoorHarness.BASE_YAML
            + "  - name: alias\n    models: [{name: gpt-4o-mini, served_as: qwen3}]\n    endpoints:\n      - url: http://127.0.0.1:3\n")) {
            String body = "{\"kv_transfer_params\":{\"remote_host\":\"10.9.9.9\"},\"model\":\"gpt-4o-mini\",\"stream\":true,"
                + "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
            byte[] req = chatPost(body, AUTH).getBytes(StandardCharsets.UTF_8);
            for (int split = 1; split < req.length; split += 7) {
                EmbeddedChannel ch = aliased.channel();
                ch.writeInbound(Unpooled.wrappedBuffer(req, 0, split));
                ch.writeInbound(Unpooled.wrappedBuffer(req, split, req.length - split));
                ParsedRequest p = aliased.started.get(aliased.started.size() - 1);
                assertEquals("{\"model\":\"qwen3\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    + "\"stream_options\":{\"include_usage\":true}}", aliased.bodies.get(aliased.bodies.size() - 1), "split " + split);
                assertEquals("gpt-4o-mini", p.model(), "the exchange keeps the client's name");
                assertEquals("gpt-4o-mini", p.answerRewrite().clientModel());
                assertTrue(p.answerRewrite().stripUsage());
                ch.finishAndReleaseAll();
            }
        }
        // a request that needs nothing is handed on as it came, with no rewrite
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH)));
        assertEquals(BODY, h.bodies.get(0));
        assertEquals(null, h.started.get(0).answerRewrite());
        ch.finishAndReleaseAll();
    }

    // ---- H1 / M2: memory and connections -------------------------------------------------------------------

    @Test
    void h1_headOnlyConnectionsDoNotReserveBodyMemory() {
        String head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH
            + "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n";
        EmbeddedChannel a = h.channel();
        EmbeddedChannel b = h.channel();
        a.writeInbound(ascii(head));
        b.writeInbound(ascii(head));
        // Before the fix each head reserved a Content-Length-sized buffer (8 MiB by default) until the read deadline.
        assertTrue(h.alloc.metric().usedHeapMemory() < 1024,
            "two authorized head-only requests hold " + h.alloc.metric().usedHeapMemory() + " B");
        a.writeInbound(ascii("{\"model\":\"m\","));
        long held = h.alloc.metric().usedHeapMemory();
        assertTrue(held >= 256 && held < 1024, "the body buffer follows received bytes, held " + held + " B");
        a.finishAndReleaseAll();
        b.finishAndReleaseAll();
    }

    @Test
    void m2_maxConnectionsIsEnforcedAndFreedOnClose() {
        EmbeddedChannel a = h.channel();
        EmbeddedChannel b = h.channel();
        EmbeddedChannel c = h.channel();
        EmbeddedChannel over = h.channel();
        assertTrue(a.isOpen() && b.isOpen() && c.isOpen());
        assertFalse(over.isOpen(), "the 4th connection over max_connections=3 is closed on accept");
        assertEquals(3, h.connections.open());
        a.close();
        assertEquals(2, h.connections.open());
        EmbeddedChannel again = h.channel();
        assertTrue(again.isOpen(), "a closed connection frees its slot");
        assertTrue(h.metrics.render().contains("kvgate_shed_total{reason=\"max_connections\"} 1"));
        for (EmbeddedChannel ch : new EmbeddedChannel[] {b, c, again}) {
            ch.finishAndReleaseAll();
        }
    }

    @Test
    void m2_headSlowlorisGets408AndClose() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nX-A: "));
        ch.advanceTimeBy(999, TimeUnit.MILLISECONDS);
        ch.writeInbound(ascii("b")); // trickling does not restart the clock
        ch.runScheduledPendingTasks();
        assertTrue(ch.isOpen());
        ch.advanceTimeBy(1, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        String out = output(ch);
        assertEquals("HTTP/1.1 408 Request Timeout", statusLine(out));
        assertTrue(out.contains("within 1000 ms"), out);
        assertFalse(ch.isOpen());
        assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"request_read_timeout\"} 1"));
    }

    @Test
    void bodyTrickleGets408() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Length: 100\r\n\r\n{"));
        ch.advanceTimeBy(1000, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        assertEquals("HTTP/1.1 408 Request Timeout", statusLine(output(ch)));
        assertFalse(ch.isOpen());
    }

    @Test
    void anIdleKeepAliveConnectionIsNotTimedOutByTheReadDeadline() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
        ch.advanceTimeBy(5_000, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        assertEquals("", output(ch), "between requests only client_idle_timeout_ms applies");
        assertTrue(ch.isOpen());
        ch.finishAndReleaseAll();
    }

    /**
     * The read timer is kept across the requests of a keep-alive connection: the wake-up the first request left
     * (due at 1 s) fires while the second is being read (started at 0.6 s) and does not time it out early; the
     * second gets its 408 at its own deadline, 1 s after its first byte.
     */
    @Test
    void aWakeUpLeftByAnEarlierRequestTimesTheNextOneFromItsOwnFirstByte() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
        ch.advanceTimeBy(600, TimeUnit.MILLISECONDS);
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"));
        ch.advanceTimeBy(400, TimeUnit.MILLISECONDS); // t = 1 s: the first request's wake-up
        ch.runScheduledPendingTasks();
        assertEquals("", output(ch));
        assertTrue(ch.isOpen(), "the request being read started at 0.6 s: not due yet");
        ch.advanceTimeBy(599, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
        assertTrue(ch.isOpen());
        ch.advanceTimeBy(1, TimeUnit.MILLISECONDS); // t = 1.6 s
        ch.runScheduledPendingTasks();
        assertEquals("HTTP/1.1 408 Request Timeout", statusLine(output(ch)));
        assertFalse(ch.isOpen());
    }

    // ---- client_idle_timeout_ms (the same wake-up as the read deadline; the clock is injected) ----------------

    private static final String IDLE_YAML = FrontDoorHarness.BASE_YAML.replace("request_read_timeout_ms: 1000",
        "request_read_timeout_ms: 1000\n  client_idle_timeout_ms: 3000");

    /** Advances the frozen clock in steps of at most the read timeout, running the wake-ups due on the way. */
    private static void advance(EmbeddedChannel ch, long ms) {
        for (long left = ms; left > 0; left -= Math.min(left, 500)) {
            ch.advanceTimeBy(Math.min(left, 500), TimeUnit.MILLISECONDS);
            ch.runScheduledPendingTasks();
        }
    }

    @Test
    void anIdleKeepAliveConnectionIsClosedAtTheIdleTimeoutAfterItsLastResponse() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML)) {
            EmbeddedChannel ch = idle.channel();
            advance(ch, 2_000);
            ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
            assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
            advance(ch, 2_999);
            assertTrue(ch.isOpen(), "idle for 2.999 s of 3: the time before the request does not count");
            advance(ch, 1);
            assertFalse(ch.isOpen(), "closed 3 s after its last response");
            assertEquals("", output(ch), "closed without a response: no request was in progress");
        }
    }

    @Test
    void aConnectionThatNeverSendsARequestIsClosedAtTheIdleTimeout() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML)) {
            EmbeddedChannel ch = idle.channel();
            advance(ch, 2_500);
            assertTrue(ch.isOpen());
            advance(ch, 1_000);
            assertFalse(ch.isOpen());
        }
    }

    @Test
    void aConnectionWhoseExchangeOutlastsTheIdleTimeoutIsNotClosed() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML)) {
            EmbeddedChannel ch = idle.channel();
            ch.writeInbound(ascii(chatPost(BODY, AUTH)));
            assertEquals(1, idle.started.size());
            advance(ch, 10_000);
            assertTrue(ch.isOpen(), "busy: an exchange in progress is not idle");
            answer(idle, 0, true);
            assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
            advance(ch, 2_999);
            assertTrue(ch.isOpen(), "the idle timeout runs from the end of the exchange");
            advance(ch, 1);
            assertFalse(ch.isOpen());
        }
    }

    /** Bytes still queued for a slow reader (here: written, not yet flushed) are a response in progress, not idleness. */
    @Test
    void aConnectionWithResponseBytesStillQueuedIsNotIdle() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML)) {
            EmbeddedChannel ch = idle.channel();
            ch.writeInbound(ascii(chatPost(BODY, AUTH)));
            idle.contexts.get(0).write(small200()); // not flushed: still queued
            idle.owners.get(0).onExchangeDone(true);
            advance(ch, 6_000);
            assertTrue(ch.isOpen(), "the response is still queued");
            ch.flush();
            assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
            advance(ch, 3_000);
            assertFalse(ch.isOpen(), "idle from the last wake-up that saw it queued");
        }
    }

    @Test
    void aPartialHeadIsTimedByTheReadDeadlineNotClosedAsIdle() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML.replace("client_idle_timeout_ms: 3000",
            "client_idle_timeout_ms: 500"))) {
            EmbeddedChannel ch = idle.channel();
            ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"));
            advance(ch, 999);
            assertTrue(ch.isOpen(), "a request is being read: the idle timeout (0.5 s) does not apply");
            advance(ch, 1);
            assertEquals("HTTP/1.1 408 Request Timeout", statusLine(output(ch)));
            assertFalse(ch.isOpen());
        }
    }

    @Test
    void eachRequestRestartsTheIdleTimeout() throws Exception {
        try (FrontDoorHarness idle = new FrontDoorHarness(IDLE_YAML)) {
            EmbeddedChannel ch = idle.channel();
            for (int i = 0; i < 4; i++) {
                advance(ch, 2_500);
                assertTrue(ch.isOpen(), "request " + i);
                ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
                assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
            }
            advance(ch, 3_000);
            assertFalse(ch.isOpen());
        }
    }

    // ---- limits ----------------------------------------------------------------------------------------------

    @Test
    void declaredBodyOverTheLimitIs413BeforeAnyBodyByte() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Length: 4097\r\n\r\n"));
        String out = output(ch);
        assertEquals("HTTP/1.1 413 Request Entity Too Large", statusLine(out));
        assertTrue(out.contains("exceeds the limit of 4096 bytes"), out);
        assertFalse(ch.isOpen());
    }

    @Test
    void chunkedBodyOverTheLimitIs413() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nTransfer-Encoding: chunked\r\n\r\n"));
        String chunk = "a".repeat(4000);
        ch.writeInbound(ascii(Integer.toHexString(chunk.length()) + "\r\n" + chunk + "\r\n"));
        assertTrue(ch.isOpen());
        ch.writeInbound(ascii(Integer.toHexString(chunk.length()) + "\r\n" + chunk + "\r\n"));
        assertEquals("HTTP/1.1 413 Request Entity Too Large", statusLine(output(ch)));
        assertFalse(ch.isOpen());
    }

    @Test
    void longRequestLineIs414AndLongHeadersAre431() {
        EmbeddedChannel a = h.channel();
        a.writeInbound(ascii("GET /" + "a".repeat(9000) + " HTTP/1.1\r\n\r\n"));
        assertEquals("HTTP/1.1 414 Request-URI Too Long", statusLine(output(a)));
        assertFalse(a.isOpen());
        EmbeddedChannel b = h.channel();
        b.writeInbound(ascii("GET /health HTTP/1.1\r\nX-Big: " + "a".repeat(17_000) + "\r\n\r\n"));
        assertEquals("HTTP/1.1 431 Request Header Fields Too Large", statusLine(output(b)));
        assertFalse(b.isOpen());
    }

    // ---- H8 / L4 / L5: what the head alone decides ------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"POST /v1/chat/completions", "POST /v1/completions", "POST /v1/chat/completions/render",
        "POST /v1/completions/render", "POST /kvgate/v1/chat/completions/render", "POST /kvgate/v1/completions/render", "GET /v1/models", "GET /metrics", "POST /v1/embeddings"})
    void h8_everyV1RouteAndMetricsNeedTheApiKey(String methodAndPath) {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(methodAndPath + " HTTP/1.1\r\nHost: x\r\n\r\n"));
        String out = output(ch);
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(out));
        assertTrue(out.contains("\"type\":\"authentication_error\""), out);
        assertTrue(ch.isOpen(), "a refused head without a body keeps the connection");
        ch.writeInbound(ascii(methodAndPath + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n\r\n"));
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(output(ch)));
        ch.finishAndReleaseAll();
    }

    @Test
    void h8_renderRoutesRenderOnlyWithTheApiKey() {
        String tokenIds = "{\"model\":\"m\",\"prompt\":[11,12,13]}";
        String render = chatPost(tokenIds).replace("/v1/chat/completions", "/kvgate/v1/completions/render");
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(render));
        String refused = output(ch);
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(refused));
        assertFalse(refused.contains("prompt_token_ids"), refused);
        EmbeddedChannel ok = h.channel();
        ok.writeInbound(ascii(chatPost(tokenIds, AUTH).replace("/v1/chat/completions", "/kvgate/v1/completions/render")));
        String rendered = output(ok);
        assertEquals("HTTP/1.1 200 OK", statusLine(rendered));
        assertTrue(rendered.contains("\"prompt_token_ids\":[11,12,13]"), rendered);
        ok.finishAndReleaseAll();
    }

    @Test
    void aChatRenderOnARuleWithoutATokenizerIsA400NamingTheKey() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH).replace("/v1/chat/completions", "/kvgate/v1/chat/completions/render")));
        String out = output(ch);
        assertEquals("HTTP/1.1 400 Bad Request", statusLine(out));
        assertTrue(out.contains("rules[].tokenizer"), out);
        ch.finishAndReleaseAll();
    }

    @Test
    void healthNeedsNoKey() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
        ch.finishAndReleaseAll();
    }

    @Test
    void l5_metricsWithTheKeyIsServed() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /metrics HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\n\r\n"));
        String out = output(ch);
        assertEquals("HTTP/1.1 200 OK", statusLine(out));
        assertTrue(out.contains("# TYPE kvgate_open_connections gauge"), out); // families with no sample yet are left out
        ch.finishAndReleaseAll();
    }

    @Test
    void l4_unauthorizedExpectContinueGetsNo100AndTheBodyIsNeverRead() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"));
        String out = output(ch);
        assertFalse(out.contains("100 Continue"), out);
        assertEquals("HTTP/1.1 401 Unauthorized", statusLine(out));
        assertTrue(out.toLowerCase().contains("connection: close"), out);
        assertFalse(ch.isOpen());
        assertEquals(0, h.alloc.metric().usedHeapMemory(), "no body buffer was ever allocated");
    }

    @Test
    void l4_wrongContentTypeIs415OnTheHeadWithout100Continue() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nExpect: 100-continue\r\n"
            + "Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n"));
        String out = output(ch);
        assertFalse(out.contains("100 Continue"), out);
        assertEquals("HTTP/1.1 415 Unsupported Media Type", statusLine(out));
        assertFalse(ch.isOpen());
    }

    @Test
    void authorizedExpectContinueGets100ThenTheRequestIsRead() {
        EmbeddedChannel ch = h.channel();
        String req = chatPost(BODY, AUTH, "Expect: 100-continue");
        int headEnd = req.indexOf("\r\n\r\n") + 4;
        ch.writeInbound(ascii(req.substring(0, headEnd)));
        assertEquals("HTTP/1.1 100 Continue", statusLine(output(ch)));
        ch.writeInbound(ascii(req.substring(headEnd)));
        assertEquals(1, h.started.size());
        ch.finishAndReleaseAll();
    }

    @Test
    void wrongMethodIs405WithAllow() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\n\r\n"));
        String out = output(ch);
        assertEquals("HTTP/1.1 405 Method Not Allowed", statusLine(out));
        assertTrue(out.toLowerCase().contains("allow: post"), out);
        ch.finishAndReleaseAll();
    }

    // ---- H2: label cardinality -------------------------------------------------------------------------------

    @Test
    void h2_clientModelStringsNeverBecomeMetricLabels() {
        EmbeddedChannel ch = h.channel();
        for (int i = 0; i < 50; i++) {
            String body = "{\"model\":\"junk-" + i + "\",\"messages\":[]}";
            ch.writeInbound(ascii(chatPost(body, AUTH))); // 404 unknown model
            output(ch);
            EmbeddedChannel unauthorized = h.channel();
            unauthorized.writeInbound(ascii(chatPost(body))); // 401 (and close: a body was announced)
            assertFalse(unauthorized.isOpen());
        }
        String metrics = h.metrics.render();
        assertFalse(metrics.contains("junk-"), metrics);
        assertTrue(metrics.contains("kvgate_requests_total{model=\"unknown\",rule=\"\",status=\"404\"} 50"), metrics);
        assertTrue(metrics.contains("kvgate_requests_total{model=\"unknown\",rule=\"\",status=\"401\"} 50"), metrics);
        ch.finishAndReleaseAll();
    }

    /** A configured model's refusals are counted under its own label (and its rule once resolved), not "unknown". */
    @Test
    void h2_refusalsOfAConfiguredModelCarryItsLabel() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost("{\"model\":\"small\",\"n\":5,\"messages\":[]}", AUTH))); // over max_n 4
        assertEquals("HTTP/1.1 400 Bad Request", statusLine(output(ch)));
        ch.writeInbound(ascii(chatPost("{\"model\":\"m\",\"n\":0,\"messages\":[]}", AUTH))); // n below 1
        assertEquals("HTTP/1.1 400 Bad Request", statusLine(output(ch)));
        String metrics = h.metrics.render();
        assertTrue(metrics.contains("kvgate_requests_total{model=\"small\",rule=\"small\",status=\"400\"} 1"), metrics);
        // Refused by the body's validation, before its rule was resolved: the model is known, the rule is not.
        assertTrue(metrics.contains("kvgate_requests_total{model=\"m\",rule=\"\",status=\"400\"} 1"), metrics);
        assertFalse(metrics.contains("model=\"unknown\",rule=\"\",status=\"400\""), metrics);
        ch.finishAndReleaseAll();
    }

    @Test
    void h2_aConfiguredModelIsItsOwnLabel() {
        h.metrics.request("chat", "m", 200, 1);
        h.metrics.request("chat", "other", 200, 1);
        String metrics = h.metrics.render();
        assertTrue(metrics.contains("kvgate_requests_total{model=\"m\",rule=\"chat\",status=\"200\"} 1"), metrics);
        assertTrue(metrics.contains("kvgate_requests_total{model=\"unknown\",rule=\"chat\",status=\"200\"} 1"), metrics);
    }

    // ---- M9: explain -----------------------------------------------------------------------------------------

    @Test
    void m9_explainIsHonouredOnlyWithTheAdminToken() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH, "X-Kvgate-Explain: 1")));
        assertFalse(h.started.get(0).explain(), "no admin token: no explanation");
        answer(0, true);
        ch.writeInbound(ascii(chatPost(BODY, AUTH, "X-Kvgate-Explain: 1", "X-Kvgate-Admin-Token: wrong")));
        assertFalse(h.started.get(1).explain(), "wrong admin token: no explanation");
        answer(1, true);
        ch.writeInbound(ascii(chatPost(BODY, AUTH, "X-Kvgate-Explain: 1", "X-Kvgate-Admin-Token: admin-token-0123456789")));
        assertTrue(h.started.get(2).explain());
        ch.finishAndReleaseAll();
    }

    // ---- pipelining ------------------------------------------------------------------------------------------

    @Test
    void pipelinedRequestsAreAnsweredInOrder() {
        EmbeddedChannel ch = h.channel();
        String one = chatPost(BODY, AUTH);
        ch.writeInbound(ascii(one + one + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals(1, h.started.size(), "the second request waits for the first response");
        assertFalse(ch.config().isAutoRead(), "reading pauses while requests are queued");
        answer(0, true);
        assertEquals(2, h.started.size());
        answer(1, true);
        String out = output(ch);
        assertEquals(3, out.split("HTTP/1.1 200 OK", -1).length - 1, out);
        assertTrue(out.endsWith("{\"status\":\"ok\"}"), out);
        assertTrue(ch.config().isAutoRead());
        ch.finishAndReleaseAll();
    }

    @Test
    void l9_pipeliningLimitCountsRequestsNotChunks() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH)));
        StringBuilder chunked = new StringBuilder("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + AUTH
            + "\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (char c : BODY.toCharArray()) {
            chunked.append("1\r\n").append(c).append("\r\n"); // 57 one-byte chunks + the last
        }
        chunked.append("0\r\n\r\n");
        ch.writeInbound(ascii(chunked.toString() + chunked));
        assertTrue(ch.isOpen(), "two pipelined requests of ~60 chunks each are within the limit of 64 requests");
        answer(0, true);
        assertEquals(2, h.started.size());
        assertEquals("m", h.started.get(1).model());
        answer(1, true);
        assertEquals(3, h.started.size());
        ch.finishAndReleaseAll();
    }

    @Test
    void moreThanTheLimitOfPipelinedRequestsClosesTheConnection() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH)));
        StringBuilder many = new StringBuilder();
        for (int i = 0; i <= ClientConnection.MAX_PIPELINED_REQUESTS; i++) {
            many.append("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        }
        ch.writeInbound(ascii(many.toString()));
        assertFalse(ch.isOpen());
        assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"pipeline_overflow\"} 1"));
    }

    // ---- B-3: a client that does not take its answers is not read ---------------------------------------------

    private static final String HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

    private static int answers(String out) {
        return out.split("HTTP/1.1 ", -1).length - 1;
    }

    /** The client's unsent bytes over the connection's high-water mark, or back under the low one (as Netty tells it). */
    private static void clientTakesNothing(EmbeddedChannel ch, boolean stalled) {
        ch.unsafe().outboundBuffer().setUserDefinedWritability(1, !stalled);
        ch.runPendingTasks(); // the outbound buffer tells the pipeline in a task of the loop
    }

    @ParameterizedTest
    @ValueSource(strings = {"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"})
    void b3_localAnswersAndRefusalsWaitForTheClientToTakeThemAndReadingStops(String request) {
        EmbeddedChannel ch = h.channel();
        clientTakesNothing(ch, true);
        ch.writeInbound(ascii(request.repeat(3)));
        assertEquals(1, answers(output(ch)), "no answer is queued behind one the client has not taken");
        assertFalse(ch.config().isAutoRead(), "reading stops: a local answer sets no exchange going, yet it waits");
        clientTakesNothing(ch, false);
        assertEquals(2, answers(output(ch)), "the queued requests are answered once the client took its bytes");
        assertTrue(ch.config().isAutoRead());
        ch.writeInbound(ascii(request));
        assertEquals(1, answers(output(ch)));
        ch.finishAndReleaseAll();
    }

    @Test
    void b3_aProxiedAnswerTheClientDoesNotTakeHoldsTheNextLocalAnswer() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH) + HEALTH));
        clientTakesNothing(ch, true); // the engine's answer went over the mark
        answer(0, true);
        assertEquals(1, answers(output(ch)));
        assertFalse(ch.config().isAutoRead(), "the exchange ended but the client has not taken its answer");
        clientTakesNothing(ch, false);
        assertEquals(1, answers(output(ch)), "then the queued health check is answered");
        assertTrue(ch.config().isAutoRead());
        ch.finishAndReleaseAll();
    }

    @Test
    void b3_aClientThatTakesNothingIsDisconnectedAtTheStallTimeout() throws Exception {
        try (FrontDoorHarness stall = new FrontDoorHarness(FrontDoorHarness.BASE_YAML.replace("request_read_timeout_ms: 1000",
            "request_read_timeout_ms: 1000\n  client_stall_timeout_ms: 5000"))) {
            EmbeddedChannel ch = stall.channel();
            clientTakesNothing(ch, true);
            ch.writeInbound(ascii(HEALTH + HEALTH));
            assertEquals(1, answers(output(ch)));
            advance(ch, 4_999);
            assertTrue(ch.isOpen(), "the stall timeout runs from the moment answering paused");
            advance(ch, 1);
            assertFalse(ch.isOpen(), "its unsent answers are not held past the stall timeout");
            assertTrue(stall.metrics.render().contains("kvgate_bad_requests_total{reason=\"client_stalled\"} 1"));
        }
    }

    // ---- M13 / L7: connection policy -------------------------------------------------------------------------

    @Test
    void m13_drainRefusesNewRequestsAndClosesKeepAliveAtTheNextResponse() {
        EmbeddedChannel busy = h.channel();
        busy.writeInbound(ascii(chatPost(BODY, AUTH)));
        EmbeddedChannel idle = h.channel();
        idle.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(idle)));

        h.drain.start();
        answer(0, true); // the request in progress finishes, with Connection: close, and its connection closes
        String out = output(busy);
        assertEquals("HTTP/1.1 200 OK", statusLine(out));
        assertTrue(out.toLowerCase().contains("connection: close"), out);
        assertFalse(busy.isOpen());

        idle.writeInbound(ascii(chatPost(BODY, AUTH)));
        out = output(idle);
        assertEquals("HTTP/1.1 503 Service Unavailable", statusLine(out));
        assertTrue(out.toLowerCase().contains("retry-after: 1"), out);
        assertFalse(idle.isOpen());
        assertEquals(1, h.started.size(), "no request started during drain");

        h.drain.undo();
        EmbeddedChannel after = h.channel();
        after.writeInbound(ascii(chatPost(BODY, AUTH)));
        assertEquals(2, h.started.size(), "drain undone: requests are served again");
        after.finishAndReleaseAll();
    }

    @Test
    void healthIs503WhileDraining() {
        h.drain.start();
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 503 Service Unavailable", statusLine(output(ch)));
    }

    @Test
    void l7_http10ClientsGetACloseDelimitedBodyNotChunks() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH).replace("HTTP/1.1", "HTTP/1.0")));
        assertEquals(1, h.started.size());
        ChannelHandlerContext ctx = h.contexts.get(0);
        DefaultHttpResponse head = new DefaultHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK);
        head.headers().set(HttpHeaderNames.TRANSFER_ENCODING, HttpHeaderValues.CHUNKED);
        ctx.write(head);
        ctx.write(new DefaultHttpContent(Unpooled.copiedBuffer("data: a\n\n", StandardCharsets.US_ASCII)));
        ctx.writeAndFlush(new DefaultLastHttpContent());
        h.owners.get(0).onExchangeDone(true);
        String out = output(ch);
        assertFalse(out.toLowerCase().contains("transfer-encoding"), out);
        assertTrue(out.toLowerCase().contains("connection: close"), out);
        assertTrue(out.endsWith("\r\n\r\ndata: a\n\n"), "raw body, no chunk framing: " + out);
        assertFalse(ch.isOpen());
    }

    @Test
    void l7_http10ClientsGetARelayedBodyCloseDelimited() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH).replace("HTTP/1.1", "HTTP/1.0")));
        relayChunkedEngineAnswer(0);
        String out = output(ch);
        assertFalse(out.toLowerCase().contains("transfer-encoding"), out);
        assertTrue(out.toLowerCase().contains("connection: close"), out);
        assertTrue(out.endsWith("\r\n\r\ndata: a\n\n"), "raw body, no chunk framing: " + out);
        assertFalse(ch.isOpen());
    }

    @Test
    void m13_aRelayedResponseDuringDrainSaysCloseAndClosesAfterItsLastByte() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH)));
        h.drain.start();
        relayChunkedEngineAnswer(0);
        String out = output(ch);
        assertTrue(out.contains("\r\nconnection: close\r\n\r\n"), out);
        assertTrue(out.endsWith("9\r\ndata: a\n\n\r\n0\r\n\r\n"), "chunked to an HTTP/1.1 client: " + out);
        assertFalse(ch.isOpen());
    }

    @Test
    void aKeepAliveConnectionCarriesARelayedResponseThenTheNextRequest() {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(chatPost(BODY, AUTH)));
        relayChunkedEngineAnswer(0);
        String out = output(ch);
        assertFalse(out.toLowerCase().contains("connection:"), out);
        assertTrue(ch.isOpen());
        ch.writeInbound(ascii("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        assertEquals("HTTP/1.1 200 OK", statusLine(output(ch)));
        ch.writeInbound(ascii("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"));
        String head = output(ch);
        assertTrue(head.startsWith("HTTP/1.1 200 OK") && head.endsWith("\r\n\r\n"), "no body for HEAD: " + head);
        ch.finishAndReleaseAll();
    }
}
