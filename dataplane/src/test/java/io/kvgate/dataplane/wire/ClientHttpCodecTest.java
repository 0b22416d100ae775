package io.kvgate.dataplane.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseDecoder;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Relaying as bytes: an engine response decoded by {@link EngineResponseDecoder}, its head copied by
 * {@link RelayHead}, written through {@link ClientHttpCodec}, which frames the body; what the client reads is checked
 * byte for byte and through a plain HTTP response decoder, with the engine's bytes split at every position.
 */
class ClientHttpCodecTest {
    /** Captures the context the relay writes through (the front door's position). */
    static final class Capture extends ChannelInboundHandlerAdapter {
        ChannelHandlerContext ctx;
        final List<Object> read = new ArrayList<>();

        @Override
        public void handlerAdded(ChannelHandlerContext c) {
            ctx = c;
        }

        @Override
        public void channelRead(ChannelHandlerContext c, Object msg) {
            read.add(msg);
        }
    }

    private final Capture capture = new Capture();
    private final EmbeddedChannel client = new EmbeddedChannel(new ClientHttpCodec(4096, 8192, 65536), capture);

    private static ByteBuf bytes(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.ISO_8859_1);
    }

    private static String output(EmbeddedChannel ch) {
        StringBuilder sb = new StringBuilder();
        Object o;
        while ((o = ch.readOutbound()) != null) {
            ByteBuf b = (ByteBuf) o;
            sb.append(b.toString(StandardCharsets.ISO_8859_1));
            b.release();
        }
        return sb.toString();
    }

    /**
     * Relays the engine's {@code wire} (fed in two parts split at {@code split}) to the client the way the exchange
     * does: the head copied, each content written, the last one flushed. Returns the client's bytes.
     */
    private String relay(String wire, int split, boolean lengthMayChange) {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        List<ByteBuf> in = List.of(bytes(wire.substring(0, split)), bytes(wire.substring(split)));
        for (ByteBuf b : in) {
            engine.writeInbound(b);
            Object o;
            while ((o = engine.readInbound()) != null) {
                if (o instanceof ResponseHead h) {
                    capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid", null, false, lengthMayChange));
                    h.release();
                } else if (o instanceof LastHttpContent c) {
                    capture.ctx.writeAndFlush(c);
                } else {
                    capture.ctx.write(o);
                }
            }
            capture.ctx.flush();
        }
        engine.finishAndReleaseAll();
        String out = output(client);
        for (ByteBuf b : in) {
            assertEquals(0, b.refCnt(), "the engine's buffers are released once written");
        }
        return out;
    }

    /** What an HTTP client makes of {@code bytes}: the head and the body text. */
    private static Object[] asClientReads(String bytes) {
        EmbeddedChannel reader = new EmbeddedChannel(new HttpResponseDecoder());
        reader.writeInbound(bytes(bytes));
        HttpResponse head = null;
        StringBuilder body = new StringBuilder();
        int lasts = 0;
        Object o;
        while ((o = reader.readInbound()) != null) {
            if (o instanceof HttpResponse h) {
                head = h;
            }
            if (o instanceof HttpContent c) {
                body.append(c.content().toString(StandardCharsets.UTF_8));
                lasts += c instanceof LastHttpContent ? 1 : 0;
            }
            ReferenceCountUtil.release(o);
        }
        reader.finishAndReleaseAll();
        return new Object[] {head, body.toString(), lasts};
    }

    @Test
    void aLengthDelimitedResponseGoesOutAsItCameAtEverySplit() {
        String body = "{\"id\":\"x\",\"choices\":[{\"text\":\"ok\"}]}";
        String wire = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nContent-Length: " + body.length()
            + "\r\nConnection: keep-alive\r\nX-Request-Id: engine-side\r\n\r\n" + body;
        String expected = "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nContent-Length: " + body.length()
            + "\r\nx-request-id: rid\r\n\r\n" + body;
        for (int split = 0; split <= wire.length(); split++) {
            assertEquals(expected, relay(wire, split, false), "split " + split);
        }
    }

    @Test
    void aChunkedResponseIsReChunkedAtEverySplit() {
        String wire = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            + "7\r\n{\"a\":1,\r\n6\r\n\"b\":2}\r\n0\r\n\r\n";
        for (int split = 0; split <= wire.length(); split++) {
            String out = relay(wire, split, false);
            assertTrue(out.startsWith("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: rid\r\n"
                + "transfer-encoding: chunked\r\n\r\n"), out);
            assertTrue(out.endsWith("\r\n0\r\n\r\n"), out);
            Object[] r = asClientReads(out);
            assertEquals("{\"a\":1,\"b\":2}", r[1], "split " + split);
            assertEquals(1, r[2]);
        }
        assertEquals("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: rid\r\ntransfer-encoding: chunked\r\n\r\n"
            + "7\r\n{\"a\":1,\r\n6\r\n\"b\":2}\r\n0\r\n\r\n", relay(wire, wire.length(), false), "framed as the engine framed it");
    }

    @Test
    void aCloseDelimitedResponseGoesOutChunkedToAnHttp11Client() {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(bytes("HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{\"a\":"));
        engine.writeInbound(bytes("1}"));
        engine.close();
        Object o;
        while ((o = engine.readInbound()) != null) {
            if (o instanceof ResponseHead h) {
                capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid", null, false, false));
                h.release();
            } else {
                capture.ctx.writeAndFlush(o);
            }
        }
        String out = output(client);
        assertTrue(out.startsWith("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-request-id: rid\r\n"
            + "transfer-encoding: chunked\r\n\r\n"), out);
        assertEquals("{\"a\":1}", asClientReads(out)[1]);
        assertTrue(client.isOpen(), "the client's connection does not depend on the engine's");
    }

    @Test
    void aBodyTheRelayMayRewriteLosesItsLength() {
        String sse = "data: {\"a\":1}\n\n";
        String wire = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: " + sse.length() + "\r\n\r\n" + sse;
        String out = relay(wire, wire.length(), true);
        assertFalse(out.toLowerCase().contains("content-length"), out);
        assertTrue(out.contains("transfer-encoding: chunked\r\n\r\n"), out);
        assertEquals(sse, asClientReads(out)[1]);
    }

    @Test
    void aNoContentAnswerCarriesNoLengthAndNoBody() {
        String out = relay("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nx-a: 1\r\n\r\n", 5, false);
        assertEquals("HTTP/1.1 204 No Content\r\nx-a: 1\r\nx-request-id: rid\r\n\r\n", out);
    }

    @Test
    void theRouteExplanationAndCloseAreTheGatewaysOwn() {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(bytes("HTTP/1.1 200 OK\r\nx-kvgate-route: forged\r\ncontent-length: 0\r\n\r\n"));
        ResponseHead h = engine.readInbound();
        capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid\r\nx-evil: 1", "endpoint=a:1; rule=r", true, false));
        h.release();
        capture.ctx.writeAndFlush(engine.readInbound());
        assertEquals("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-request-id: rid??x-evil: 1\r\nx-kvgate-route: endpoint=a:1; rule=r\r\n"
            + "connection: close\r\n\r\n", output(client), "a value can never break a line");
        engine.finishAndReleaseAll();
    }

    @Test
    void theTemplateWarningIsTheGatewaysOwn() {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(bytes("HTTP/1.1 200 OK\r\nx-kvgate-warning: forged\r\ncontent-length: 0\r\n\r\n"));
        ResponseHead h = engine.readInbound();
        capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid", null, "chat_template_kwargs 'x'\r\nx-evil: 1", false, false));
        h.release();
        capture.ctx.writeAndFlush(engine.readInbound());
        assertEquals("HTTP/1.1 200 OK\r\ncontent-length: 0\r\nx-request-id: rid\r\n"
            + "x-kvgate-warning: chat_template_kwargs 'x'??x-evil: 1\r\n\r\n", output(client), "the engine's own is not relayed");
        engine.finishAndReleaseAll();
    }

    /** The codec pairs responses with requests: a relayed response counts, so a HEAD after it still gets no body. */
    @Test
    void aHeadRequestAfterARelayedResponseGetsNoBody() {
        client.writeInbound(bytes("POST /v1/completions HTTP/1.1\r\ncontent-length: 0\r\n\r\nHEAD /health HTTP/1.1\r\n\r\n"));
        capture.read.forEach(ReferenceCountUtil::release);
        String first = relay("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 0, false);
        assertTrue(first.endsWith("\r\n\r\nok"), first);
        FullHttpResponse health = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, bytes("{\"status\":\"ok\"}"));
        health.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 15);
        capture.ctx.writeAndFlush(health);
        String second = output(client);
        assertTrue(second.startsWith("HTTP/1.1 200 OK\r\n"), second);
        assertTrue(second.endsWith("content-length: 15\r\n\r\n"), "HEAD: the length, no body: " + second);
    }

    @Test
    void aSmugglingShapedRequestClosesTheConnectionAfterItsRelayedResponse() {
        client.writeInbound(bytes("POST /v1/completions HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n"
            + "0\r\n\r\n"));
        assertTrue(((io.netty.handler.codec.http.HttpRequest) capture.read.get(0)).decoderResult().isFailure(),
            "Netty refuses the request (the front door answers it with 400)");
        capture.read.forEach(ReferenceCountUtil::release);
        relay("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 0, false);
        assertFalse(client.isOpen(), "TE + CL on a request: the connection ends after its response, whatever answered it");
    }

    @Test
    void theGatewaysOwnAnswersStillGoThroughNettysEncoder() {
        relay("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 7, false);
        FullHttpResponse r = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.BAD_REQUEST, bytes("{}"));
        r.headers().setInt(HttpHeaderNames.CONTENT_LENGTH, 2);
        capture.ctx.writeAndFlush(r);
        assertEquals("HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}", output(client));
    }

    @Test
    void aSecondHeadInsideARelayedBodyIsRefused() {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(bytes("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n"));
        ResponseHead h = engine.readInbound();
        capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid", null, false, false));
        h.release();
        FullHttpResponse stray = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.OK, bytes("x"));
        ChannelFuture f = capture.ctx.writeAndFlush(stray);
        assertFalse(f.isSuccess());
        assertInstanceOf(IllegalStateException.class, f.cause());
        assertEquals(0, stray.refCnt());
        output(client);
        engine.finishAndReleaseAll();
    }

    @Test
    void aChunkWritesPromiseCompletesWithItsLastByte() {
        EmbeddedChannel engine = new EmbeddedChannel(new EngineResponseDecoder(4096, 8192));
        engine.writeInbound(bytes("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n"));
        ResponseHead h = engine.readInbound();
        capture.ctx.write(RelayHead.relay(capture.ctx.alloc(), h, "rid", null, false, false));
        h.release();
        ChannelFuture chunk = capture.ctx.write(engine.readInbound());
        assertFalse(chunk.isDone(), "not written before the flush");
        capture.ctx.flush();
        assertTrue(chunk.isSuccess());
        assertTrue(output(client).endsWith("\r\n\r\n2\r\nok\r\n"));
        engine.finishAndReleaseAll();
    }
}
