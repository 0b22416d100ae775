package io.kvgate.dataplane.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** L2: what crosses the gateway in each direction (request heads encoded from the client's, response heads as bytes). */
class ForwardedHeadersTest {
    /** The header lines of the engine request the gateway encodes for {@code in}, in order, lower-cased names. */
    private static List<String> toEngine(HttpHeaders in, String requestId) {
        ByteBuf head = new EngineRequest(HttpMethod.POST, "/v1/completions", in, requestId)
            .encodeHead(UnpooledByteBufAllocator.DEFAULT, "10.0.0.1:8000", 5);
        try {
            String text = head.toString(StandardCharsets.ISO_8859_1);
            assertTrue(text.startsWith("POST /v1/completions HTTP/1.1\r\n"), text);
            assertTrue(text.endsWith("\r\n\r\n"), text);
            List<String> lines = new ArrayList<>(List.of(text.substring(0, text.length() - 4).split("\r\n", -1)));
            lines.remove(0);
            return lines;
        } finally {
            head.release();
        }
    }

    @Test
    void l2_connectionListedHopByHopAndGatewayHeadersStayHere() {
        HttpHeaders in = new DefaultHttpHeaders();
        in.add("Connection", "keep-alive");
        in.add("Connection", "X-One , x-two");
        in.add("X-One", "1").add("x-two", "2").add("X-Three", "3").add("Authorization", "Bearer k").add("TE", "trailers")
            .add("Proxy-Authorization", "p").add("X-Kvgate-Explain", "1").add("Host", "gw").add("Content-Length", "5")
            .add("Expect", "100-continue").add("X-Request-Id", "client").add("Transfer-Encoding", "chunked");
        assertEquals(List.of("host: 10.0.0.1:8000", "content-length: 5", "X-Three: 3", "x-request-id: gw-id"), toEngine(in, "gw-id"),
            "only X-Three and the gateway's own host, length and id cross");
    }

    @Test
    void keepAliveAloneRemovesNothingElse() {
        HttpHeaders in = new DefaultHttpHeaders().add("Connection", "keep-alive").add("User-Agent", "sdk").add("Accept", "*/*");
        List<String> out = toEngine(in, "id");
        assertTrue(out.contains("User-Agent: sdk"), out.toString());
        assertTrue(out.contains("Accept: */*"), out.toString());
        assertFalse(out.stream().anyMatch(l -> l.toLowerCase().startsWith("connection")), out.toString());
    }

    @Test
    void aHeaderTheGatewaySetsReplacesTheClients() {
        HttpHeaders in = new DefaultHttpHeaders().add("X-Data-Parallel-Rank", "7").add("Accept", "*/*");
        ByteBuf head = new EngineRequest(HttpMethod.POST, "/v1/completions", in, "id", "x-data-parallel-rank", "1")
            .encodeHead(UnpooledByteBufAllocator.DEFAULT, "h:1", 2);
        String text = head.toString(StandardCharsets.ISO_8859_1);
        head.release();
        assertEquals("POST /v1/completions HTTP/1.1\r\nhost: h:1\r\ncontent-length: 2\r\nAccept: */*\r\n"
            + "x-data-parallel-rank: 1\r\nx-request-id: id\r\n\r\n", text, "the gateway's rank pin, not the client's");
    }

    /** A traced request: the gateway's span context replaces the client's traceparent and tracestate (any case). */
    @Test
    void aTracedRequestCarriesTheGatewaysTraceContextNotTheClients() {
        HttpHeaders in = new DefaultHttpHeaders().add("TraceParent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .add("tracestate", "client=1").add("Accept", "*/*");
        String gateway = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
        ByteBuf head = new EngineRequest(HttpMethod.POST, "/v1/completions", in, "id", "x-data-parallel-rank", "1")
            .withTrace(new String[] {gateway, "kvgate=2"}).encodeHead(UnpooledByteBufAllocator.DEFAULT, "h:1", 2);
        String text = head.toString(StandardCharsets.ISO_8859_1);
        head.release();
        assertEquals("POST /v1/completions HTTP/1.1\r\nhost: h:1\r\ncontent-length: 2\r\nAccept: */*\r\n"
            + "x-data-parallel-rank: 1\r\ntraceparent: " + gateway + "\r\ntracestate: kvgate=2\r\nx-request-id: id\r\n\r\n", text);
        // Without a trace state of its own the gateway sends none: the client's is not passed on under another parent.
        ByteBuf bare = new EngineRequest(HttpMethod.POST, "/v1/completions", in, null).withTrace(new String[] {gateway, null})
            .encodeHead(UnpooledByteBufAllocator.DEFAULT, "h:1", 2);
        String bareText = bare.toString(StandardCharsets.ISO_8859_1);
        bare.release();
        assertFalse(bareText.toLowerCase().contains("tracestate"), bareText);
        assertTrue(bareText.contains("traceparent: " + gateway + "\r\n") && !bareText.contains("00f067aa0ba902b7"), bareText);
    }

    /** An untraced request (tracing off, or not sampled): the client's trace context reaches the engine untouched. */
    @Test
    void anUntracedRequestPassesTheClientsTraceContextThrough() {
        HttpHeaders in = new DefaultHttpHeaders().add("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .add("tracestate", "client=1");
        assertEquals(List.of("host: 10.0.0.1:8000", "content-length: 5",
            "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate: client=1", "x-request-id: id"),
            toEngine(in, "id"));
        EngineRequest plain = new EngineRequest(HttpMethod.POST, "/", in, "id");
        assertTrue(plain == plain.withTrace(null), "no trace: the same request");
    }

    @Test
    void noRequestIdWhenTheGatewayHasNone() {
        assertEquals(List.of("host: 10.0.0.1:8000", "content-length: 5"), toEngine(new DefaultHttpHeaders(), null));
    }

    @Test
    void engineResponseHeadersLoseHopByHopAndConnectionListed() {
        EmbeddedChannel ch = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        ch.writeInbound(Unpooled.copiedBuffer("HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: 1\r\n"
            + "Content-Type: application/json\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\n"
            + "X-Request-Id: engine\r\nX-Kvgate-Route: forged\r\n\r\n0\r\n\r\n", StandardCharsets.ISO_8859_1));
        ResponseHead head = ch.readInbound();
        RelayHead relayed = RelayHead.relay(UnpooledByteBufAllocator.DEFAULT, head, "client-id", null, false, false);
        head.release();
        String out = relayed.finish().toString(StandardCharsets.ISO_8859_1);
        relayed.release();
        assertEquals("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-request-id: client-id\r\n"
            + "transfer-encoding: chunked\r\n\r\n", out);
        Object o;
        while ((o = ch.readInbound()) != null) {
            ReferenceCountUtil.release(o);
        }
        ch.finishAndReleaseAll();
    }
}
