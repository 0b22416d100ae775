package io.kvgate.dataplane.http;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.dataplane.accesslog.AccessRecord;
import io.kvgate.dataplane.accesslog.TraceIds;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.dataplane.prompt.PromptStage;
import io.kvgate.dataplane.prompt.TemplateWarnings;
import io.kvgate.dataplane.request.JsonMembers;
import io.kvgate.dataplane.route.AdapterDirectory;
import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.request.ActiveExchange;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.kvgate.dataplane.request.EngineDialect;
import io.kvgate.dataplane.request.EngineFieldStripper;
import io.kvgate.dataplane.request.ExchangeOwner;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.PriorityInputs;
import io.kvgate.dataplane.request.Problem;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RequestEdits;
import io.kvgate.dataplane.request.RequestIds;
import io.kvgate.dataplane.request.RequestValidator;
import io.kvgate.dataplane.request.ToolChoiceCheck;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.trace.RequestTrace;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DuplexChannel;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.handler.codec.http.TooLongHttpHeaderException;
import io.netty.handler.codec.http.TooLongHttpLineException;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * The OpenAI front door for one client connection, in stages:
 * <ol>
 *   <li><b>Head</b>: drain, route and method, {@code api_keys}, Content-Type and the declared length are decided
 *       from the request head alone, before a body byte is buffered (a refused head never gets {@code 100 Continue}
 *       and its body is never read).</li>
 *   <li><b>Body</b>: the body buffer starts empty and grows as bytes arrive (never sized from Content-Length); a body
 *       that arrives whole in one read is kept as the decoder's slice of it instead ({@link #borrowable}); the
 *       complete body is scanned once, in place, by the field extractor's own JSON lexer; the body is validated
 *       into a typed {@link Problem} or accepted.</li>
 *   <li><b>Prompt</b>: the rule's prompt inputs (tokens, salt, session key) are computed on this I/O thread.</li>
 *   <li>The {@link ParsedRequest} goes to the exchange layer through {@link ExchangeStarter#start}.</li>
 * </ol>
 * One request is handled at a time; a pipelining client's next requests are queued (at most
 * {@link #MAX_PIPELINED_REQUESTS}, counted as requests, not chunks) with reading paused until the current response
 * is done. A client that does not take its answers is not read either: once its unsent bytes are over the
 * connection's write high-water mark ({@code limits.max_buffered_response_bytes}), after a local answer or a proxied
 * one alike, no queued request is answered and nothing more is read until the bytes fall under the low mark; a client
 * that stays over it for {@code limits.client_stall_timeout_ms} is disconnected. So the bytes a non-reading client
 * pins are the high-water mark plus the one answer that crossed it ({@link FrontDoorBudget}).
 * {@code request_read_timeout_ms} runs from the first byte of a request (head included) to its last (408 and close).
 * Every refusal is an OpenAI error object and is counted. Event-loop only.
 */
public final class FrontDoorHandler extends ChannelInboundHandlerAdapter implements ExchangeOwner {
    /** Requests a pipelining client may queue behind the one in progress; more closes the connection. */
    static final int MAX_PIPELINED_REQUESTS = 64;
    /** Smallest body buffer allocated when the first body bytes arrive (it then grows with the body). */
    private static final int MIN_BODY_BUFFER = 256;
    /**
     * After a refusal that closes the connection while the client may still be sending, the output side is shut
     * first and the input drained this long: closing with unread input would reset the connection and could
     * destroy the error response before the client read it (the lingering close of nginx/Apache).
     */
    static final long LINGER_MS = 2_000;

    private final GatewayContext gw;
    private final LocalRoutes local;
    private final ExchangeStarter starter;
    private final DrainState drain;
    private ChannelHandlerContext ctx;

    // ---- the request being read (head stage → body stage) ----
    private HttpRequest head;
    private FrontRoute route;
    /** The discovered LoRA adapter the current request's model names (null: a configured name), set by validatedRule. */
    private AdapterDirectory.Served discovered;
    private String path;
    private ByteBuf body;
    private RequestFieldExtractor extractor;
    private final RequestFields fields = new RequestFields();
    /** The gateway's edits of the body being forwarded (reused per request; empty on the byte-for-byte path). */
    private final RequestEdits edits = new RequestEdits();
    private long requestStartNs;
    /** The current request's trace when it is sampled (proxied routes only), ended when its answer is done. */
    private RequestTrace trace;
    /** The access-log record of the request being read or answered (one per connection, reset per request). */
    private final AccessRecord access = new AccessRecord();
    /** A refused head whose (empty) body is skipped until its last content; the connection then goes on. */
    private boolean skippingBody;
    /** The connection is being closed: every further inbound message is dropped. */
    private boolean closing;
    /** Whether a request is being read, and by when it must have arrived (the event loop's clock). */
    private boolean readTimed;
    private long readDueNs;
    private long readTimeoutMs;
    /** When the connection last finished a request (or opened): the idle timeout runs from here while no request is read. */
    private long idleSinceNs;
    /** The connection's one timer, for both deadlines: kept across requests (see {@link #onWakeup}). */
    private ScheduledFuture<?> wakeup;
    private long wakeupAtNs;
    private final Runnable onWakeup = this::onWakeup; // one per connection, not one per request
    private final Runnable onBytesReceived = this::onBytesReceived;

    // ---- the request being answered ----
    private ActiveExchange exchange;
    private boolean busy;
    private Runnable onWritable;
    private final ArrayDeque<Object> pipelined = new ArrayDeque<>();
    private int pipelinedRequests;
    /**
     * The client's unsent answer bytes went over the high-water mark: reading and answering wait for it to take them
     * (channelWritabilityChanged), at most until {@link #stalledSinceNs} plus the stall timeout.
     */
    private boolean awaitingWritable;
    private long stalledSinceNs;

    public FrontDoorHandler(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain) {
        this.gw = gw;
        this.local = local;
        this.starter = starter;
        this.drain = drain;
    }

    /**
     * What the HTTP codec calls when raw request bytes arrive, before it decodes them: it starts the read deadline on
     * the first byte of a request head (the codec reports a head only once it is complete, so a client trickling its
     * head would otherwise never be timed).
     */
    public Runnable requestBytesListener() {
        return onBytesReceived;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        gw.metrics().openClientConnections.incrementAndGet();
        gw.metrics().clientConnectionsTotal.increment();
        becameIdle(); // a connection that never sends a request is closed at the idle timeout
        ctx.fireChannelActive();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        gw.metrics().openClientConnections.decrementAndGet();
        if (exchange != null) {
            exchange.onClientGone();
            exchange = null;
        }
        endTrace(499);
        resetRequest();
        if (wakeup != null) {
            wakeup.cancel(false); // a closed connection leaves nothing in the loop's timer queue
            wakeup = null;
        }
        Object m;
        while ((m = pipelined.poll()) != null) {
            ReferenceCountUtil.release(m);
        }
        pipelinedRequests = 0;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (closing) {
            ReferenceCountUtil.release(msg);
            if (msg instanceof LastHttpContent) {
                ctx.close(); // the client finished sending what it had started: nothing left to linger for
            }
            return;
        }
        if (busy || awaitingWritable) {
            // A pipelining client: stop reading until the current response is done, or until the client took what
            // it was sent (auto-read is otherwise on, so the socket's read interest is not re-armed for every request).
            ctx.channel().config().setAutoRead(false);
            if (msg instanceof HttpRequest) {
                if (pipelinedRequests >= MAX_PIPELINED_REQUESTS) {
                    ReferenceCountUtil.release(msg);
                    gw.metrics().badRequest("pipeline_overflow");
                    closing = true;
                    ctx.close();
                    return;
                }
                pipelinedRequests++;
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
            if (msg instanceof HttpContent c && !closing && head != null) {
                if (skippingBody) {
                    onSkippedContent(c);
                } else {
                    onContent(c);
                }
            }
        } finally {
            ReferenceCountUtil.release(msg);
        }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable()) {
            if (onWritable != null) {
                Runnable r = onWritable;
                onWritable = null;
                r.run();
            } else if (awaitingWritable && !closing) {
                awaitingWritable = false; // the client took its answers down to the low mark: go on with the queue
                drainPipelined();
                resumeReading();
            }
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        gw.metrics().badRequest("io_error");
        if (!(cause instanceof java.io.IOException)) {
            Log.warn("front door error (connection closed): " + cause);
        }
        ctx.close();
    }

    // ---- the connection's one wake-up: read deadline and idle timeout -----------------------------------------

    /*
     * One timer per connection serves both of its deadlines: request_read_timeout_ms while a request is being read
     * (from its first byte to its last) and client_idle_timeout_ms between requests (from the end of the last
     * response, or from accept). Neither costs a request a timer of its own: a request writes fields, and a wake-up
     * that finds its deadline moved (a later request, a response that ended since) schedules itself again. A wake-up
     * is never scheduled further out than the read timeout, so a request's read deadline is always at or after the
     * pending wake-up and starting it needs no rescheduling.
     */

    /**
     * Starts the read deadline on a request's first byte. A pending wake-up is kept, not cancelled and scheduled
     * again: when it fires it re-checks the request being read then ({@link #onWakeup}).
     */
    private void onBytesReceived() {
        if (!busy && !awaitingWritable && !closing && !readTimed) {
            readTimed = true;
            readTimeoutMs = gw.config().limits().requestReadTimeoutMs();
            long now = ctx.executor().ticker().nanoTime();
            readDueNs = now + TimeUnit.MILLISECONDS.toNanos(readTimeoutMs);
            armWakeup(readDueNs, now);
        }
    }

    /**
     * A request ended (answered, refused, or the connection opened): the idle timeout runs from now. Its deadline
     * is checked by the pending wake-up or one armed for it.
     */
    private void becameIdle() {
        long now = ctx.executor().ticker().nanoTime();
        idleSinceNs = now;
        armWakeup(now + TimeUnit.MILLISECONDS.toNanos(gw.config().limits().clientIdleTimeoutMs()), now);
    }

    /** Makes sure a wake-up comes at or before {@code dueNs}. */
    private void armWakeup(long dueNs, long now) {
        if (wakeup != null && dueNs - wakeupAtNs < 0) {
            wakeup.cancel(false); // pending for later than this deadline (a timeout was lowered)
            wakeup = null;
        }
        if (wakeup == null) {
            scheduleWakeup(dueNs, now);
        }
    }

    private void scheduleWakeup(long dueNs, long now) {
        long bound = now + TimeUnit.MILLISECONDS.toNanos(gw.config().limits().requestReadTimeoutMs());
        wakeupAtNs = dueNs - bound < 0 ? dueNs : bound;
        wakeup = ctx.executor().schedule(onWakeup, Math.max(0, wakeupAtNs - now), TimeUnit.NANOSECONDS);
    }

    private void onWakeup() {
        wakeup = null;
        if (closing || busy) {
            return; // busy: the exchange's end starts the idle timeout (becameIdle) and arms a wake-up
        }
        long now = ctx.executor().ticker().nanoTime();
        if (awaitingWritable) {
            long stallDueNs = stalledSinceNs + TimeUnit.MILLISECONDS.toNanos(gw.config().limits().clientStallTimeoutMs());
            if (now - stallDueNs < 0) {
                scheduleWakeup(stallDueNs, now);
                return;
            }
            // It took nothing back under the low mark for the stall timeout: its unsent answers are not held any longer.
            gw.metrics().badRequest("client_stalled");
            closing = true;
            ctx.close();
            return;
        }
        if (readTimed) {
            if (now - readDueNs < 0) {
                scheduleWakeup(readDueNs, now); // left by an earlier deadline: this request is not due yet
                return;
            }
            rejectAndClose(HttpResponseStatus.REQUEST_TIMEOUT, "request_read_timeout",
                "The request was not received within " + readTimeoutMs + " ms.");
            return;
        }
        if (head != null) {
            return; // a refused head's empty body being skipped: its end starts the idle timeout
        }
        io.netty.channel.ChannelOutboundBuffer queued = ctx.channel().unsafe().outboundBuffer();
        if (queued != null && queued.totalPendingWriteBytes() > 0) {
            idleSinceNs = now; // the last response is still being written to a slow reader: not idle yet
        }
        long idleDueNs = idleSinceNs + TimeUnit.MILLISECONDS.toNanos(gw.config().limits().clientIdleTimeoutMs());
        if (now - idleDueNs < 0) {
            scheduleWakeup(idleDueNs, now);
            return;
        }
        closing = true;
        ctx.close(); // an idle keep-alive connection
    }

    /** The request was read (or abandoned): its deadline no longer holds; a pending wake-up stays for the next. */
    private void cancelReadDeadline() {
        readTimed = false;
    }

    // ---- head stage ------------------------------------------------------------------------------------------

    private void onRequestHead(HttpRequest req) {
        requestStartNs = gw.clock().nanoTime();
        onBytesReceived(); // a pipelined head read while busy starts its clock now
        head = req;
        fields.reset();
        access.reset();
        access.traceId = TraceIds.fromTraceparent(req.headers().get(TraceIds.HEADER));
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
        if (drain.draining()) {
            FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.SERVICE_UNAVAILABLE,
                "The gateway is draining and takes no new requests; retry (another instance will answer).", null, null);
            r.headers().set(HttpHeaderNames.RETRY_AFTER, gw.config().health().retryAfterSeconds());
            gw.metrics().shed("draining");
            access.errorCode = "draining";
            refuseHead(r, 503, true);
            return;
        }
        String uri = req.uri();
        int q = uri.indexOf('?');
        path = q < 0 ? uri : uri.substring(0, q);
        route = FrontRoute.of(path);
        if (route == FrontRoute.CHAT || route == FrontRoute.COMPLETIONS) {
            trace = gw.tracing().begin(req.headers(), requestStartNs, requestStartNs, path, route.chat());
            if (trace != null) {
                access.traceId = trace.traceId(); // a new trace when the client sent none: the log names the gateway's
            }
        }
        if (route == FrontRoute.UNKNOWN) {
            // An unknown /v1/ route reveals nothing to a client without a key: it gets the same 401 as a known one.
            if (path.startsWith("/v1/") && !authorized(req)) {
                refuseUnauthorized();
                return;
            }
            refused("unknown_route");
            refuseHead(OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.NOT_FOUND, "Unknown route: " + req.method() + " "
                + path, null, null), 404, false);
            return;
        }
        if (!route.allows(req.method())) {
            refused("method_not_allowed");
            FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.METHOD_NOT_ALLOWED,
                "Method not allowed on " + path + " (use " + route.allowed() + ").", null, null);
            r.headers().set(HttpHeaderNames.ALLOW, route.allowed());
            refuseHead(r, 405, false);
            return;
        }
        if (route.needsApiKey() && !authorized(req)) {
            refuseUnauthorized();
            return;
        }
        if (route.jsonBody()) {
            String ct = req.headers().get(HttpHeaderNames.CONTENT_TYPE);
            if (ct != null && !ct.regionMatches(true, 0, "application/json", 0, 16)) {
                refused("content_type");
                refuseHead(OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.UNSUPPORTED_MEDIA_TYPE,
                    "Content-Type must be application/json (got '" + ct + "').", null, null), 415, false);
                return;
            }
        }
        long declared = HttpUtil.getContentLength(req, -1L);
        int max = gw.config().limits().maxBodyBytes();
        if (declared > max) {
            rejectAndClose(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                "The request body (" + declared + " bytes) exceeds the limit of " + max + " bytes.");
            return;
        }
        if (route.jsonBody()) {
            extractor = new RequestFieldExtractor(fields);
        }
        if (HttpUtil.is100ContinueExpected(req)) {
            ctx.writeAndFlush(new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
        }
    }

    /**
     * Whether the caller may use {@code /v1/*}: a valid API key, or a verified client certificate whose subject CN is
     * one of {@code tls.client_identities}. The access log names the caller by key id or {@code cn:NAME}, never a key.
     */
    private boolean authorized(HttpRequest req) {
        var cfg = gw.config();
        java.util.List<String> keys = cfg.apiKeys();
        int key = ApiKeyAuth.matchedKey(keys, req.headers());
        access.keyId = ApiKeyAuth.keyId(keys, key);
        if (key != ApiKeyAuth.REFUSED) {
            return true;
        }
        var tls = cfg.tls().listener();
        String identity = ctx.channel().attr(io.kvgate.dataplane.tls.ServerTls.CLIENT_IDENTITY).get();
        if (tls != null && ApiKeyAuth.identityAuthorized(tls.clientIdentities(), identity)) {
            access.keyId = "cn:" + identity;
            return true;
        }
        return false;
    }

    /** A refusal's reason: counted in {@code kvgate_bad_requests_total} and the access log's {@code error_code}. */
    private void refused(String reason) {
        gw.metrics().badRequest(reason);
        access.errorCode = reason;
    }

    /**
     * The client's {@code X-Request-Id} or one generated for it, once per request: the response header and the
     * access log carry the same.
     */
    private String requestId() {
        if (access.requestId == null) {
            access.requestId = RequestIds.keepOrGenerate(head == null ? null : head.headers().get("x-request-id"));
        }
        return access.requestId;
    }

    /** The access-log line of a request the front door answers itself (a refusal, a local route). */
    private void logAnswered(FullHttpResponse r) {
        AccessLog log = gw.accessLog();
        if (!log.enabled()) {
            return;
        }
        if (head == null) {
            String code = access.errorCode;
            access.reset(); // timed out before its head was complete: nothing of the last request belongs to it
            access.errorCode = code;
            access.durationNs = AccessRecord.UNKNOWN;
        } else {
            access.durationNs = gw.clock().nanoTime() - requestStartNs;
        }
        requestId();
        access.model = fields.model;
        access.stream = fields.stream;
        access.status = r.status().code();
        access.bytesOut = r.content().readableBytes();
        log.log(access);
    }

    private void refuseUnauthorized() {
        refused("unauthorized");
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.UNAUTHORIZED,
            "Missing or invalid API key (Authorization: Bearer ...).", null, null);
        r.headers().set(HttpHeaderNames.WWW_AUTHENTICATE, "Bearer");
        refuseHead(r, 401, false);
    }

    /**
     * Answers a request from its head alone. Its body is never buffered: when the head announces none, the
     * connection goes on (skipping the empty last content); when a body would follow, the connection is closed
     * after the answer (lingering), so an unauthorized or misdirected client cannot make the gateway read it.
     */
    private void refuseHead(FullHttpResponse r, int status, boolean close) {
        HttpRequest req = head;
        gw.metrics().request("", null, status, gw.clock().nanoTime() - requestStartNs);
        boolean bodyFollows = HttpUtil.isTransferEncodingChunked(req) || HttpUtil.getContentLength(req, 0L) > 0;
        if (close || bodyFollows || !HttpUtil.isKeepAlive(req)) {
            closeAfter(r);
            return;
        }
        logAnswered(r);
        r.headers().set("x-request-id", requestId());
        endTrace(status);
        skippingBody = true;
        ctx.writeAndFlush(r);
    }

    private void onSkippedContent(HttpContent c) {
        if (c instanceof LastHttpContent) {
            resetRequest();
            drainPipelined();
        }
    }

    // ---- body stage ------------------------------------------------------------------------------------------

    private void onContent(HttpContent c) {
        if (c.decoderResult().isFailure()) {
            rejectAndClose(HttpResponseStatus.BAD_REQUEST, "malformed_http", "Malformed HTTP body: " + c.decoderResult().cause().getMessage());
            return;
        }
        ByteBuf b = c.content();
        if (b.isReadable()) {
            access.bytesIn += b.readableBytes();
            int max = gw.config().limits().maxBodyBytes();
            int have = body == null ? 0 : body.readableBytes();
            if ((long) have + b.readableBytes() > max) {
                rejectAndClose(HttpResponseStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                    "The request body exceeds the limit of " + max + " bytes.");
                return;
            }
            if (body == null && c instanceof LastHttpContent && borrowable(b)) {
                body = b.retain(); // the whole body came in one read: keep the decoder's slice of it, no copy
            } else {
                if (body == null) {
                    // Sized by what arrived, never by what the client declared: memory follows bytes actually received.
                    body = ctx.alloc().buffer(Math.min(max, Math.max(MIN_BODY_BUFFER, b.readableBytes())), max);
                }
                body.writeBytes(b);
            }
        }
        if (c instanceof LastHttpContent) {
            cancelReadDeadline();
            if (extractor != null && body != null) {
                extractor.body(body); // scanned whole, in place, when the body is validated
            }
            dispatch();
        }
    }

    /**
     * Whether a body that arrived whole in one chunk may be kept as the decoder's slice of the read buffer instead of
     * a copy: when it fills at least half of that buffer. A small body in a large read buffer is copied, so a request
     * held for a long stream never pins more than twice its size (as a buffer grown by doubling could).
     */
    static boolean borrowable(ByteBuf chunk) {
        ByteBuf under = chunk.unwrap();
        return under == null || (long) chunk.readableBytes() * 2 >= under.capacity();
    }

    private void resetRequest() {
        cancelReadDeadline();
        if (body != null && body.refCnt() > 0) {
            body.release();
        }
        body = null;
        head = null;
        route = null;
        path = null;
        extractor = null;
        skippingBody = false;
    }

    // ---- dispatch --------------------------------------------------------------------------------------------

    private void dispatch() {
        switch (route) {
            case HEALTH, READY, READY_ENGINES, METRICS, MODELS, MODEL -> respond(local.handle(ctx, head, route), true);
            case CHAT_RENDER, COMPLETIONS_RENDER -> onRender();
            case CHAT, COMPLETIONS -> onProxyRoute();
            default -> throw new IllegalStateException("no dispatch for " + route);
        }
    }

    /** Validates the body and resolves the rule of its model; answers and returns null when either fails. */
    private Rule validatedRule() {
        RouteTable table = gw.router().table();
        // Only the text some rule of this table keys on is decoded (none without a chwbl rule), and only the token ids
        // some rule routes on are kept; the rest of the content is validated by the lexer's skip. The rule comes from
        // the same table.
        extractor.textPrefixChars(table.textPrefixChars()).promptIdsKept(table.promptIdsKept());
        Problem problem = RequestValidator.validate(extractor, fields, route.chat());
        if (problem != null) {
            respondProblem(problem);
            return null;
        }
        Rule rule = table.ruleForModel(fields.model);
        discovered = null;
        if (rule == null) {
            // Not a configured name: maybe a LoRA adapter some vLLM endpoints list (discovered from GET /v1/models).
            discovered = gw.router().discoveredAdapter(fields.model);
            rule = discovered == null ? null : discovered.rule();
        }
        if (rule == null) {
            refused("model_not_found");
            gw.metrics().request("", null, 404, gw.clock().nanoTime() - requestStartNs);
            respond(LocalRoutes.modelNotFound(ctx, fields.model), true);
            return null;
        }
        access.rule = rule.name();
        problem = RequestValidator.withinRule(fields, route.chat(), rule.name(), rule.config().maxN(),
            rule.config().maxPromptTokens());
        if (problem != null) {
            respondProblem(problem);
            return null;
        }
        return rule;
    }

    private void onRender() {
        Rule rule = validatedRule();
        if (rule != null) {
            String warning = route.chat() ? TemplateWarnings.forRequest(rule, fields) : null;
            FullHttpResponse r = local.render(ctx, head, body, fields, rule);
            if (warning != null) {
                r.headers().set(TemplateWarnings.HEADER, warning);
            }
            respond(r, true);
        }
    }

    private void onProxyRoute() {
        Rule rule = validatedRule();
        if (rule == null) {
            return;
        }
        Problem greedy = RequestValidator.greedyN(fields, rule.config().greedyN()); // generation only: render routes render
        if (greedy != null) {
            respondProblem(greedy);
            return;
        }
        Problem sampling = RequestValidator.sampling(fields, rule.name(), rule.config().speculative(),
            rule.config().maxLogitBias(), rule.requestStage() instanceof PromptPipeline pipeline ? pipeline.vocabSize() : 0);
        if (fields.hasLogitBias && fields.logitBiasEntries > 0) {
            gw.metrics().logitBias(rule.name(), sampling == null ? "accepted" : "refused");
        }
        if (sampling != null) {
            respondProblem(sampling);
            return;
        }
        Problem tools = route.chat() ? ToolChoiceCheck.problem(fields, rule.config()) : null;
        if (tools != null) {
            respondProblem(tools);
            return;
        }
        int[] serving = servingEndpoints(rule);
        if (serving != null && serving.length == 0) {
            routeNotServed(rule);
            return;
        }
        long parsedNs = gw.clock().nanoTime();
        gw.metrics().stages.recordNs(Stage.PARSE, parsedNs - requestStartNs);
        if (trace != null) {
            trace.stage("kvgate.parse", requestStartNs, parsedNs);
        }
        if (fields.engineFieldRangeCount > 0) {
            if (!countsEngineCopies(rule.config())) {
                fields.keepReportModeXarg();
            }
            gw.metrics().engineFieldsRemoved.add(EngineFieldStripper.strip(body, fields));
        }
        String warning = route.chat() ? TemplateWarnings.forRequest(rule, fields) : null;
        HttpRequest req = head;
        String requestId = requestId();
        if (trace != null) {
            trace.request(fields.model, rule.name(), rule.engine().name().toLowerCase(java.util.Locale.ROOT),
                fields.hasMaxCompletionTokens ? fields.maxCompletionTokens : fields.hasMaxTokens ? fields.maxTokens : 0,
                fields.n, fields.stream, requestId);
        }
        // X-Kvgate-Explain shows endpoints, their load and (kv_exact) what they cache for this prompt: a cross-tenant
        // cache oracle unless the caller holds the admin token (a rule with explain: true explains every request).
        boolean explain = explainAsked(req) && ApiKeyAuth.adminTokenPresented(gw.config().adminToken(), req.headers());
        Problem badPriority = PriorityInputs.problem(req.headers());
        if (badPriority != null) {
            respondProblem(badPriority);
            return;
        }
        PromptStage.Outcome prompt = PromptStage.run(rule, req.headers(), body, gw.config().limits().maxBodyBytes(), fields,
            route.chat(), gw.metrics(), gw.clock(), trace);
        if (prompt.body() != null) {
            body = prompt.body(); // a lowered budget that needed more room than the buffer had (the old one released)
        }
        if (prompt.problem() != null) {
            respondProblem(prompt.problem());
            return;
        }
        forwardedBody(rule);
        if (rule.engine() == RuleConfig.Engine.SGLANG) {
            // After the prompt stage: its in-place edits (a clamped budget) use the offsets the body stage recorded.
            sglangLoraForm(rule);
        }
        access.model = fields.model;
        access.stream = fields.stream;
        ParsedRequest parsed = new ParsedRequest(req, path, route.chat(), body, fields, rule, requestId, explain,
            requestStartNs, prompt.inputs(), serving, warning).withTrace(trace);
        body = null; // ownership moves to the exchange
        extractor = null;
        head = null;
        busy = true;
        ActiveExchange started = starter.start(ctx, parsed, this);
        if (busy) { // the exchange may have finished (and the next pipelined request started) inside start()
            exchange = started;
        }
    }

    /**
     * The only endpoints that may take this request (sorted ids), or null for any: those listing its discovered LoRA
     * adapter, and of those the ones that mount its route when some endpoint of the rule is known not to (review row
     * 27: a pooling-only vLLM, an SGLang embedding server). Empty when none does. Allocates only when both apply.
     */
    private int[] servingEndpoints(Rule rule) {
        int[] byRoute = rule.endpointsServing(route.chat());
        int[] byAdapter = discovered == null ? null : discovered.endpointIds();
        if (byRoute == null || byAdapter == null) {
            return byRoute == null ? byAdapter : byRoute;
        }
        return java.util.Arrays.stream(byAdapter).filter(id -> java.util.Arrays.binarySearch(byRoute, id) >= 0).toArray();
    }

    /**
     * No endpoint of the rule serves the request's route: OpenAI's answer for a model used on a route it does not
     * support (404 {@code invalid_request_error}, {@code param} model), with the gateway's code, before any engine.
     */
    private void routeNotServed(Rule rule) {
        refused("route_not_served");
        gw.metrics().request(rule.name(), fields.model, 404, gw.clock().nanoTime() - requestStartNs);
        String p = io.kvgate.dataplane.ready.EngineRoutes.route(route.chat());
        respond(OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.NOT_FOUND, "The model `" + fields.model + "` is not"
            + " served on " + p + ": no endpoint of rule '" + rule.name() + "' mounts that route (its engines serve "
            + "another task, e.g. a pooling model).", "model", "route_not_served"), true);
    }

    /**
     * The edits that put the request in the rule's engine's dialect ({@link EngineDialect}: temperature floor, the
     * stop-string switch's spelling, an empty logit_bias) and those of the answer rewrite this request needs (model
     * alias, greedy {@code n}, forced usage), spliced into
     * the body in one pass over the recorded field ranges (read again first when an earlier stage changed the body:
     * the engine-field strip, the context clamp). A request that needs none keeps its body buffer as it is.
     */
    private void forwardedBody(Rule rule) {
        EngineDialect.plan(fields, rule.engine(), body, edits);
        fields.answerRewrite = AnswerRewrite.plan(fields, rule.config(), body, edits);
        if (!edits.isEmpty()) {
            body = edits.apply(body, fields, ctx.alloc());
            edits.reset();
        }
    }

    /**
     * SGLang's LoRA form: the request keeps the client's {@code model} (SGLang then echoes the adapter name, as vLLM
     * does) and gets {@code "lora_path": "<adapter>"} as its last member, which SGLang's {@code _resolve_lora_path}
     * reads when {@code model} has no {@code base:adapter} colon (rule names never do on SGLang). A base-model request
     * that carries a client {@code lora_path} gets {@code "lora_path": null} last: the engine must run exactly what
     * the gateway routed and hashed for.
     */
    private void sglangLoraForm(Rule rule) {
        String adapter = rule.config().entryFor(fields.model) == null ? fields.model : null;
        if (adapter == null && !fields.hasLoraPath) {
            return;
        }
        ByteBuf edited = JsonMembers.append(body, "lora_path", adapter == null ? "null" : JsonMembers.quote(adapter), ctx.alloc());
        body.release();
        body = edited;
    }

    /**
     * Whether the rule routes on an index that counts each copy vLLM announces ({@code kv_exact}, or a P/D rule whose
     * prefill leg is): there a client's {@code vllm_xargs.kv_cache_report_mode: "full"} would leak "held" blocks.
     */
    private static boolean countsEngineCopies(RuleConfig rule) {
        return rule.policyKind() == RuleConfig.Policy.KV_EXACT
            || io.kvgate.dataplane.route.RulePolicies.prefillKvExact(rule);
    }

    private static boolean explainAsked(HttpRequest req) {
        String v = req.headers().get("x-kvgate-explain");
        return "1".equals(v) || "true".equalsIgnoreCase(v);
    }

    private void respondProblem(Problem p) {
        refused(p.reason());
        // Under the rule and model the request named once they are known (a configured model is its own label, as
        // for answered requests), so an operator sees a model's refusals beside its answers (issue #36 item 15).
        gw.metrics().request(access.rule == null ? "" : access.rule, fields.model, 400, gw.clock().nanoTime() - requestStartNs);
        respond(OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.BAD_REQUEST, p.message(), p.param(), p.openAiCode()), true);
    }

    private void respond(FullHttpResponse r, boolean keepAliveAllowed) {
        endTrace(r.status().code());
        boolean keepAlive = keepAliveAllowed && head != null && HttpUtil.isKeepAlive(head);
        logAnswered(r);
        r.headers().set("x-request-id", requestId());
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        resetRequest();
        if (keepAlive) {
            ctx.writeAndFlush(r);
            drainPipelined();
        } else {
            closing = true;
            ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
        }
    }

    private void rejectAndClose(HttpResponseStatus st, String reason, String message) {
        refused(reason);
        gw.metrics().request("", null, st.code(), gw.clock().nanoTime() - requestStartNs);
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), st, message, null, null);
        closeAfter(r);
    }

    /**
     * Sends a final answer with {@code Connection: close}, then closes: at once when the request was read whole,
     * else after shutting output and draining input for at most {@link #LINGER_MS}.
     */
    private void closeAfter(FullHttpResponse r) {
        endTrace(r.status().code());
        boolean requestPending = head != null && !skippingBody;
        if (!skippingBody) {
            logAnswered(r); // a refused head's line was written when it was refused
        }
        r.headers().set("x-request-id", requestId());
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        resetRequest();
        closing = true;
        ctx.writeAndFlush(r).addListener((ChannelFutureListener) f -> {
            if (requestPending && f.isSuccess() && f.channel() instanceof DuplexChannel d && d.isActive()) {
                d.shutdownOutput();
                ctx.executor().schedule(() -> ctx.close(), LINGER_MS, TimeUnit.MILLISECONDS);
            } else {
                f.channel().close();
            }
        });
    }

    /**
     * Ends the current request's server span, if it is traced: with {@code status} for an answer the front door gave
     * (an exchange records its own status on the trace; 0 keeps it).
     */
    private void endTrace(int status) {
        RequestTrace t = trace;
        if (t != null) {
            trace = null;
            if (status > 0) {
                t.status(status);
            }
            t.end(gw.clock().nanoTime());
        }
    }

    // ---- ExchangeOwner ---------------------------------------------------------------------------------------

    @Override
    public void onExchangeDone(boolean keepAlive) {
        exchange = null;
        endTrace(0);
        busy = false;
        onWritable = null;
        if (!keepAlive) {
            closing = true;
            ctx.flush();
            ctx.close();
            return;
        }
        drainPipelined();
        resumeReading();
    }

    /**
     * A request ended and the connection goes on: the idle timeout starts, then the requests queued behind it are
     * read, each only while the client takes its answers ({@link #pausedForClient}).
     */
    private void drainPipelined() {
        becameIdle();
        Object m;
        while (!busy && !closing && ctx.channel().isActive() && !pausedForClient() && (m = pipelined.poll()) != null) {
            if (m instanceof HttpRequest) {
                pipelinedRequests--;
            }
            onMessage(m);
        }
    }

    /**
     * Whether answering waits for the client to take what it was sent: its unsent bytes are over the connection's
     * high-water mark. Then reading stops too (a local answer sets no {@code busy}, so without this a client that
     * pipelines requests and never reads would make the gateway buffer answers without bound) and the stall timeout
     * starts.
     */
    private boolean pausedForClient() {
        if (awaitingWritable) {
            return true;
        }
        if (ctx.channel().isWritable()) {
            return false;
        }
        awaitingWritable = true;
        ctx.channel().config().setAutoRead(false);
        long now = ctx.executor().ticker().nanoTime();
        stalledSinceNs = now;
        armWakeup(now + TimeUnit.MILLISECONDS.toNanos(gw.config().limits().clientStallTimeoutMs()), now);
        return true;
    }

    /** Reading goes on once nothing holds it: no exchange in progress, no answers waiting for the client. */
    private void resumeReading() {
        if (!busy && !awaitingWritable && !closing && !ctx.channel().config().isAutoRead()) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    @Override
    public AccessRecord accessRecord() {
        return access;
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
