package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.channel.CombinedChannelDuplexHandler;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpDecoderConfig;
import io.netty.handler.codec.http.HttpMessage;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpRequestDecoder;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseEncoder;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.util.ArrayDeque;
import java.util.List;

/**
 * The client connection's HTTP/1.1 codec: Netty's request decoder (its headers kept in {@link RequestHeaders}, not a
 * hash map) and response encoder (for the gateway's own answers), plus relayed responses in bytes — a {@link RelayHead} followed by the body's {@code HttpContent}s, which
 * this codec frames itself (chunked, as is, or not at all) without building a response object or a header map.
 *
 * <p>What {@code HttpServerCodec} did is kept: a response to {@code HEAD} carries no body (requests and responses pair
 * up in order; relayed responses count too), and a request that came with both {@code Transfer-Encoding} and
 * {@code Content-Length} (a smuggling attempt, RFC 9112 §6.3) closes the connection after its response. Pipelining is
 * bounded by the front door. Event-loop only.
 */
public final class ClientHttpCodec extends CombinedChannelDuplexHandler<ClientHttpCodec.RequestDecoder, ClientHttpCodec.ResponseEncoder> {
    private static final ByteBuf CRLF = Unpooled.unreleasableBuffer(Unpooled.directBuffer(2).writeByte('\r').writeByte('\n'))
        .asReadOnly();
    private static final ByteBuf LAST_CHUNK = Unpooled.unreleasableBuffer(Unpooled.directBuffer(5)
        .writeBytes(new byte[] {'0', '\r', '\n', '\r', '\n'})).asReadOnly();
    private static final byte[] HEX = "0123456789abcdef".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    /** Whether each request read and not yet answered was a HEAD, oldest first. */
    private final ArrayDeque<Boolean> headRequests = new ArrayDeque<>();
    private boolean closeAfterResponse;

    public ClientHttpCodec(int maxInitialLineLength, int maxHeaderSize, int maxChunkSize) {
        init(new RequestDecoder(new HttpDecoderConfig().setMaxInitialLineLength(maxInitialLineLength)
            .setMaxHeaderSize(maxHeaderSize).setMaxChunkSize(maxChunkSize)
            .setHeadersFactory(RequestHeaders.HEADERS).setTrailersFactory(RequestHeaders.TRAILERS)), new ResponseEncoder());
    }

    private boolean nextIsHead() {
        Boolean head = headRequests.poll();
        return head != null && head;
    }

    /** Netty's request decoder, noting what the response side needs to know of each request. */
    public final class RequestDecoder extends HttpRequestDecoder {
        RequestDecoder(HttpDecoderConfig config) {
            super(config);
        }

        @Override
        protected void decode(ChannelHandlerContext ctx, ByteBuf buffer, List<Object> out) throws Exception {
            int before = out.size();
            super.decode(ctx, buffer, out);
            for (int i = before; i < out.size(); i++) {
                if (out.get(i) instanceof HttpRequest r) {
                    headRequests.add(HttpMethod.HEAD.equals(r.method()));
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
            if (closeAfterResponse && msg instanceof LastHttpContent) {
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
            boolean toHead = nextIsHead();
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
            return nextIsHead() || super.isContentAlwaysEmpty(msg);
        }
    }
}
