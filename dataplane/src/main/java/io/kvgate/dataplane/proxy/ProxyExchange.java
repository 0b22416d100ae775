package io.kvgate.dataplane.proxy;

import io.kvgate.dataplane.request.ActiveExchange;
import io.kvgate.dataplane.request.ExchangeOwner;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.RouteRequest;
import io.kvgate.dataplane.route.RouteRequest.Role;
import io.kvgate.dataplane.route.RouterPort;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.SessionKeys;
import io.kvgate.dataplane.upstream.UpstreamCall;
import io.kvgate.dataplane.upstream.UpstreamListener;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultHttpResponse;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpHeaders;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One client request proxied to one engine: routed on the routing stage, then connected, sent and relayed on the
 * client connection's event loop. Streams are relayed chunk by chunk as the engine produces them: bytes are never
 * re-serialized, and the next upstream read waits until the client has taken the previous chunk.
 *
 * <p>Failure handling: a connect failure re-routes to another endpoint (nothing has reached the client); an engine
 * that dies before answering gets a 502, a first-byte timeout a 504; once a stream has started, a failure is framed
 * as one {@code data: {"error":…}} event and {@code data: [DONE]}, because a silent close looks like success to the
 * OpenAI SDKs. Engine errors in the older flat shape are re-emitted in the OpenAI shape with the engine's status.
 *
 * <p>Threading: event-loop only; the routing decision arrives on the event loop too ({@link #onRouted}, delivered in a
 * batch by the loop's {@link RouterPort}).
 */
public final class ProxyExchange implements RouteRequest, UpstreamListener, ActiveExchange {
    private final GatewayContext gw;
    private final ChannelHandlerContext ctx;
    private final ExchangeOwner owner;
    private final HttpRequest request;
    private final ByteBuf body;
    private final RequestFields fields;
    private final Rule rule;
    private final String ruleName;
    private final RouterPort port;
    private final String requestId;
    private final boolean explain;
    private final long startNs;
    private final List<EndpointState> tried = new ArrayList<>(2);
    private Role role = Role.ANY;
    private long firstByteTimeoutMs;
    private boolean stripKvTransferParams;
    private LegObserver observer = LegObserver.NONE;
    private RoutingInputs inputs = RoutingInputs.NONE;

    /** Lets an orchestrator (P/D) follow and couple this leg. Event-loop only. */
    public interface LegObserver {
        /** The engine's response head arrived (the leg produced output). */
        default void onResponseHead(int status) {}

        /** The leg failed before its response head; return true to take over (no client answer is sent). */
        default boolean onFailedBeforeHead(Failure failure) {
            return false;
        }

        LegObserver NONE = new LegObserver() {};
    }

    private EndpointState routedEndpoint;
    private String routedWhy;
    private long routedAtNs;
    private long dispatchNs;

    private EndpointState endpoint;
    private UpstreamCall call;
    private boolean responseStarted;
    private boolean sse;
    private boolean errorBody;
    private ByteBuf errorBuf;
    private int errorStatus;
    private ByteBuf ssePending;
    private boolean finished;
    private boolean clientGone;
    private int status;

    public ProxyExchange(GatewayContext gw, ChannelHandlerContext ctx, ExchangeOwner owner, HttpRequest request, ByteBuf body,
                         RequestFields fields, Rule rule, String requestId, boolean explain, long startNs) {
        this.gw = gw;
        this.ctx = ctx;
        this.owner = owner;
        this.request = request;
        this.body = body;
        this.fields = fields;
        this.rule = rule;
        this.ruleName = rule.name();
        this.port = gw.router().port(ctx.channel().eventLoop());
        this.requestId = requestId;
        this.explain = explain || rule.config().explain();
        this.startNs = startNs;
        this.firstByteTimeoutMs = gw.config().upstream().firstByteTimeoutMs();
    }

    /** Configures this exchange as the decode leg of a P/D request. */
    public ProxyExchange asLeg(Role legRole, long legFirstByteTimeoutMs, boolean stripParams, LegObserver legObserver) {
        this.role = legRole;
        this.firstByteTimeoutMs = legFirstByteTimeoutMs;
        this.stripKvTransferParams = stripParams;
        this.observer = legObserver;
        return this;
    }

    @Override
    public Role role() {
        return role;
    }

    /** What KV-aware and affinity policies route on (computed by the I/O thread before the ring). */
    public ProxyExchange withInputs(RoutingInputs in) {
        this.inputs = in;
        return this;
    }

    @Override
    public int[] promptTokens() {
        return inputs.promptTokens();
    }

    @Override
    public String cacheSalt() {
        return inputs.cacheSalt();
    }

    @Override
    public long sessionKeyHash() {
        return SessionKeys.hash(inputs.sessionKey());
    }

    @Override
    public int triedCount() {
        return tried.size();
    }

    @Override
    public EndpointState tried(int i) {
        return tried.get(i);
    }

    @Override
    public boolean explain() {
        return explain;
    }

    /** Starts on an endpoint the routing stage already chose (and counted) for this request. */
    public void startOn(EndpointState ep, String why) {
        this.routedEndpoint = ep;
        this.routedWhy = why;
        this.routedAtNs = gw.clock().nanoTime();
        this.dispatchNs = routedAtNs;
        run();
    }

    /**
     * Abandons the leg without answering the client (the orchestrator will): cancels the engine call and returns
     * the endpoint's load. Returns false if the leg already finished.
     */
    public boolean abortSilently() {
        if (finished) {
            return false;
        }
        finished = true;
        if (call != null) {
            call.cancel();
        }
        if (endpoint != null) {
            port.complete(endpoint, Outcome.RELEASED);
            endpoint = null;
        }
        if (errorBuf != null) {
            errorBuf.release();
            errorBuf = null;
        }
        release();
        return true;
    }

    public boolean responseStarted() {
        return responseStarted || errorBody;
    }

    /** Starts routing; on a full ring the request is shed at once with 503. */
    public void start() {
        routedAtNs = gw.clock().nanoTime();
        dispatchNs = routedAtNs;
        if (!port.tryRoute(this)) {
            gw.metrics().shed("router_ring_full");
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
        }
    }

    @Override
    public Rule rule() {
        return rule;
    }

    /** The routing decision, on the event loop. */
    @Override
    public void onRouted(EndpointState ep, Rule decidedBy, String why) {
        this.routedEndpoint = ep;
        this.routedWhy = why;
        run();
    }

    private void run() {
        gw.metrics().stages.recordNs(Stage.ROUTE_QUEUE, gw.clock().nanoTime() - routedAtNs);
        EndpointState ep = routedEndpoint;
        if (clientGone) {
            if (ep != null) {
                port.complete(ep, Outcome.RELEASED);
            }
            release();
            return;
        }
        if (ep == null) {
            gw.metrics().shed("no_healthy_endpoint");
            String msg = tried.isEmpty()
                ? "No healthy endpoint is available for model '" + fields.model + "'" + (routedWhy == null ? "" : " (" + routedWhy + ")")
                : "Could not connect to any endpoint for model '" + fields.model + "' (tried " + tried + ")";
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, msg, "no_healthy_endpoint", true);
            return;
        }
        endpoint = ep;
        tried.add(ep);
        HttpHeaders h = forwardHeaders(request.headers(), requestId);
        call = new UpstreamCall(gw.pool(), ctx.channel().eventLoop(), ep, request.method(), request.uri(), h,
            body.retain(), this, firstByteTimeoutMs);
        call.start();
    }

    /** The client's headers as an engine should see them: hop-by-hop and gateway-only headers dropped, the request id set. */
    public static HttpHeaders forwardHeaders(HttpHeaders in, String requestId) {
        HttpHeaders h = new io.netty.handler.codec.http.DefaultHttpHeaders();
        for (var e : in) {
            String k = e.getKey();
            if (!isHopByHop(k) && !k.equalsIgnoreCase("host") && !k.equalsIgnoreCase("content-length")
                && !k.equalsIgnoreCase("x-kvgate-explain") && !k.equalsIgnoreCase("expect")) {
                h.add(k, e.getValue());
            }
        }
        h.set("x-request-id", requestId);
        return h;
    }

    static boolean isHopByHop(String name) {
        return name.equalsIgnoreCase("connection") || name.equalsIgnoreCase("keep-alive")
            || name.equalsIgnoreCase("proxy-connection") || name.equalsIgnoreCase("transfer-encoding")
            || name.equalsIgnoreCase("te") || name.equalsIgnoreCase("trailer") || name.equalsIgnoreCase("upgrade")
            || name.equalsIgnoreCase("proxy-authenticate") || name.equalsIgnoreCase("proxy-authorization");
    }

    // ---- upstream events -------------------------------------------------------------------------------------

    private long sentAtNs;

    @Override
    public void onSent(UpstreamCall c, long connectNs) {
        long now = gw.clock().nanoTime();
        sentAtNs = now;
        if (connectNs > 0) {
            gw.metrics().stages.recordNs(Stage.UPSTREAM_CONNECT, connectNs);
        }
        if (tried.size() == 1) {
            // Everything between the last request byte and the engine's socket, except opening a connection.
            gw.metrics().stages.recordNs(Stage.GATEWAY_ADDED, now - dispatchNs - connectNs);
        }
    }

    @Override
    public void onResponseHead(UpstreamCall c, HttpResponse head) {
        if (clientGone) {
            return;
        }
        long now = gw.clock().nanoTime();
        gw.metrics().timeToFirstByte(ruleName, now - startNs);
        gw.metrics().stages.recordNs(Stage.UPSTREAM_FIRST_BYTE, now - sentAtNs);
        status = head.status().code();
        String ct = head.headers().get(HttpHeaderNames.CONTENT_TYPE, "");
        sse = ct.startsWith("text/event-stream");
        observer.onResponseHead(status);
        if ((status >= 400 || (stripKvTransferParams && ct.startsWith("application/json"))) && !sse) {
            // Aggregate (bounded) to re-emit the engine's error in the OpenAI shape.
            errorBody = true;
            errorStatus = status;
            errorBuf = ctx.alloc().buffer(256);
            c.readMore();
            return;
        }
        HttpResponse out = new DefaultHttpResponse(HttpVersion.HTTP_1_1, head.status());
        copyResponseHeaders(head.headers(), out.headers());
        if (!head.headers().contains(HttpHeaderNames.CONTENT_LENGTH)) {
            HttpUtil.setTransferEncodingChunked(out, true);
        }
        responseStarted = true;
        ctx.write(out);
    }

    private void copyResponseHeaders(HttpHeaders in, HttpHeaders out) {
        for (var e : in) {
            if (!isHopByHop(e.getKey())) {
                out.add(e.getKey(), e.getValue());
            }
        }
        out.set("x-request-id", requestId);
        if (explain) {
            out.set("x-kvgate-route", explanation());
        }
        if (!HttpUtil.isKeepAlive(request)) {
            out.set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
    }

    private String explanation() {
        return "endpoint=" + (endpoint == null ? "none" : endpoint.key()) + "; rule=" + ruleName
            + (routedWhy == null ? "" : "; " + routedWhy) + "; attempts=" + tried.size();
    }

    @Override
    public void onContent(UpstreamCall c, HttpContent content, boolean last) {
        if (clientGone) {
            content.release();
            return;
        }
        if (errorBody) {
            ByteBuf b = content.content();
            int bound = errorStatus >= 400 ? gw.config().upstream().maxErrorBodyBytes() : gw.config().limits().maxBodyBytes();
            int room = bound - errorBuf.readableBytes();
            errorBuf.writeBytes(b, b.readerIndex(), Math.min(room, b.readableBytes()));
            content.release();
            if (last) {
                sendNormalizedError();
            }
            return;
        }
        if (sse) {
            relaySseChunk(content, last);
            return;
        }
        if (last) {
            ctx.writeAndFlush(content);
            complete();
        } else {
            ctx.write(content);
        }
    }

    /**
     * Streams are relayed event by event: bytes after the last complete event ({@code \n\n}) are held back until
     * the rest arrives, so an engine dying in the middle of a frame never leaves a half event for the client to
     * parse before the error frame. Engines write whole events, so this normally holds back nothing; the bytes are
     * forwarded as they came, never re-serialized.
     */
    private void relaySseChunk(HttpContent content, boolean last) {
        ByteBuf b = content.content();
        ByteBuf data;
        if (ssePending != null) {
            data = ctx.alloc().compositeBuffer(2).addComponents(true, ssePending, b.retain());
            ssePending = null;
        } else {
            data = b.retain();
        }
        content.release();
        if (last) {
            ctx.writeAndFlush(new DefaultLastHttpContent(data));
            complete();
            return;
        }
        int cut = lastEventEnd(data);
        if (cut < 0 && data.readableBytes() <= MAX_HELD_SSE_BYTES) {
            ssePending = data;
            return;
        }
        if (cut < 0 || cut == data.writerIndex()) {
            ctx.write(new DefaultHttpContent(data));
            return;
        }
        ctx.write(new DefaultHttpContent(data.retainedSlice(data.readerIndex(), cut - data.readerIndex())));
        ssePending = data.readerIndex(cut);
    }

    /** Held-back partial event bound: a longer "event" is forwarded as it is. */
    private static final int MAX_HELD_SSE_BYTES = 1 << 20;

    /** Index just past the last blank line ({@code \n\n} or {@code \r\n\r\n}) in {@code buf}, or -1. */
    static int lastEventEnd(ByteBuf buf) {
        for (int i = buf.writerIndex() - 1; i > buf.readerIndex(); i--) {
            if (buf.getByte(i) == '\n') {
                byte p = buf.getByte(i - 1);
                if (p == '\n') {
                    return i + 1;
                }
                if (p == '\r' && i - 2 > buf.readerIndex() && buf.getByte(i - 2) == '\n') {
                    return i + 1;
                }
            }
        }
        return -1;
    }

    @Override
    public void onReadComplete(UpstreamCall c) {
        if (clientGone || finished) {
            return;
        }
        if (responseStarted) {
            ctx.flush();
        }
        if (!owner.clientWritable()) {
            c.pauseReading();
            owner.onClientWritable(c::readMore);
        }
    }

    @Override
    public void onFailure(UpstreamCall c, Failure failure, Throwable cause) {
        EndpointState ep = c.endpoint();
        gw.metrics().upstreamError(ep.key(), failure.name().toLowerCase(java.util.Locale.ROOT));
        if (clientGone) {
            return;
        }
        if (errorBuf != null) {
            errorBuf.release();
            errorBuf = null;
            errorBody = false;
        }
        if (finished) {
            return;
        }
        switch (failure) {
            case CONNECT -> {
                port.complete(ep, Outcome.FAILURE);
                if (!responseStarted && observer.onFailedBeforeHead(failure)) {
                    endpoint = null;
                    finished = true;
                    release();
                    return;
                }
                if (tried.size() < gw.config().upstream().maxConnectAttempts() && !responseStarted) {
                    gw.metrics().connectRetries.increment();
                    endpoint = null;
                    routedAtNs = gw.clock().nanoTime();
                    if (port.tryRoute(this)) {
                        return;
                    }
                }
                endpoint = null;
                if (cause instanceof io.netty.channel.ConnectTimeoutException) {
                    finishWithError(HttpResponseStatus.GATEWAY_TIMEOUT, "Connecting to the engines for model '" + fields.model
                        + "' timed out (tried " + tried + ")", "upstream_connect_timeout", true);
                } else {
                    finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "Could not connect to any endpoint for model '"
                        + fields.model + "' (tried " + tried + ")", "upstream_connect_failed", true);
                }
            }
            case EARLY_CLOSE -> {
                port.complete(ep, Outcome.FAILURE);
                endpoint = null;
                if (observer.onFailedBeforeHead(failure)) {
                    finished = true;
                    release();
                    return;
                }
                finishWithError(HttpResponseStatus.BAD_GATEWAY, "The engine at " + ep.key()
                    + " closed the connection before responding", "upstream_disconnected", false);
            }
            case FIRST_BYTE_TIMEOUT -> {
                port.complete(ep, Outcome.FAILURE);
                endpoint = null;
                finishWithError(HttpResponseStatus.GATEWAY_TIMEOUT, "The engine at " + ep.key() + " did not answer within "
                    + gw.config().upstream().firstByteTimeoutMs() + " ms", "upstream_timeout", false);
            }
            case MID_BODY, IDLE_TIMEOUT -> {
                port.complete(ep, Outcome.FAILURE);
                endpoint = null;
                String why = failure == Failure.IDLE_TIMEOUT
                    ? "The engine at " + ep.key() + " stopped sending for " + gw.config().upstream().idleTimeoutMs() + " ms"
                    : "The engine at " + ep.key() + " failed in the middle of the response";
                failMidStream(why, failure == Failure.IDLE_TIMEOUT ? "upstream_timeout" : "upstream_disconnected");
            }
        }
    }

    private void failMidStream(String message, String code) {
        if (!responseStarted) {
            finishWithError(code.equals("upstream_timeout") ? HttpResponseStatus.GATEWAY_TIMEOUT : HttpResponseStatus.BAD_GATEWAY,
                message, code, false);
            return;
        }
        if (sse) {
            gw.metrics().midStreamErrors.increment();
            String frames = OpenAiErrors.sseErrorFrames(message, "upstream_error", code);
            if (ssePending != null) {
                ssePending.release(); // the engine died inside this event: drop it, the client never saw any of it
                ssePending = null;
            }
            ctx.write(new DefaultHttpContent(Unpooled.copiedBuffer(frames, StandardCharsets.UTF_8)));
            ctx.writeAndFlush(new DefaultLastHttpContent());
            finished = true;
            record(status);
            release();
            owner.onExchangeDone(HttpUtil.isKeepAlive(request));
        } else {
            // A truncated JSON body cannot be repaired: closing is the only honest signal.
            finished = true;
            record(status);
            release();
            ctx.close();
            owner.onExchangeDone(false);
        }
    }

    private void sendNormalizedError() {
        String text = errorBuf.toString(StandardCharsets.UTF_8);
        errorBuf.release();
        errorBuf = null;
        String json = errorStatus >= 400 ? EngineErrors.toOpenAiShape(text, errorStatus) : EngineErrors.withoutKvTransferParams(text);
        FullHttpResponse r = OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.valueOf(errorStatus), json);
        r.headers().set("x-request-id", requestId);
        if (explain) {
            r.headers().set("x-kvgate-route", explanation());
        }
        // The engine answered: a 4xx is the client's mistake; a 5xx counts toward the endpoint's breaker.
        port.complete(endpoint, errorStatus >= 500 ? Outcome.FAILURE : Outcome.SUCCESS);
        endpoint = null;
        finished = true;
        record(errorStatus);
        release();
        boolean keepAlive = HttpUtil.isKeepAlive(request);
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        ctx.writeAndFlush(r);
        owner.onExchangeDone(keepAlive);
    }

    private void complete() {
        if (endpoint != null) {
            port.complete(endpoint, status >= 500 ? Outcome.FAILURE : Outcome.SUCCESS);
            endpoint = null;
        }
        finished = true;
        record(status);
        release();
        owner.onExchangeDone(HttpUtil.isKeepAlive(request));
    }

    private void finishWithError(HttpResponseStatus st, String message, String code, boolean retryAfter) {
        if (finished) {
            return;
        }
        finished = true;
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), st, message, null, code);
        r.headers().set("x-request-id", requestId);
        if (retryAfter) {
            r.headers().set(HttpHeaderNames.RETRY_AFTER, gw.config().health().retryAfterSeconds());
        }
        if (explain) {
            r.headers().set("x-kvgate-route", explanation());
        }
        boolean keepAlive = HttpUtil.isKeepAlive(request);
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        record(st.code());
        release();
        ctx.writeAndFlush(r);
        owner.onExchangeDone(keepAlive);
    }

    private void record(int st) {
        gw.metrics().request(ruleName, fields.model, st, gw.clock().nanoTime() - startNs);
    }

    private void release() {
        if (body.refCnt() > 0) {
            body.release();
        }
        if (ssePending != null) {
            ssePending.release();
            ssePending = null;
        }
    }

    /** The client went away: cancel the engine's work (closing the connection aborts the request there). */
    @Override
    public void onClientGone() {
        if (finished || clientGone) {
            return;
        }
        clientGone = true;
        gw.metrics().clientDisconnectsMidRequest.increment();
        if (call != null) {
            call.cancel();
        }
        if (errorBuf != null) {
            errorBuf.release();
            errorBuf = null;
        }
        if (endpoint != null) {
            port.complete(endpoint, Outcome.RELEASED);
            endpoint = null;
            record(499);
            release();
        }
        // If the exchange is still waiting on the routing stage, run() releases the body when the decision arrives.
    }

    public boolean isFinished() {
        return finished;
    }
}
