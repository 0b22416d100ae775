package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.StageFixture.head;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.request.Refusal;
import io.netty.handler.codec.DecoderResult;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The head stage alone, without a channel: each refusal it can give, and what an accepted head leaves in the context. */
class HeadStageTest {
    private StageFixture f;

    @BeforeEach
    void setUp() throws Exception {
        f = new StageFixture();
    }

    @AfterEach
    void tearDown() {
        f.close();
    }

    private Refusal run(HttpRequest req) {
        return f.pipeline.head(f.begin(req));
    }

    private static String answer(Refusal r) {
        FullHttpResponse resp = r.response(io.netty.buffer.UnpooledByteBufAllocator.DEFAULT);
        try {
            return resp.content().toString(StandardCharsets.UTF_8);
        } finally {
            resp.release();
        }
    }

    @Test
    void anAcceptedChatHeadHasItsRoutePathAndAnExtractor() {
        RequestContext rc = f.begin(head("POST", "/v1/chat/completions?x=1", "Authorization: Bearer k1",
            "Content-Type: application/json; charset=utf-8", "Content-Length: 10"));
        assertNull(f.pipeline.head(rc));
        assertSame(FrontRoute.CHAT, rc.route());
        assertEquals("/v1/chat/completions", rc.path(), "the query string is not part of the path");
        assertNotNull(rc.extractor(), "a JSON route's body is scanned");
        assertNotNull(rc.access().keyId, "the access log names the key (by id)");
    }

    @Test
    void aLocalRouteNeedsNoExtractor() {
        RequestContext rc = f.begin(head("GET", "/health"));
        assertNull(f.pipeline.head(rc));
        assertSame(FrontRoute.HEALTH, rc.route());
        assertNull(rc.extractor());
    }

    @Test
    void aMissingKeyIsTheOne401WithItsChallenge() {
        Refusal r = run(head("POST", "/v1/chat/completions", "Content-Type: application/json"));
        assertSame(Refusal.UNAUTHORIZED, r, "preallocated: a refused key allocates no refusal");
        FullHttpResponse resp = r.response(io.netty.buffer.UnpooledByteBufAllocator.DEFAULT);
        assertEquals("Bearer", resp.headers().get(HttpHeaderNames.WWW_AUTHENTICATE));
        resp.release();
        assertTrue(answer(r).contains("\"type\":\"authentication_error\""), answer(r));
    }

    @Test
    void anUnknownV1RouteWithoutAKeyIsA401AndWithOneA404() {
        assertSame(Refusal.UNAUTHORIZED, run(head("GET", "/v1/secret")), "an unknown route reveals nothing without a key");
        Refusal r = run(head("GET", "/v1/secret", "Authorization: Bearer k1"));
        assertEquals(404, r.status().code());
        assertEquals("unknown_route", r.reason());
        assertEquals("Unknown route: GET /v1/secret", r.message());
        assertEquals(404, run(head("GET", "/nothing")).status().code(), "outside /v1/ no key is asked for");
    }

    @Test
    void aWrongMethodIs405NamingTheAllowedOne() {
        Refusal r = run(head("GET", "/v1/chat/completions", "Authorization: Bearer k1"));
        assertEquals(405, r.status().code());
        assertEquals("method_not_allowed", r.reason());
        FullHttpResponse resp = r.response(io.netty.buffer.UnpooledByteBufAllocator.DEFAULT);
        assertEquals("POST", resp.headers().get(HttpHeaderNames.ALLOW));
        resp.release();
        assertFalse(r.closes());
    }

    @Test
    void aBodyThatIsNotJsonIs415() {
        Refusal r = run(head("POST", "/v1/completions", "Authorization: Bearer k1", "Content-Type: text/plain"));
        assertEquals(415, r.status().code());
        assertEquals("content_type", r.reason());
        assertTrue(r.message().contains("'text/plain'"), r.message());
    }

    @Test
    void aDeclaredLengthOverTheLimitIs413AndCloses() {
        Refusal r = run(head("POST", "/v1/completions", "Authorization: Bearer k1", "Content-Type: application/json",
            "Content-Length: 4097"));
        assertEquals(413, r.status().code());
        assertTrue(r.closes(), "the body is never read, so the connection cannot go on");
        assertEquals("The request body (4097 bytes) exceeds the limit of 4096 bytes.", r.message());
    }

    @Test
    void aDrainingGatewayShedsWithRetryAfterAndCloses() {
        f.drain.start();
        Refusal r = run(StageFixture.chatHead("{}"));
        assertEquals(503, r.status().code());
        assertTrue(r.shed(), "counted as shed load, not as the client's bad request");
        assertTrue(r.closes());
        FullHttpResponse resp = r.response(io.netty.buffer.UnpooledByteBufAllocator.DEFAULT);
        assertEquals(String.valueOf(f.config.health().retryAfterSeconds()), resp.headers().get(HttpHeaderNames.RETRY_AFTER));
        resp.release();
    }

    @Test
    void aHeadTheDecoderGaveUpOnClosesWithTheLimitItCrossed() {
        HttpRequest line = head("GET", "/");
        line.setDecoderResult(DecoderResult.failure(new TooLongHttpLineException("long")));
        Refusal r = run(line);
        assertEquals(414, r.status().code());
        assertTrue(r.closes());
        assertEquals("The request line exceeds " + f.config.limits().maxInitialLineBytes() + " bytes.", r.message());
        HttpRequest headers = head("GET", "/");
        headers.setDecoderResult(DecoderResult.failure(new TooLongHttpHeaderException("big")));
        assertEquals(431, run(headers).status().code());
        HttpRequest broken = head("GET", "/");
        broken.setDecoderResult(DecoderResult.failure(new IllegalArgumentException("bad version")));
        Refusal b = run(broken);
        assertEquals(400, b.status().code());
        assertEquals("Malformed HTTP request: bad version", b.message());
    }
}
