package io.kvgate.dataplane.proxy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import org.junit.jupiter.api.Test;

/** L2: what crosses the gateway in each direction. */
class ForwardedHeadersTest {
    @Test
    void l2_connectionListedHopByHopAndGatewayHeadersStayHere() {
        HttpHeaders in = new DefaultHttpHeaders();
        in.add("Connection", "keep-alive");
        in.add("Connection", "X-One , x-two");
        in.add("X-One", "1").add("x-two", "2").add("X-Three", "3").add("Authorization", "Bearer k").add("TE", "trailers")
            .add("Proxy-Authorization", "p").add("X-Kvgate-Explain", "1").add("Host", "gw").add("Content-Length", "5")
            .add("Expect", "100-continue").add("X-Request-Id", "client").add("Transfer-Encoding", "chunked");
        HttpHeaders out = ForwardedHeaders.toEngine(in, "gw-id");
        assertEquals("3", out.get("x-three"));
        assertEquals("gw-id", out.get("x-request-id"));
        assertEquals(2, out.size(), "only X-Three and the gateway's id cross: " + out);
    }

    @Test
    void keepAliveAloneRemovesNothingElse() {
        HttpHeaders in = new DefaultHttpHeaders().add("Connection", "keep-alive").add("User-Agent", "sdk").add("Accept", "*/*");
        HttpHeaders out = ForwardedHeaders.toEngine(in, "id");
        assertEquals("sdk", out.get("user-agent"));
        assertEquals("*/*", out.get("accept"));
        assertFalse(out.contains("connection"));
    }

    @Test
    void engineResponseHeadersLoseHopByHopAndConnectionListed() {
        HttpHeaders engine = new DefaultHttpHeaders().add("Connection", "close, X-Internal").add("X-Internal", "1")
            .add("Content-Type", "application/json").add("Keep-Alive", "timeout=5").add("Transfer-Encoding", "chunked");
        HttpHeaders out = new DefaultHttpHeaders();
        ForwardedHeaders.toClient(engine, out);
        assertEquals(1, out.size(), out.toString());
        assertTrue(out.contains("content-type"));
    }
}
