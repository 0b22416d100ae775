package io.kvgate.dataplane.http;

import io.kvgate.dataplane.kv.RoutingInputsBuilder;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.proxy.ActiveExchange;
import io.kvgate.dataplane.proxy.ExchangeOwner;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.proxy.ProxyExchange;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * The OpenAI front door for one client connection: handles one request at a time (a pipelining client's next
 * requests are queued, bounded, with reading paused until the current response is done), pulls the routing fields while the body arrives, answers
 * local routes, and hands proxied requests to a {@link ProxyExchange}. Every refusal is an OpenAI error object and is
 * counted; the connection is closed only when the stream can no longer be trusted (oversized input, timeouts).
 * Event-loop only.
 */
public final class FrontDoorHandler extends ChannelInboundHandlerAdapter implements ExchangeOwner {
    /** Requests a pipelining client may queue behind the one in progress; more closes the connection. */
    private static final int MAX_PIPELINED_MESSAGES = 64;

    private final GatewayContext gw;
    private final LocalRoutes local;
    private ChannelHandlerContext ctx;

    private HttpRequest head;
    private ByteBuf body;
    private RequestFieldExtractor extractor;
    private final RequestFields fields = new RequestFields();
    private boolean discarding;
    private ScheduledFuture<?> readDeadline;
    private long requestStartNs;

    private ActiveExchange exchange;
    private boolean busy;
    private Runnable onWritable;
    private final ArrayDeque<Object> pipelined = new ArrayDeque<>();

