package io.kvgate.dataplane.http;

import io.kvgate.dataplane.wire.RelayHead;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpStatusClass;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.ArrayDeque;

/**
 * Decides, for every final response on a client connection, whether the connection survives it — whoever wrote the
 * response (the front door or an exchange relaying an engine):
 * <ul>
 *   <li>while the gateway drains, the response carries {@code Connection: close} and the connection closes after
 *       its last byte (keep-alive clients leave at their next response);</li>
 *   <li>an HTTP/1.0 client cannot read chunked encoding: its response is sent close-delimited (no
 *       {@code Transfer-Encoding}, {@code Connection: close}, closed after the last byte).</li>
 * </ul>
 * Relayed responses ({@link RelayHead}, the engine's head in bytes) get the same treatment as the gateway's own.
 * Sits between the HTTP codec and the front door; requests and responses pair up in order (the front door answers
 * one request at a time). Event-loop only.
 */
public final class ResponseConnectionPolicy extends ChannelDuplexHandler {
    private final DrainState drain;
    /** HTTP/1.0-ness of the requests read and not yet answered, oldest first (bounded by the pipelining limit). */
    private final ArrayDeque<Boolean> http10 = new ArrayDeque<>();
    private boolean closeAfterResponse;

    public ResponseConnectionPolicy(DrainState drain) {
        this.drain = drain;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (msg instanceof HttpRequest req) {
            http10.add(req.protocolVersion().equals(HttpVersion.HTTP_1_0));
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (msg instanceof RelayHead relayed) {
            boolean oldClient = Boolean.TRUE.equals(http10.peek());
            if (oldClient) {
                relayed.closeDelimited();
            }
            if (oldClient || drain.draining()) {
                relayed.closeConnection();
                closeAfterResponse = true;
            }
        }
        if (msg instanceof HttpResponse res && res.status().codeClass() != HttpStatusClass.INFORMATIONAL) {
            boolean oldClient = Boolean.TRUE.equals(http10.peek());
            if (oldClient && res.headers().contains(HttpHeaderNames.TRANSFER_ENCODING)) {
                res.headers().remove(HttpHeaderNames.TRANSFER_ENCODING); // the body is then written raw and ends at close
            }
            if (oldClient || drain.draining()) {
                res.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                closeAfterResponse = true;
            }
        }
        if (msg instanceof LastHttpContent && !(msg instanceof HttpResponse res && res.status().codeClass() == HttpStatusClass.INFORMATIONAL)) {
            http10.poll();
            if (closeAfterResponse) {
                closeAfterResponse = false;
                ctx.write(msg, promise.unvoid()).addListener(ChannelFutureListener.CLOSE);
                return;
            }
        }
        ctx.write(msg, promise);
    }
}
