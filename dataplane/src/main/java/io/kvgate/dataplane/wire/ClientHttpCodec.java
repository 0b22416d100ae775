package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.channel.CombinedChannelDuplexHandler;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseEncoder;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * The client connection's HTTP/1.1 codec: Netty's request decoder (its headers kept in {@link RequestHeaders}, not a
 * hash map) and response encoder (for the gateway's own answers), plus relayed responses in bytes — a
 * {@link RelayHead} followed by the body's {@code HttpContent}s, which this codec frames itself (chunked, as is, or
 * not at all) without building a response object or a header map.
 *
 * <p>It also decides, for every final response — whoever wrote it (the front door or an exchange relaying an
 * engine) — whether the connection survives it:
 * <ul>
 *   <li>a response to {@code HEAD} carries no body (requests and responses pair up in order; relayed ones count
 *       too);</li>
 *   <li>while the gateway drains, the response carries {@code Connection: close} and the connection closes after its
 *       last byte (keep-alive clients leave at their next response);</li>
 *   <li>an HTTP/1.0 client cannot read chunked encoding: its response is sent close-delimited (no
 *       {@code Transfer-Encoding}, {@code Connection: close}, closed after the last byte);</li>
 *   <li>a request that came with both {@code Transfer-Encoding} and {@code Content-Length} (a smuggling attempt,
 *       RFC 9112 §6.3) closes the connection after its response.</li>
 * </ul>
 * And it reports the arrival of raw request bytes ({@code onBytes}, before they are decoded), which starts the front
 * door's read deadline on the first byte of a head: the decoder reports a head only once it is complete, so a client
 * trickling its head would otherwise never be timed. One handler does all of this because every request and response
 * passes through it anyway: each further handler would cost every message a pipeline hop. Pipelining is bounded by
 * the front door. Event-loop only.
 */
public final class ClientHttpCodec extends CombinedChannelDuplexHandler<ClientHttpCodec.RequestDecoder, ClientHttpCodec.ResponseEncoder> {
    private static final ByteBuf CRLF = Unpooled.unreleasableBuffer(Unpooled.directBuffer(2).writeByte('\r').writeByte('\n'))
        .asReadOnly();
    private static final ByteBuf LAST_CHUNK = Unpooled.unreleasableBuffer(Unpooled.directBuffer(5)
        .writeBytes(new byte[] {'0', '\r', '\n', '\r', '\n'})).asReadOnly();
    private static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** Flags of a request, kept until its final response: a {@code HEAD} request, an HTTP/1.0 client. */
    private static final int HEAD = 1;
    private static final int HTTP_1_0 = 2;

    private final Runnable onBytes;
    private final BooleanSupplier draining;
    /** The flags of each request read and not yet answered, oldest first (small boxed values are cached: no garbage). */
    private final ArrayDeque<Integer> unanswered = new ArrayDeque<>();
    /** The flags of the request whose final response is being written. */
    private int answering;
    private boolean closeAfterResponse;

    /** A codec that reports nothing and never drains (tests of the codec alone). */
    public ClientHttpCodec(int maxInitialLineLength, int maxHeaderSize, int maxChunkSize) {
        this(maxInitialLineLength, maxHeaderSize, maxChunkSize, () -> { }, () -> false);
    }

    /**
     * @param onBytes  called when request bytes arrive, before they are decoded
     * @param draining whether each response must be its connection's last: the gateway drains or shuts down (read for
     *                 each final response)
     */
    public ClientHttpCodec(int maxInitialLineLength, int maxHeaderSize, int maxChunkSize, Runnable onBytes,
                           BooleanSupplier draining) {
        this.onBytes = onBytes;
        this.draining = draining;
        init(new RequestDecoder(new HttpDecoderConfig().setMaxInitialLineLength(maxInitialLineLength)
            .setMaxHeaderSize(maxHeaderSize).setMaxChunkSize(maxChunkSize)
            .setHeadersFactory(RequestHeaders.HEADERS).setTrailersFactory(RequestHeaders.TRAILERS)), new ResponseEncoder());
    }

    /** A final response starts: it answers the oldest unanswered request. */
    private int startAnswer() {
        Integer flags = unanswered.poll();
        answering = flags == null ? 0 : flags;
        return answering;
    }

    /** Whether the response starting now, to a request with {@code flags}, must be the connection's last. */
    private boolean lastOnConnection(int flags) {
        return (flags & HTTP_1_0) != 0 || draining.getAsBoolean();
    }

    /** Netty's request decoder, noting what the response side needs to know of each request. */
    public final class RequestDecoder extends HttpRequestDecoder {
        RequestDecoder(HttpDecoderConfig config) {
            super(config);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
            if (msg instanceof ByteBuf b && b.isReadable()) {
                onBytes.run();
            }
            super.channelRead(ctx, msg);
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf buffer, List<Object> out) throws Exception {
            int before = out.size();
            super.decode(ctx, buffer, out);
            for (int i = before; i < out.size(); i++) {
                if (out.get(i) instanceof HttpRequest r) {
                    unanswered.add((HttpMethod.HEAD.equals(r.method()) ? HEAD : 0)
                        | (r.protocolVersion().equals(HttpVersion.HTTP_1_0) ? HTTP_1_0 : 0));
                }
            }
        }

