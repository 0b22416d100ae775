package io.kvgate.dataplane.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.DecoderException;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The engine-side response decoder: framing at every split, the facts of the head, and every refusal. */
class EngineResponseDecoderTest {
    private static final int MAX_LINE = 256;
    private static final int MAX_HEAD = 1024;

    /** What the decoder emitted for some input: heads (with a header read while their bytes were held), body, ends. */
    static final class Decoded {
        final List<ResponseHead> heads = new ArrayList<>();
        final List<String> contentTypes = new ArrayList<>();
        final StringBuilder body = new StringBuilder();
        int lasts;
        /** Body text seen after the last LastHttpContent (must stay empty). */
        int contentAfterLast;
        EngineHttpException refused;
        final List<ByteBuf> inputs = new ArrayList<>();

        void collect(EmbeddedChannel ch) {
            Object o;
            while ((o = ch.readInbound()) != null) {
                if (o instanceof ResponseHead h) {
                    heads.add(h);
                    contentTypes.add(h.header("content-type"));
                    h.release();
                } else if (o instanceof HttpContent c) {
                    if (lasts > 0 && heads.size() == lasts && c.content().isReadable()) {
                        contentAfterLast++;
                    }
                    body.append(c.content().toString(StandardCharsets.ISO_8859_1));
                    if (c instanceof LastHttpContent) {
                        lasts++;
                    }
                    c.release();
                } else {
                    fail("unexpected message " + o);
                }
            }
        }

        ResponseHead head() {
            assertEquals(1, heads.size(), "one head");
            return heads.get(0);
        }

        void assertReleased() {
            for (ByteBuf b : inputs) {
                assertEquals(0, b.refCnt(), "every input buffer is released");
            }
        }
    }

