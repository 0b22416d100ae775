package io.kvgate.dataplane.upstream;

import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * One HTTP request to one engine over a pooled keep-alive connection, on the client connection's event loop. The
 * response is delivered to an {@link UpstreamListener} as it arrives; the listener pauses reading
 * ({@link #pauseReading()}) while its client cannot take more and resumes it ({@link #readMore()}) when it can,
 * which turns a slow client into a slow upstream read instead of a growing buffer. Event-loop only.
 */
public final class UpstreamCall {
    private final UpstreamPool pool;
    private final EventLoop loop;
    private final EndpointState endpoint;
    private final HttpMethod method;
    private final String uri;
    private final HttpHeaders headers;
    private final ByteBuf body;
    private final UpstreamListener listener;
    private final long firstByteTimeoutNs;
    private final long idleTimeoutNs;

    private Channel channel;
    private boolean reused;
    private boolean retriedFresh;
    private long connectStartNs;
    private long connectNs;
    private boolean headReceived;
    private boolean done;
    private boolean anyBytes;
    private long lastReadNs;
    private ScheduledFuture<?> timer;
    private HttpResponse head;

    /**
     * @param headers request headers, owned by this call from now on (host and content-length are set here)
     * @param body request body; this call takes one reference and releases it when the request is written or fails
     */
    public UpstreamCall(UpstreamPool pool, EventLoop loop, EndpointState endpoint, HttpMethod method, String uri,
                        HttpHeaders headers, ByteBuf body, UpstreamListener listener, long firstByteTimeoutMs) {
        this.pool = pool;
        this.loop = loop;
        this.endpoint = endpoint;
        this.method = method;
        this.uri = uri;
        this.headers = headers;
        this.body = body;
        this.listener = listener;
        this.firstByteTimeoutNs = TimeUnit.MILLISECONDS.toNanos(firstByteTimeoutMs);
        this.idleTimeoutNs = TimeUnit.MILLISECONDS.toNanos(pool.config().idleTimeoutMs());
    }

    public EndpointState endpoint() {
        return endpoint;
    }

    public HttpResponse head() {
        return head;
    }

    public boolean isDone() {
        return done;
    }

    public void start() {
        Channel idle = pool.pollIdle(endpoint);
        if (idle != null) {
            reused = true;
            attach(idle);
            send();
            return;
        }
        connectFresh();
    }

    private void connectFresh() {
        connectStartNs = System.nanoTime();
        ChannelFuture f = pool.connect(loop, endpoint);
        f.addListener(x -> {
            if (done) {
                if (x.isSuccess()) {
                    f.channel().close();
                }
                return;
            }
            if (!x.isSuccess()) {
                fail(UpstreamListener.Failure.CONNECT, x.cause());
                return;
            }
            attach(f.channel());
            connectNs = System.nanoTime() - connectStartNs;
            send();
        });
    }

    /** Resume reading the response (back-pressure: call when downstream can take more again). */
    public void readMore() {
        if (!done && channel != null && !channel.config().isAutoRead()) {
            channel.config().setAutoRead(true);
        }
    }

    /**
     * Stop reading the response until {@link #readMore()}: the client is not taking bytes, so the engine's socket
     * buffer fills and TCP slows the engine down instead of the gateway buffering the stream.
     */
    public void pauseReading() {
        if (!done && channel != null) {
            channel.config().setAutoRead(false);
        }
    }

    /** Abandon the call: the connection is closed (never pooled), which makes the engine abort the request. */
    public void cancel() {
        if (!done) {
            abandon();
        }
    }

    /** Ends the call for good: timer, body reference and connection (closed, never pooled). */
    private void abandon() {
        done = true;
        cancelTimer();
        releaseBody();
        if (channel != null) {
            detach();
            channel.close();
        }
    }

    private void attach(Channel ch) {
        this.channel = ch;
        ch.pipeline().get(Handler.class).call = this;
    }

    private void detach() {
        Handler h = channel.pipeline().get(Handler.class);
        if (h != null && h.call == this) {
            h.call = null;
        }
    }

    private void send() {
        HttpHeaders h = headers; // the caller's own copy: this call owns it (set again on a resend)
        h.set("host", endpoint.hostHeader());
        h.setInt("content-length", body.readableBytes());
        DefaultFullHttpRequest req = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1, method, uri, body.retain(),
            h, io.netty.handler.codec.http.EmptyHttpHeaders.INSTANCE);
        lastReadNs = System.nanoTime();
        Channel sentOn = channel;
        channel.writeAndFlush(req).addListener(f -> {
            if (!f.isSuccess() && !done && channel == sentOn) {
                // The request did not leave: on a reused connection this is the stale keep-alive race.
                fail(UpstreamListener.Failure.CONNECT, f.cause());
            }
        });
        timer = loop.schedule(this::onTimer, firstByteTimeoutNs, TimeUnit.NANOSECONDS);
        listener.onSent(this, connectNs);
    }

    private void onTimer() {
        timer = null;
        if (done) {
            return;
        }
        long now = System.nanoTime();
        if (!headReceived) {
            fail(UpstreamListener.Failure.FIRST_BYTE_TIMEOUT, null);
            return;
        }
        long idleFor = now - lastReadNs;
        if (idleFor >= idleTimeoutNs) {
            fail(UpstreamListener.Failure.IDLE_TIMEOUT, null);
        } else {
            timer = loop.schedule(this::onTimer, idleTimeoutNs - idleFor, TimeUnit.NANOSECONDS);
        }
    }

    private void cancelTimer() {
        if (timer != null) {
            timer.cancel(false);
            timer = null;
        }
    }

    private void releaseBody() {
        if (body.refCnt() > 0) {
            body.release();
        }
    }

    private void fail(UpstreamListener.Failure failure, Throwable cause) {
        if (done) {
            return;
        }
        if (reused && !anyBytes && !retriedFresh
            && (failure == UpstreamListener.Failure.EARLY_CLOSE || failure == UpstreamListener.Failure.CONNECT)) {
            // A pooled connection the engine had already closed (the keep-alive race): the request is sent again
            // once on a fresh connection to the same endpoint, as HTTP clients do, before anyone hears of it.
            retriedFresh = true;
            reused = false;
            cancelTimer();
            detach();
            channel.close();
            channel = null;
            connectFresh();
            return;
        }
        abandon();
        listener.onFailure(this, failure, cause);
    }

    private void onRead(Object msg) {
        if (done) {
            ReferenceCountUtil.release(msg);
            return;
        }
        anyBytes = true;
        lastReadNs = System.nanoTime();
        if (msg instanceof HttpResponse r) {
            if (r.decoderResult().isFailure()) {
                ReferenceCountUtil.release(msg);
                fail(UpstreamListener.Failure.EARLY_CLOSE, r.decoderResult().cause());
                return;
            }
            if (r.status().code() == 100) {
                ReferenceCountUtil.release(msg);
                return;
            }
            headReceived = true;
            head = r;
            if (timer != null) {
                // Switch from the first-byte deadline to idle checks between chunks.
                timer.cancel(false);
                timer = loop.schedule(this::onTimer, idleTimeoutNs, TimeUnit.NANOSECONDS);
            }
            listener.onResponseHead(this, r);
        }
        if (msg instanceof HttpContent c) {
            if (c.decoderResult().isFailure()) {
                c.release();
                fail(UpstreamListener.Failure.MID_BODY, c.decoderResult().cause());
                return;
            }
            boolean last = c instanceof LastHttpContent;
            if (last) {
                done = true;
                cancelTimer();
                releaseBody();
                Channel ch = channel;
                detach();
                if (HttpUtil.isKeepAlive(head)) {
                    pool.release(endpoint, ch);
                } else {
                    ch.close();
                }
            }
            listener.onContent(this, c, last);
        }
    }

    /** The upstream channel's handler: forwards to whichever call currently owns the connection. */
    static final class Handler extends ChannelInboundHandlerAdapter {
        UpstreamCall call;

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            UpstreamCall c = call;
            if (c == null) {
                ReferenceCountUtil.release(msg); // bytes on an idle pooled connection: it is no longer trustworthy
                ctx.close();
                return;
            }
            c.onRead(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            UpstreamCall c = call;
            if (c != null && !c.done) {
                c.listener.onReadComplete(c);
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            UpstreamCall c = call;
            if (c != null && !c.done) {
                c.fail(c.headReceived ? UpstreamListener.Failure.MID_BODY : UpstreamListener.Failure.EARLY_CLOSE, null);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            UpstreamCall c = call;
            if (c != null && !c.done) {
                c.fail(c.headReceived ? UpstreamListener.Failure.MID_BODY : UpstreamListener.Failure.EARLY_CLOSE, cause);
            }
            ctx.close();
        }
    }
}
