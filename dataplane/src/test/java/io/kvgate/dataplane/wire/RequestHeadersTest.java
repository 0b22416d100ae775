package io.kvgate.dataplane.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.DefaultHttpHeadersFactory;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link RequestHeaders} behaves as Netty's {@code DefaultHttpHeaders} does: the same random operations give the same
 * answers, and Netty's request decoder accepts and refuses the same requests with either.
 */
class RequestHeadersTest {
    private static final String[] NAMES = {"Host", "host", "Content-Length", "content-type", "Connection", "X-A", "x-a",
        "Transfer-Encoding", "Accept",
        // Absent or rare names, some sharing a (length, first letter) class with the others (X-B with X-A,
        // Content-Type with X-Request-Id): the lookup's name filter must only ever skip names really absent.
        "X-B", "x-request-id", "X-Kvgate-Explain", "authorization"};
    private static final String[] VALUES = {"1", "keep-alive", "close", "Keep-Alive, Upgrade", "gzip, chunked", "a,b , c", "", "x y"};

    private static void assertSame(HttpHeaders expected, HttpHeaders actual, String when) {
        assertEquals(expected.size(), actual.size(), when);
        assertEquals(expected.isEmpty(), actual.isEmpty(), when);
        List<String> e = new ArrayList<>();
        List<String> a = new ArrayList<>();
        for (Map.Entry<String, String> x : expected) {
            e.add(x.getKey().toLowerCase() + "=" + x.getValue());
        }
        for (Map.Entry<String, String> x : actual) {
            a.add(x.getKey().toLowerCase() + "=" + x.getValue());
        }
        assertEquals(e, a, "iteration order: " + when);
        for (String n : NAMES) {
            assertEquals(expected.get(n), actual.get(n), when + " get " + n);
            assertEquals(expected.getAll(n), actual.getAll(n), when + " getAll " + n);
            assertEquals(expected.contains(n), actual.contains(n), when + " contains " + n);
            for (String v : new String[] {"keep-alive", "close", "chunked", "b", "1"}) {
                for (boolean ignoreCase : new boolean[] {true, false}) {
                    assertEquals(expected.containsValue(n, v, ignoreCase), actual.containsValue(n, v, ignoreCase),
                        when + " containsValue " + n + " " + v + " " + ignoreCase);
                    assertEquals(expected.contains(n, v, ignoreCase), actual.contains(n, v, ignoreCase),
                        when + " contains " + n + " " + v + " " + ignoreCase);
                }
            }
            assertEquals(expected.getInt(n), actual.getInt(n), when + " getInt " + n);
        }
        assertEquals(expected.names().stream().map(String::toLowerCase).sorted().toList(),
            actual.names().stream().map(String::toLowerCase).sorted().toList(), when + " names");
    }

    @Test
    void randomOperationsAnswerAsNettysHeadersDo() {
        Random rnd = new Random(7);
        for (int round = 0; round < 500; round++) {
            HttpHeaders expected = new DefaultHttpHeaders();
            HttpHeaders actual = RequestHeaders.HEADERS.newHeaders();
            StringBuilder ops = new StringBuilder();
            for (int op = 0; op < 12; op++) {
                String n = NAMES[rnd.nextInt(NAMES.length)];
                String v = VALUES[rnd.nextInt(VALUES.length)];
                switch (rnd.nextInt(6)) {
                    case 0, 1, 2 -> {
                        expected.add(n, v);
                        actual.add(n, v);
                        ops.append(" add ").append(n);
                    }
                    case 3 -> {
                        expected.set(n, v);
                        actual.set(n, v);
                        ops.append(" set ").append(n);
                    }
                    case 4 -> {
                        expected.remove(n);
                        actual.remove(n);
                        ops.append(" remove ").append(n);
                    }
                    default -> {
                        expected.setInt(n, op);
                        actual.setInt(n, op);
                        ops.append(" setInt ").append(n);
                    }
                }
                assertSame(expected, actual, ops.toString());
            }
            expected.clear();
            actual.clear();
            assertSame(expected, actual, ops + " clear");
        }
    }

    @Test
    void namesAndValuesAreValidatedAsNettyDoes() {
        HttpHeaders h = RequestHeaders.HEADERS.newHeaders();
        assertThrows(IllegalArgumentException.class, () -> h.add("bad name", "v"));
        assertThrows(IllegalArgumentException.class, () -> h.add("x", "a\r\nb"));
        assertThrows(IllegalArgumentException.class, () -> h.add("x", " leading space"));
        assertThrows(IllegalArgumentException.class, () -> new DefaultHttpHeaders().add("x", " leading space"), "as Netty");
        assertThrows(IllegalArgumentException.class, () -> RequestHeaders.TRAILERS.newHeaders().add("content-length", "1"),
            "a trailer cannot carry a framing field");
        assertEquals(0, h.size());
    }

    /** What Netty's request decoder makes of {@code wire} with a headers factory: a compact transcript. */
    private static String decode(String wire, boolean lean) {
        HttpDecoderConfig cfg = new HttpDecoderConfig().setMaxHeaderSize(256);
        if (lean) {
            cfg.setHeadersFactory(RequestHeaders.HEADERS).setTrailersFactory(RequestHeaders.TRAILERS);
        } else {
            cfg.setHeadersFactory(DefaultHttpHeadersFactory.headersFactory()).setTrailersFactory(DefaultHttpHeadersFactory.trailersFactory());
        }
        EmbeddedChannel ch = new EmbeddedChannel(new HttpRequestDecoder(cfg));
        ByteBuf in = Unpooled.copiedBuffer(wire, StandardCharsets.ISO_8859_1);
        ch.writeInbound(in);
        StringBuilder t = new StringBuilder();
        Object o;
        while ((o = ch.readInbound()) != null) {
            HttpObject m = (HttpObject) o;
            if (m.decoderResult().isFailure()) {
                t.append("[failed ").append(m.decoderResult().cause().getClass().getSimpleName()).append("]");
            }
            if (m instanceof HttpRequest r) {
                t.append(r.method()).append(' ').append(r.uri()).append(' ').append(r.protocolVersion());
                for (Map.Entry<String, String> e : r.headers()) {
                    t.append('|').append(e.getKey()).append('=').append(e.getValue());
                }
            }
            if (m instanceof HttpContent c) {
                t.append("{").append(c.content().toString(StandardCharsets.ISO_8859_1)).append("}");
                if (c instanceof LastHttpContent l) {
                    t.append("last");
                    for (Map.Entry<String, String> e : l.trailingHeaders()) {
                        t.append('|').append(e.getKey()).append('=').append(e.getValue());
                    }
                }
            }
            ReferenceCountUtil.release(o);
        }
        ch.finishAndReleaseAll();
        return t.toString();
    }

    @Test
    void nettysDecoderAcceptsAndRefusesTheSameRequests() {
        for (String wire : List.of(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
            "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nhi",
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 1\r\n\r\n",
            "GET / HTTP/1.1\r\nX-Folded: a\r\n b\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: a\r\n\r\n",
            "GET / HTTP/1.1\r\nX-A: " + "v".repeat(300) + "\r\n\r\n",
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            "GET /health HTTP/1.1\r\nhost: x\r\nHOST: y\r\n\r\nGET /ready HTTP/1.1\r\n\r\n")) {
            assertEquals(decode(wire, false), decode(wire, true), wire);
        }
        assertTrue(decode("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n", true).contains("failed"));
    }
}