    private static ByteBuf bytes(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    /** Feeds {@code parts} one after the other, then closes the connection if {@code close}. */
    static Decoded decode(boolean close, String... parts) {
        Decoded d = new Decoded();
        EmbeddedChannel ch = new EmbeddedChannel(new EngineResponseDecoder(MAX_LINE, MAX_HEAD));
        try {
            for (String p : parts) {
                ByteBuf b = bytes(p);
                d.inputs.add(b);
                ch.writeInbound(b);
                d.collect(ch);
            }
            if (close) {
                ch.close();
                d.collect(ch);
            }
        } catch (DecoderException e) {
            d.collect(ch);
            d.refused = assertInstanceOf(EngineHttpException.class, e, "a refusal is an EngineHttpException");
        }
        ch.finishAndReleaseAll();
        return d;
    }

    static Decoded decode(String wire) {
        return decode(false, wire);
    }

    /** {@code wire} decoded in two parts split at every position, and byte by byte: the same result each time. */
    private static List<Decoded> atEverySplit(boolean close, String wire) {
        List<Decoded> all = new ArrayList<>();
        for (int split = 0; split <= wire.length(); split++) {
            all.add(decode(close, wire.substring(0, split), wire.substring(split)));
        }
        String[] oneByOne = new String[wire.length()];
        for (int i = 0; i < wire.length(); i++) {
            oneByOne[i] = wire.substring(i, i + 1);
        }
        all.add(decode(close, oneByOne));
        return all;
    }

    private static EngineHttpException refused(String wire) {
        Decoded d = decode(wire);
        if (d.refused == null) {
            fail("accepted: " + wire.replace("\r", "\\r").replace("\n", "\\n"));
        }
        d.assertReleased();
        return d.refused;
    }

    // ---- framing ---------------------------------------------------------------------------------------------

    @Test
    void contentLengthBodyAtEverySplit() {
        String body = "{\"id\":\"c\",\"choices\":[]}";
        String wire = "HTTP/1.1 200 OK\r\nServer: uvicorn\r\nContent-Type: application/json\r\nContent-Length: "
            + body.length() + "\r\n\r\n" + body;
        for (Decoded d : atEverySplit(false, wire)) {
            ResponseHead h = d.head();
            assertEquals(200, h.status());
            assertEquals(ResponseHead.Framing.LENGTH, h.framing());
            assertEquals(body.length(), h.contentLength());
            assertTrue(h.keepAlive());
            assertTrue(h.json());
            assertFalse(h.eventStream());
            assertTrue(h.http11());
            assertEquals("application/json", d.contentTypes.get(0));
            assertEquals(body, d.body.toString());
            assertEquals(1, d.lasts);
            assertNull(d.refused);
            d.assertReleased();
        }
    }

    @Test
    void chunkedBodyWithExtensionsAndTrailersAtEverySplit() {
        String wire = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: Chunked\r\n\r\n"
            + "F\r\ndata: {\"a\":1}\n\n\r\n"
            + "9;name=\"v\"\r\ndata: 2\n\n\r\n"
            + "00000e \r\ndata: [DONE]\n\n\r\n"
            + "0\r\nx-trailer: t\r\n\r\n";
        for (Decoded d : atEverySplit(false, wire)) {
            ResponseHead h = d.head();
            assertEquals(ResponseHead.Framing.CHUNKED, h.framing());
            assertEquals(-1, h.contentLength());
            assertTrue(h.eventStream());
            assertTrue(h.keepAlive());
            assertEquals("data: {\"a\":1}\n\ndata: 2\n\ndata: [DONE]\n\n", d.body.toString());
            assertEquals(1, d.lasts);
            assertNull(d.refused);
            d.assertReleased();
        }
    }

    @Test
    void closeDelimitedBodyEndsWithTheConnectionAtEverySplit() {
        String wire = "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"choices\":[]}";
        for (Decoded d : atEverySplit(true, wire)) {
            ResponseHead h = d.head();
            assertEquals(ResponseHead.Framing.CLOSE, h.framing());
            assertFalse(h.keepAlive(), "a close-delimited body ends the connection");
            assertFalse(h.http11());
            assertEquals("{\"choices\":[]}", d.body.toString());
            assertEquals(1, d.lasts, "the close is the end of the body");
            d.assertReleased();
        }
    }

    @Test
    void aBodyCutShortByACloseIsNeverCompleted() {
        Decoded length = decode(true, "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345");
        assertEquals("12345", length.body.toString());
        assertEquals(0, length.lasts, "no last content: the leg sees the close mid-body");
        Decoded chunked = decode(true, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n12345\r\n");
        assertEquals(0, chunked.lasts);
        Decoded head = decode(true, "HTTP/1.1 200 OK\r\ncontent-le");
        assertEquals(0, head.heads.size(), "a partial head is nothing");
    }

    @Test
    void informationalHeadsThenTheFinalOneAtEverySplit() {
        String wire = "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
            + "HTTP/1.1 100 Continue\r\n\r\n"
            + "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi";
        for (Decoded d : atEverySplit(false, wire)) {
            assertEquals(3, d.heads.size());
            assertTrue(d.heads.get(0).informational());
            assertEquals(ResponseHead.Framing.NONE, d.heads.get(1).framing());
            assertEquals(200, d.heads.get(2).status());
            assertEquals("hi", d.body.toString());
            assertEquals(1, d.lasts);
        }
    }

    @Test
    void bodylessStatusesAndEmptyLengthEndAtOnce() {
        for (String wire : List.of("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", "HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n")) {
            Decoded d = decode(wire);
            assertEquals(1, d.lasts, wire);
            assertEquals("", d.body.toString());
            assertTrue(d.head().keepAlive());
        }
        assertEquals(ResponseHead.Framing.NONE, decode("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").head().framing());
    }

    @Test
    void responsesFollowEachOtherOnOneConnection() {
        Decoded d = decode("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + "1\r\nb\r\n0\r\n\r\nHTTP/1.1 500 Oops\r\ncontent-length: 1\r\n\r\nc");
        assertEquals(3, d.heads.size(), "a stray CRLF between responses is tolerated");
        assertEquals(500, d.heads.get(2).status());
        assertEquals("abc", d.body.toString());
        assertEquals(3, d.lasts);
    }

    @Test
    void keepAliveFollowsVersionAndConnection() {
        assertTrue(decode("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").head().keepAlive());
        assertFalse(decode("HTTP/1.1 200 OK\r\nConnection: Close\r\ncontent-length: 0\r\n\r\n").head().keepAlive());
        assertFalse(decode("HTTP/1.1 200 OK\r\nconnection: upgrade, close\r\ncontent-length: 0\r\n\r\n").head().keepAlive());
        assertFalse(decode("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n").head().keepAlive());
        assertTrue(decode("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\ncontent-length: 0\r\n\r\n").head().keepAlive());
    }

    @Test
    void mediaTypeIsReadWhateverItsCase() {
        assertTrue(decode("HTTP/1.1 200 OK\r\nCONTENT-TYPE:Text/Event-Stream\r\ncontent-length: 0\r\n\r\n").head().eventStream());
        assertTrue(decode("HTTP/1.1 200 OK\r\ncontent-type:  application/JSON ; charset=utf-8\r\ncontent-length: 0\r\n\r\n")
            .head().json());
        ResponseHead plain = decode("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n").head();
        assertFalse(plain.json() || plain.eventStream());
    }

    /** A compressed body cannot be read for usage: the head says whether the engine declared any coding. */
    @Test
    void aDeclaredContentEncodingIsNoted() {
        assertTrue(decode("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\ncontent-length: 0\r\n\r\n").head().contentEncoded());
        assertTrue(decode("HTTP/1.1 200 OK\r\nCONTENT-ENCODING:br\r\ncontent-length: 0\r\n\r\n").head().contentEncoded());
        assertFalse(decode("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n").head()
            .contentEncoded());
        assertFalse(decode("HTTP/1.1 200 OK\r\ncontent-encodings: gzip\r\ncontent-length: 0\r\n\r\n").head()
            .contentEncoded(), "another name of another length");
    }

    // ---- refusals --------------------------------------------------------------------------------------------

    @Test
    void malformedHeadsAreRefused() {
        String ok = "content-length: 0\r\n\r\n";
        for (String wire : List.of(
            "HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\n" + ok,            // obs-fold
            "HTTP/1.1 200 OK\r\nx-a: 1\r\n\tfolded\r\n" + ok,
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nhi", // duplicate length, even equal
            "HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nhi",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", // CL + TE
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length:\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 1234567890123456789\r\n\r\n",
            "HTTP/1.1 200 OK\nContent-Length: 0\n\n",                   // bare LF
            "HTTP/1.1 200 OK\r\nx-a: 1\n" + ok,
            "HTTP/1.1 200 OK\r\nx-a: a\rb\r\n" + ok,                     // bare CR inside a value
            "HTTP/1.1 200 OK\r\nx-a: a\u0001b\r\n" + ok,                 // control character
            "HTTP/1.1 200 OK\r\nx-a : 1\r\n" + ok,                       // whitespace before the colon
            "HTTP/1.1 200 OK\r\n: 1\r\n" + ok,
            "HTTP/1.1 200 OK\r\nx(a): 1\r\n" + ok,
            "HTTP/1.1 200 OK\r\nno colon\r\n" + ok,
            "HTTP/1.1 200 OK\r\nconnection: a b\r\n" + ok,
            "HTTP/2.0 200 OK\r\n" + ok,
            "HTTP/1.2 200 OK\r\n" + ok,
            "http/1.1 200 OK\r\n" + ok,
            "HTTP/1.1 20 OK\r\n" + ok,
            "HTTP/1.1 099 OK\r\n" + ok,
            "HTTP/1.1 600 OK\r\n" + ok,
            "HTTP/1.1 2x0 OK\r\n" + ok,
            "HTTP/1.1  200 OK\r\n" + ok,
            "HTTP/1.1 200OK\r\n" + ok,
            "HTTP/1.1 200 O\u0000K\r\n" + ok,
            "SSH-2.0-OpenSSH\r\n\r\n")) {
            refused(wire);
        }
    }

    @Test
    void malformedChunksAreRefusedAfterTheHead() {
        String head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        for (String chunks : List.of("g\r\nx\r\n", "\r\n", "5\n12345\r\n", "2\r\nabc\r\n", "2\r\nab\n0\r\n\r\n",
            "2 x\r\nab\r\n", "10000000000000000\r\n", "2;a\u0001\r\nab\r\n", "0\r\nx: 1\n\r\n", "0\r\n folded\r\n\r\n")) {
            Decoded d = decode(head + chunks);
            assertTrue(d.refused != null, chunks);
            assertEquals(1, d.heads.size(), "the head went out before the refusal: the leg sees a mid-body failure");
            assertEquals(0, d.lasts);
            d.assertReleased();
        }
    }

    @Test
    void headsAndLinesAreBounded() {
        String status = "HTTP/1.1 200 " + "x".repeat(MAX_LINE - 13) + "\r\n";
        assertEquals(MAX_LINE + 2, status.length());
        assertEquals(200, decode(status + "content-length: 0\r\n\r\n").head().status(), "a status line at the bound");
        refused("HTTP/1.1 200 " + "x".repeat(MAX_LINE - 12) + "\r\ncontent-length: 0\r\n\r\n");
        EngineHttpException endless = refused("HTTP/1.1 200 " + "x".repeat(4 * MAX_LINE));
        assertTrue(endless.getMessage().contains("status line exceeds 256 bytes"), endless.getMessage());

        String start = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-pad: ";
        String fits = start + "p".repeat(MAX_HEAD - start.length() - 4) + "\r\n\r\n";
        assertEquals(MAX_HEAD, fits.length());
        assertEquals(1, decode(fits).lasts, "a head of exactly the bound");
        EngineHttpException big = refused(start + "p".repeat(MAX_HEAD - start.length() - 3) + "\r\n\r\n");
        assertTrue(big.getMessage().contains("exceeds 1024 bytes"), big.getMessage());
        StringBuilder many = new StringBuilder("HTTP/1.1 200 OK\r\n");
        for (int i = 0; many.length() < 4 * MAX_HEAD; i++) {
            many.append("x-h").append(i).append(": v\r\n");
        }
        refused(many.toString()); // never completed: refused as soon as the bound is crossed, not buffered on

        String chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assertTrue(decode(chunked + "1;" + "e".repeat(EngineResponseDecoder.MAX_CHUNK_LINE_BYTES) + "\r\n").refused != null,
            "a chunk-size line is bounded");
        StringBuilder trailers = new StringBuilder(chunked + "0\r\n");
        while (trailers.length() < 3 * MAX_HEAD) {
            trailers.append("x-t: v\r\n");
        }
        assertTrue(decode(trailers.toString()).refused != null, "the trailer section is bounded");
    }

    @Test
    void aRefusalDiscardsEverythingAfterIt() {
        EmbeddedChannel ch = new EmbeddedChannel(new EngineResponseDecoder(MAX_LINE, MAX_HEAD));
        try {
            ch.writeInbound(bytes("HTTP/1.1 200 OK\r\nx : 1\r\n\r\n"));
            fail("refused");
        } catch (EngineHttpException expected) {
            // refused
        }
        ByteBuf after = bytes("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        assertFalse(ch.writeInbound(after), "nothing more is decoded on the connection");
        assertEquals(0, after.refCnt());
        ch.finishAndReleaseAll();
    }

    @Test
    void aSwitchedProtocolIsTheLastThingRead() {
        Decoded d = decode("HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        assertEquals(1, d.heads.size());
        assertEquals(101, d.heads.get(0).status());
        assertEquals(0, d.lasts);
        d.assertReleased();
    }

    // ---- fuzz-ish ------------------------------------------------------------------------------------------------

    /**
     * Valid heads with random names, cases, whitespace and order: each parses, and the client's copy has exactly the
     * lines that are not hop-by-hop or the gateway's (checked against a plain model of the rules).
     */
    @Test
    void randomValidHeadsKeepExactlyTheForwardableLines() {
        Random rnd = new Random(20261201);
        String[] names = {"Server", "Date", "Content-Type", "X-Custom", "Cache-Control", "Connection", "Keep-Alive",
            "Proxy-Connection", "TE", "Trailer", "Upgrade", "Proxy-Authenticate", "X-Request-Id", "X-Kvgate-Route",
            "X-Kvgate-Other", "Vary", "X-Listed"};
        for (int round = 0; round < 2_000; round++) {
            StringBuilder wire = new StringBuilder("HTTP/1.1 200 OK\r\n");
            List<String> expected = new ArrayList<>();
            boolean listsX = false;
            int n = rnd.nextInt(8);
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String name = randomCase(rnd, names[rnd.nextInt(names.length)]);
                String value = name.equalsIgnoreCase("connection") ? (rnd.nextBoolean() ? "keep-alive" : "x-listed, Keep-Alive")
                    : "v" + rnd.nextInt(100) + (rnd.nextBoolean() ? " ; q=1" : "");
                if (name.equalsIgnoreCase("connection") && value.startsWith("x-listed")) {
                    listsX = true;
                }
                String line = name + ":" + " ".repeat(rnd.nextInt(3)) + value + (rnd.nextBoolean() ? " \t" : "") + "\r\n";
                lines.add(line);
            }
            boolean length = rnd.nextBoolean();
            lines.add(rnd.nextInt(lines.size() + 1), length ? "Content-Length: 3\r\n" : "Transfer-Encoding: chunked\r\n");
            for (String line : lines) {
                wire.append(line);
            }
            for (String line : lines) {
                String name = line.substring(0, line.indexOf(':')).toLowerCase();
                boolean drop = ForwardedHeaders.isHopByHop(name) || name.equals("x-request-id") || name.startsWith("x-kvgate-")
                    || (listsX && name.equals("x-listed"));
                if (!drop) {
                    expected.add(line);
                }
            }
            wire.append("\r\n").append(length ? "abc" : "3\r\nabc\r\n0\r\n\r\n");
            String w = wire.toString();
            EmbeddedChannel ch = new EmbeddedChannel(new EngineResponseDecoder(MAX_LINE, MAX_HEAD));
            ch.writeInbound(bytes(w));
            ResponseHead h = ch.readInbound();
            RelayHead r = RelayHead.relay(io.netty.buffer.UnpooledByteBufAllocator.DEFAULT, h, "id", null, false, false);
            h.release();
            String out = r.finish().toString(StandardCharsets.ISO_8859_1);
            r.release();
            StringBuilder want = new StringBuilder("HTTP/1.1 200 OK\r\n");
            expected.forEach(want::append);
            want.append("x-request-id: id\r\n").append(length ? "" : "transfer-encoding: chunked\r\n").append("\r\n");
            assertEquals(want.toString(), out, w);
            Decoded rest = new Decoded();
            rest.collect(ch);
            assertEquals("abc", rest.body.toString(), w);
            assertEquals(1, rest.lasts);
            ch.finishAndReleaseAll();
        }
    }

    private static String randomCase(Random rnd, String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (char c : s.toCharArray()) {
            sb.append(rnd.nextBoolean() ? Character.toUpperCase(c) : Character.toLowerCase(c));
        }
        return sb.toString();
    }

    /**
     * A valid response with random bytes replaced, inserted or removed: the decoder either decodes it or refuses it
     * with {@link EngineHttpException}, never fails another way, never emits a body before a head or content after
     * the end, and releases every buffer.
     */
    @Test
    void mutatedResponsesAreDecodedOrRefusedCleanly() {
        Random rnd = new Random(42);
        String[] seeds = {
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\nhello",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: keep-alive, x-a\r\nx-a: 1\r\n\r\n5;e=1\r\nhello\r\n0\r\nt: 1\r\n\r\n",
            "HTTP/1.0 503 Busy\r\n\r\nlater"};
        byte[] alphabet = "\r\n :;,0123456789abcdefHTTP/.\t\u0000\u007f\u00ffxX-".getBytes(StandardCharsets.ISO_8859_1);
        for (int round = 0; round < 5_000; round++) {
            StringBuilder w = new StringBuilder(seeds[rnd.nextInt(seeds.length)]);
            for (int m = rnd.nextInt(3) + 1; m > 0; m--) {
                int at = rnd.nextInt(w.length());
                char c = (char) (alphabet[rnd.nextInt(alphabet.length)] & 0xff);
                switch (rnd.nextInt(3)) {
                    case 0 -> w.setCharAt(at, c);
                    case 1 -> w.insert(at, c);
                    default -> w.deleteCharAt(at);
                }
            }
            String wire = w.toString();
            int split = rnd.nextInt(wire.length() + 1);
            Decoded d = decode(true, wire.substring(0, split), wire.substring(split));
            assertTrue(d.lasts <= d.heads.size(), wire);
            assertEquals(0, d.contentAfterLast, wire);
            if (d.heads.isEmpty()) {
                assertEquals("", d.body.toString(), "no body without a head: " + wire);
            }
            d.assertReleased();
            for (ResponseHead h : d.heads) {
                assertEquals(0, h.refCnt());
            }
        }
    }
}