        @Override
        protected void handleTransferEncodingChunkedWithContentLength(HttpMessage message) {
            closeAfterResponse = true; // before Netty refuses the request (RFC 9112 mode throws): closed either way
            super.handleTransferEncodingChunkedWithContentLength(message);
        }
    }

    /** Netty's response encoder for the gateway's own responses; relayed ones are framed here. */
    public final class ResponseEncoder extends HttpResponseEncoder {
        private static final int NOT_RELAYING = 0;
        private static final int AS_IS = 1;
        private static final int CHUNKED = 2;
        private static final int NO_BODY = 3;
        private int relaying = NOT_RELAYING;

        ResponseEncoder() {}

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) throws Exception {
            boolean informational = msg instanceof HttpResponse res && res.status().codeClass() == HttpStatusClass.INFORMATIONAL;
            if (msg instanceof RelayHead relayed) {
                int flags = startAnswer();
                if ((flags & HTTP_1_0) != 0) {
                    relayed.closeDelimited();
                }
                if (lastOnConnection(flags)) {
                    relayed.closeConnection();
                    closeAfterResponse = true;
                }
            } else if (msg instanceof HttpResponse res && !informational) {
                int flags = startAnswer();
                if ((flags & HTTP_1_0) != 0 && res.headers().contains(HttpHeaderNames.TRANSFER_ENCODING)) {
                    res.headers().remove(HttpHeaderNames.TRANSFER_ENCODING); // the body is then written raw and ends at close
                }
                if (lastOnConnection(flags)) {
                    res.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                    closeAfterResponse = true;
                }
            }
            if (closeAfterResponse && msg instanceof LastHttpContent && !informational) {
                closeAfterResponse = false;
                promise = promise.unvoid().addListener(ChannelFutureListener.CLOSE);
            }
            if (msg instanceof RelayHead head) {
                writeHead(ctx, head, promise);
            } else if (relaying != NOT_RELAYING) {
                writeBody(ctx, msg, promise);
            } else {
                super.write(ctx, msg, promise);
            }
        }

        private void writeHead(ChannelHandlerContext ctx, RelayHead head, ChannelPromise promise) {
            boolean toHead = (answering & HEAD) != 0;
            ByteBuf bytes = head.finish();
            relaying = toHead || head.bodyless() ? NO_BODY : head.chunked() ? CHUNKED : AS_IS;
            ctx.write(bytes, promise);
        }

        private void writeBody(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            if (!(msg instanceof HttpContent c) || msg instanceof HttpResponse) {
                // A second head inside a relayed body would corrupt the stream: refused, as Netty's encoder does.
                ReferenceCountUtil.release(msg);
                promise.tryFailure(new IllegalStateException("unexpected message while relaying a body: " + msg));
                return;
            }
            boolean last = c instanceof LastHttpContent;
            ByteBuf data = c.content();
            int mode = relaying;
            if (last) {
                relaying = NOT_RELAYING;
            }
            switch (mode) {
                case AS_IS -> ctx.write(data, promise);
                case CHUNKED -> {
                    if (data.isReadable()) {
                        // The parts before the last carry no promise of their own: the last one completes only once
                        // everything before it was written, and fails with them.
                        ChannelPromise quiet = ctx.channel().unsafe().voidPromise();
                        ctx.write(chunkSize(ctx, data.readableBytes()), quiet);
                        ctx.write(data, quiet);
                        ctx.write(CRLF.duplicate(), last ? quiet : promise);
                    } else {
                        data.release();
                        if (!last) {
                            ctx.write(Unpooled.EMPTY_BUFFER, promise);
                        }
                    }
                    if (last) {
                        ctx.write(LAST_CHUNK.duplicate(), promise);
                    }
                }
                default -> {
                    data.release();
                    ctx.write(Unpooled.EMPTY_BUFFER, promise);
                }
            }
        }

        private static ByteBuf chunkSize(ChannelHandlerContext ctx, int size) {
            ByteBuf b = ctx.alloc().buffer(10);
            int digits = Math.max(1, (Integer.SIZE - Integer.numberOfLeadingZeros(size) + 3) / 4);
            for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
                b.writeByte(HEX[(size >>> shift) & 0xF]);
            }
            return b.writeByte('\r').writeByte('\n');
        }

        @Override
        protected boolean isContentAlwaysEmpty(HttpResponse msg) {
            if (msg.status().codeClass() == HttpStatusClass.INFORMATIONAL) {
                return super.isContentAlwaysEmpty(msg); // not the answer: the request's final response is still to come
            }
            return (answering & HEAD) != 0 || super.isContentAlwaysEmpty(msg);
        }
    }
}