    public FrontDoorHandler(GatewayContext gw, LocalRoutes local) {
        this.gw = gw;
        this.local = local;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        gw.metrics().openClientConnections.incrementAndGet();
        gw.metrics().clientConnectionsTotal.increment();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        gw.metrics().openClientConnections.decrementAndGet();
        if (exchange != null) {
            exchange.onClientGone();
            exchange = null;
        }
        resetRequest();
        Object m;
        while ((m = pipelined.poll()) != null) {
            ReferenceCountUtil.release(m);
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (busy) {
            // A pipelining client: stop reading until the current response is done (auto-read is otherwise on, so
            // the socket's read interest is not re-armed for every request).
            ctx.channel().config().setAutoRead(false);
            if (pipelined.size() >= MAX_PIPELINED_MESSAGES) {
                ReferenceCountUtil.release(msg);
                gw.metrics().badRequest("pipeline_overflow");
                ctx.close();
                return;
            }
            pipelined.add(msg);
            return;
        }
        onMessage(msg);
    }

    private void onMessage(Object msg) {
        try {
            if (msg instanceof HttpRequest req) {
                onRequestHead(req);
            }
            if (msg instanceof HttpContent c && !discarding && head != null) {
                onContent(c);
            }
        } finally {
            ReferenceCountUtil.release(msg);
        }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable() && onWritable != null) {
            Runnable r = onWritable;
            onWritable = null;
            r.run();
        }
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof IdleStateEvent && !busy && head == null) {
            ctx.close(); // idle keep-alive connection
        } else {
            ctx.fireUserEventTriggered(evt);
        }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        gw.metrics().badRequest("io_error");
        if (!(cause instanceof java.io.IOException)) {
            System.err.println("kvgate: front door error (connection closed): " + cause);
        }
        ctx.close();
    }

    // ---- request assembly ------------------------------------------------------------------------------------

    private void onRequestHead(HttpRequest req) {
        requestStartNs = gw.clock().nanoTime();
        if (req.decoderResult().isFailure()) {
            Throwable cause = req.decoderResult().cause();
            if (cause instanceof TooLongHttpLineException) {
                rejectAndClose(HttpResponseStatus.REQUEST_URI_TOO_LONG, "request_line_too_long",
                    "The request line exceeds " + gw.config().limits().maxInitialLineBytes() + " bytes.");
            } else if (cause instanceof TooLongHttpHeaderException || cause instanceof TooLongFrameException) {
                rejectAndClose(HttpResponseStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers_too_large",
                    "The request headers exceed " + gw.config().limits().maxHeaderBytes() + " bytes.");
            } else {
                rejectAndClose(HttpResponseStatus.BAD_REQUEST, "malformed_http", "Malformed HTTP request: " + cause.getMessage());
            }
            return;
        }
        head = req;
        long declared = HttpUtil.getContentLength(req, -1L);
        int max = gw.config().limits().maxBodyBytes();
        if (declared > max) {
            rejectAndClose(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                "The request body (" + declared + " bytes) exceeds the limit of " + max + " bytes.");
            return;
        }
        body = ctx.alloc().buffer((int) Math.max(256, Math.min(declared < 0 ? 4096 : declared, max)));
        extractor = new RequestFieldExtractor(fields);
        readDeadline = ctx.executor().schedule(this::onReadDeadline, gw.config().limits().requestReadTimeoutMs(), TimeUnit.MILLISECONDS);
        if (HttpUtil.is100ContinueExpected(req)) {
            ctx.writeAndFlush(new io.netty.handler.codec.http.DefaultFullHttpResponse(io.netty.handler.codec.http.HttpVersion.HTTP_1_1,
                HttpResponseStatus.CONTINUE));
        }
    }

    private void onContent(HttpContent c) {
        if (c.decoderResult().isFailure()) {
            rejectAndClose(HttpResponseStatus.BAD_REQUEST, "malformed_http", "Malformed HTTP body: " + c.decoderResult().cause().getMessage());
            return;
        }
        ByteBuf b = c.content();
        int max = gw.config().limits().maxBodyBytes();
        if (body.readableBytes() + b.readableBytes() > max) {
            rejectAndClose(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                "The request body exceeds the limit of " + max + " bytes.");
            return;
        }
        if (b.isReadable()) {
            extractor.feed(b.nioBuffer());
            body.writeBytes(b);
        }
        if (c instanceof LastHttpContent) {
            cancelReadDeadline();
            dispatch();
        }
    }

    private void onReadDeadline() {
        readDeadline = null;
        if (head != null && !busy) {
            rejectAndClose(HttpResponseStatus.REQUEST_TIMEOUT, "request_read_timeout",
                "The request was not received within " + gw.config().limits().requestReadTimeoutMs() + " ms.");
        }
    }

    private void cancelReadDeadline() {
        if (readDeadline != null) {
            readDeadline.cancel(false);
            readDeadline = null;
        }
    }

    private void resetRequest() {
        cancelReadDeadline();
        if (body != null && body.refCnt() > 0) {
            body.release();
        }
        body = null;
        head = null;
        extractor = null;
    }

    // ---- dispatch --------------------------------------------------------------------------------------------

    private void dispatch() {
        HttpRequest req = head;
        String uri = req.uri();
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        boolean proxied = path.equals("/v1/chat/completions") || path.equals("/v1/completions");
        if (proxied && req.method().equals(HttpMethod.POST)) {
            onProxyRoute(req, path);
            return;
        }
        FullHttpResponse r = local.handle(ctx, req, path, body, fields, extractor);
        respond(r, true);
    }

    private void onProxyRoute(HttpRequest req, String path) {
        String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
        if (ct != null && !ct.regionMatches(true, 0, "application/json", 0, 16)) {
            respondError(HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE, "content_type",
                "Content-Type must be application/json (got '" + ct + "').", null);
            return;
        }
        if (!local.authorized(req)) {
            respondError(HttpResponseStatus.UNAUTHORIZED, "unauthorized", "Missing or invalid API key (Authorization: Bearer ...).", null);
            return;
        }
        String problem = LocalRoutes.validateBody(extractor, fields, path.equals("/v1/chat/completions"));
        if (problem != null) {
            respondError(HttpResponseStatus.BAD_REQUEST, "invalid_body", problem, LocalRoutes.lastParam(fields, problem));
            return;
        }
        gw.metrics().stages.recordNs(Stage.PARSE, gw.clock().nanoTime() - requestStartNs);
        Rule rule = gw.router().table().ruleForModel(fields.model);
        if (rule == null) {
            gw.metrics().request("", fields.model, 404, gw.clock().nanoTime() - requestStartNs);
            respond(LocalRoutes.modelNotFound(ctx, fields.model), true);
            return;
        }
        String requestId = RequestIds.keepOrGenerate(req.headers().get("x-request-id"));
        boolean explain = "1".equals(req.headers().get("x-kvgate-explain")) || "true".equalsIgnoreCase(req.headers().get("x-kvgate-explain"));
        ByteBuf b = body;
        body = null; // ownership moves to the exchange
        busy = true;
        head = null;
        extractor = null;
        ActiveExchange custom = gw.hooks().startCustomExchange(ctx, req, b, fields, rule, requestId, explain, requestStartNs, this);
        if (custom != null) {
            if (busy) {
                exchange = custom;
            }
            return;
        }
        ProxyExchange px = new ProxyExchange(gw, ctx, this, req, b, fields, rule, requestId, explain, requestStartNs)
            .withInputs(RoutingInputsBuilder.build(rule, req.headers(), b, fields, path.equals("/v1/chat/completions"),
                gw.metrics(), gw.clock()));
        exchange = px;
        px.start();
    }

    private void respondError(HttpResponseStatus st, String reason, String message, String param) {
        gw.metrics().badRequest(reason);
        gw.metrics().request("", fields.model, st.code(), gw.clock().nanoTime() - requestStartNs);
        respond(OpenAiErrors.response(ctx.alloc(), st, message, param, null), true);
    }

    private void respond(FullHttpResponse r, boolean keepAliveAllowed) {
        boolean keepAlive = keepAliveAllowed && head != null && HttpUtil.isKeepAlive(head);
        String rid = head == null ? null : head.headers().get("x-request-id");
        r.headers().set("x-request-id", RequestIds.keepOrGenerate(rid));
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        resetRequest();
        if (keepAlive) {
            ctx.writeAndFlush(r);
            drainPipelined();
        } else {
            ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
        }
    }

    private void rejectAndClose(HttpResponseStatus st, String reason, String message) {
        gw.metrics().badRequest(reason);
        gw.metrics().request("", null, st.code(), gw.clock().nanoTime() - requestStartNs);
        discarding = true;
        resetRequest();
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), st, message, null, null);
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        r.headers().set("x-request-id", RequestIds.generate());
        ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
    }

    // ---- ExchangeOwner ---------------------------------------------------------------------------------------

    @Override
    public void onExchangeDone(boolean keepAlive) {
        exchange = null;
        busy = false;
        onWritable = null;
        if (!keepAlive) {
            ctx.flush();
            ctx.close();
            return;
        }
        drainPipelined();
        if (!busy && !ctx.channel().config().isAutoRead()) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    private void drainPipelined() {
        Object m;
        while (!busy && ctx.channel().isActive() && (m = pipelined.poll()) != null) {
            onMessage(m);
        }
    }

    @Override
    public boolean clientWritable() {
        return ctx.channel().isWritable();
    }

    @Override
    public void onClientWritable(Runnable action) {
        this.onWritable = action;
        if (ctx.channel().isWritable()) {
            onWritable = null;
            action.run();
        }
    }
}
