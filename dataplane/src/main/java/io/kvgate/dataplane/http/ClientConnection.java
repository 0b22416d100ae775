package io.kvgate.dataplane.http;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.dataplane.accesslog.AccessRecord;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.prompt.TemplateWarnings;
import io.kvgate.dataplane.exchange.ActiveExchange;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.tenant.RateLimitHeaders;
import io.kvgate.dataplane.tenant.Reservation;
import io.kvgate.dataplane.tenant.Tenant;
import io.kvgate.dataplane.trace.RequestTrace;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.DuplexChannel;
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
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;

/**
 * One client connection of the OpenAI front door: its lifecycle, deadlines, pipelining, lingering close and
 * writability. What a request means is the {@link RequestPipeline}'s: this class feeds it the head and the body's
 * pieces as they arrive, answers its refusals, answers the local routes, and hands a routable request to the
 * exchange layer ({@link ExchangeStarter#start}), whose owner it is.
 * <ul>
 *   <li><b>One request at a time.</b> A pipelining client's next requests are queued (at most
 *       {@link #MAX_PIPELINED_REQUESTS}, counted as requests, not chunks) with reading paused until the current
 *       response is done.</li>
 *   <li><b>A client that does not take its answers is not read either</b>: once its unsent bytes are over the
 *       connection's write high-water mark ({@code limits.max_buffered_response_bytes}), after a local answer or a
 *       proxied one alike, no queued request is answered and nothing more is read until the bytes fall under the low
 *       mark; a client that stays over it for {@code limits.client_stall_timeout_ms} is disconnected. So the bytes a
 *       non-reading client pins are the high-water mark plus the one answer that crossed it
 *       ({@link FrontDoorBudget}).</li>
 *   <li><b>One timer</b> serves {@code request_read_timeout_ms} (from the first byte of a request, head included, to
 *       its last: 408 and close), {@code client_idle_timeout_ms} and the stall timeout.</li>
 *   <li><b>A refusal</b> is an OpenAI error object, counted; a refused head's body is never read (skipped when the
 *       head announced none, else the connection closes, lingering).</li>
 * </ul>
 * The request's {@link RequestContext} is this connection's, reused for each request. Event-loop only.
 */
public final class ClientConnection extends ChannelInboundHandlerAdapter implements ExchangeOwner {
    /** Requests a pipelining client may queue behind the one in progress; more closes the connection. */
    static final int MAX_PIPELINED_REQUESTS = 64;
    /**
     * After a refusal that closes the connection while the client may still be sending, the output side is shut
     * first and the input drained this long: closing with unread input would reset the connection and could
     * destroy the error response before the client read it (the lingering close of nginx/Apache).
     */
    static final long LINGER_MS = 2_000;

    private final GatewayContext gw;
    private final LocalRoutes local;
    private final ExchangeStarter starter;
    private final RequestPipeline pipeline;
    private ChannelHandlerContext ctx;

    /** The request being read, then answered (reused per request); its head is null between requests. */
    private final RequestContext rc = new RequestContext();
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
    /** Stamps the answers this connection writes (its own and its exchanges'): see {@link #answerHeaders()}. */
    private final AnswerHeaders answerHeaders = new AnswerHeaders();
    /** The status of the current request's answer once its head went out, else 0. */
    private int answeredStatus;

    // ---- the request being answered ----
    private ActiveExchange exchange;
    private boolean busy;
    /** The request waits for its reservation (the shared store's answer); {@link #reservations} numbers them. */
    private boolean reserving;
    private int reservations;
    /** This connection's event loop, as the limit store sees it. */
    private io.kvgate.dataplane.tenant.Loop loop;
    private Runnable onWritable;
    private final ArrayDeque<Object> pipelined = new ArrayDeque<>();
    private int pipelinedRequests;
    /**
     * The client's unsent answer bytes went over the high-water mark: reading and answering wait for it to take them
     * (channelWritabilityChanged), at most until {@link #stalledSinceNs} plus the stall timeout.
     */
    private boolean awaitingWritable;
    private long stalledSinceNs;

    public ClientConnection(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain) {
        this.gw = gw;
        this.local = local;
        this.starter = starter;
        this.pipeline = new RequestPipeline(gw, drain);
    }

    /**
     * What the HTTP codec calls when raw request bytes arrive, before it decodes them: it starts the read deadline on
     * the first byte of a request head (the codec reports a head only once it is complete, so a client trickling its
     * head would otherwise never be timed).
     */
    public Runnable requestBytesListener() {
        return onBytesReceived;
    }

    /**
     * The outbound handler that goes between the codec and this handler: every answer head of the connection passes
     * it, whoever writes it (a refusal, a local route, an exchange relaying an engine), so a limited tenant's answers
     * all carry the {@code x-ratelimit-*} headers, and each request is counted under its tenant with the status the
     * client got.
     */
    public io.netty.channel.ChannelOutboundHandler answerHeaders() {
        return answerHeaders;
    }

    private final class AnswerHeaders extends io.netty.channel.ChannelOutboundHandlerAdapter {
        @Override
        public void write(ChannelHandlerContext ctx, Object msg, io.netty.channel.ChannelPromise promise) {
            if (msg instanceof io.netty.handler.codec.http.HttpResponse r && r.status().code() >= 200) {
                onAnswerHead(r.status().code());
                RateLimitHeaders.write(rateLimitState(), r.headers());
            } else if (msg instanceof io.kvgate.dataplane.wire.RelayHead h && h.status() >= 200) {
                // An engine's head relayed as bytes: the headers go in as lines, before the codec's blank line.
                onAnswerHead(h.status());
                RateLimitHeaders.writeLines(rateLimitState(), h.content());
            }
            ctx.write(msg, promise);
        }
    }

    /**
     * What the answer's rate-limit headers say: the request's reservation (granted or denied) when it reached the
     * limits check, else, for a limited tenant's request answered before it (a 400 of the body, a 404 model, a
     * context-length refusal, a local route), the tenant's windows as they are now. Null (no headers) for a tenant
     * without limits and for an answer given before the caller was known (a 401, a malformed head).
     */
    private Reservation rateLimitState() {
        Reservation r = rc.reservation();
        if (r != null) {
            return r;
        }
        Tenant t = rc.tenant();
        return t == null || !t.limited() ? null : gw.tenants().current(t, rc.config().tenancy());
    }

    private void onAnswerHead(int status) {
        answeredStatus = status;
        Tenant t = rc.tenant();
        if (t != null) {
            gw.tenants().countRequest(t.name(), answeredStatus);
        }
    }

    /**
     * The request's end for its tenant: the engine's usage counted, and the reservation settled from it; without
     * usage, kept whole for an answer that succeeded (the engine did the work) and released otherwise (an error, a
     * client gone first, a timeout).
     */
    private void settleTenant() {
        Tenant t = rc.tenant();
        if (t == null) {
            return;
        }
        AccessRecord a = rc.access();
        boolean usage = a.promptTokens >= 0 && a.completionTokens >= 0;
        if (usage) {
            gw.tenants().countTokens(t.name(), a.promptTokens, a.completionTokens);
        }
        Reservation r = rc.reservation();
        if (r != null) {
            gw.tenants().settle(r, usage ? a.promptTokens + a.completionTokens
                : answeredStatus > 0 && answeredStatus < 400 ? r.tokens() : -1);
        }
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.loop = io.kvgate.dataplane.tenant.Loop.of(ctx.executor());
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
        if (reserving) {
            reserving = false; // its answer, when it comes, releases what it holds (onReserved)
            if (rc.tenant() != null) {
                gw.tenants().countRequest(rc.tenant().name(), 499);
            }
        }
        if (exchange != null) {
            exchange.onClientGone();
            exchange = null;
            if (answeredStatus == 0 && rc.tenant() != null) {
                gw.tenants().countRequest(rc.tenant().name(), 499); // the client left before any answer
            }
            settleTenant();
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
            if (msg instanceof HttpContent c && !closing && rc.head() != null) {
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
            if (rc.head() == null) {
                // A head still trickling in: the caller is unknown, whatever the last request's was.
                rc.tenant(null);
                rc.reservation(null);
            }
            refuse(Refusal.closing(HttpResponseStatus.REQUEST_TIMEOUT, "request_read_timeout",
                "The request was not received within " + readTimeoutMs + " ms."), false);
            return;
        }
        if (rc.head() != null) {
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

    // ---- the request: head, body, answer -----------------------------------------------------------------------

    private void onRequestHead(HttpRequest req) {
        long startNs = gw.clock().nanoTime();
        onBytesReceived(); // a pipelined head read while busy starts its clock now
        answeredStatus = 0;
        // The configuration and rule set this request is judged by, captured once (a reload reaches the next request).
        rc.begin(req, gw.config(), gw.router().table(), startNs,
            ctx.channel().attr(io.kvgate.dataplane.tls.ServerTls.CLIENT_IDENTITY).get());
        Refusal r = pipeline.head(rc);
        if (r != null) {
            refuse(r, true);
            return;
        }
        if (HttpUtil.is100ContinueExpected(req)) {
            ctx.writeAndFlush(new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, HttpResponseStatus.CONTINUE));
        }
    }

    private void onContent(HttpContent c) {
        Refusal r = pipeline.body(rc, c, ctx.alloc());
        if (r != null) {
            refuse(r, false);
            return;
        }
        if (c instanceof LastHttpContent) {
            cancelReadDeadline();
            onRequestRead();
        }
    }

    private void onSkippedContent(HttpContent c) {
        if (c instanceof LastHttpContent) {
            resetRequest();
            drainPipelined();
        }
    }

    /** The whole request is read: a local route answers it here, the others go on through the pipeline. */
    private void onRequestRead() {
        switch (rc.route()) {
            case HEALTH, READY, READY_ENGINES, METRICS, MODELS, MODEL -> respond(local.handle(ctx, rc.head(), rc.route(), rc.tenant()), true);
            case CHAT_RENDER, COMPLETIONS_RENDER, KVGATE_CHAT_RENDER, KVGATE_COMPLETIONS_RENDER -> onRender();
            case CHAT, COMPLETIONS -> onRoutable();
            default -> throw new IllegalStateException("no dispatch for " + rc.route());
        }
    }

    private void onRender() {
        Refusal r = pipeline.renderable(rc);
        if (r != null) {
            refuse(r, false);
            return;
        }
        if (rc.route().engineRenderPath() && rc.rule().profile().servesOwnRender()) {
            // vLLM's own render (another shape) is not shadowed: the gateway's answers under /kvgate/v1.
            startExchange(pipeline.forwardable(rc, ctx.alloc()));
            return;
        }
        String warning = rc.chat() ? TemplateWarnings.forRequest(rc.rule(), rc.fields()) : null;
        FullHttpResponse resp = local.render(ctx, rc.chat(), rc.body(), rc.rule());
        if (warning != null) {
            resp.headers().set(TemplateWarnings.HEADER, warning);
        }
        respond(resp, true);
    }

    /**
     * A generation request: the stages, then its tenant's reservation, which may wait for the shared rate-limit store
     * (never blocking the loop: the answer comes back on it). Meanwhile the connection is {@link #busy} (pipelined
     * requests queue) and {@link #reserving}; a client gone before the answer finds the grant released.
     */
    private void onRoutable() {
        Refusal r = pipeline.beforeLimits(rc, ctx.alloc());
        if (r != null) {
            refuse(r, false);
            return;
        }
        busy = true;
        reserving = true;
        int generation = ++reservations;
        pipeline.reserve(rc, loop, res -> onReserved(generation, res));
    }

    private void onReserved(int generation, Reservation res) {
        if (generation != reservations || !reserving) {
            gw.tenants().settle(res, -1); // the connection closed while the store answered: give the hold back
            return;
        }
        reserving = false;
        busy = false;
        startExchange(RequestPipeline.reserved(rc, res));
    }

    /** Refuses, or hands the request the pipeline made ready to its exchange. */
    private void startExchange(Refusal r) {
        if (r != null) {
            refuse(r, false);
            return;
        }
        AccessRecord access = rc.access();
        access.model = rc.fields().model;
        access.stream = rc.fields().stream;
        ParsedRequest parsed = rc.handOff(); // the body's ownership moves to the exchange
        busy = true;
        ActiveExchange started = starter.start(ctx, parsed, this);
        if (busy) { // the exchange may have finished (and the next pipelined request started) inside start()
            exchange = started;
        }
    }

    private void resetRequest() {
        cancelReadDeadline();
        rc.end();
        skippingBody = false;
    }

    /**
     * Answers a refusal: counted (a bad request, or shed load), then closing the connection when the refusal says so;
     * a refused head otherwise answered from the head alone ({@link #refuseHead}); a refused body as any answer.
     */
    private void refuse(Refusal r, boolean atHead) {
        if (r.shed()) {
            gw.metrics().shed(r.reason());
            rc.access().errorCode = r.reason();
        } else {
            refused(r.reason());
        }
        // Under the rule and model the request named once they are known (a configured model is its own label, as
        // for answered requests; the fields are reset at each head), so an operator sees a model's refusals beside
        // its answers (issue #36 item 15).
        String rule = rc.access().rule;
        gw.metrics().request(rule == null ? "" : rule, rc.fields().model, r.status().code(),
            gw.clock().nanoTime() - rc.startNs());
        FullHttpResponse resp = r.response(ctx.alloc());
        if (r.closes()) {
            closeAfter(resp);
        } else if (atHead) {
            refuseHead(resp, r.status().code());
        } else {
            respond(resp, true);
        }
    }

    /** A refusal's reason: counted in {@code kvgate_bad_requests_total} and the access log's {@code error_code}. */
    private void refused(String reason) {
        gw.metrics().badRequest(reason);
        rc.access().errorCode = reason;
    }

    /** The access-log line of a request the front door answers itself (a refusal, a local route). */
    private void logAnswered(FullHttpResponse r) {
        AccessLog log = gw.accessLog();
        if (!log.enabled()) {
            return;
        }
        AccessRecord access = rc.access();
        if (rc.head() == null) {
            String code = access.errorCode;
            access.reset(); // timed out before its head was complete: nothing of the last request belongs to it
            access.errorCode = code;
            access.durationNs = AccessRecord.UNKNOWN;
        } else {
            access.durationNs = gw.clock().nanoTime() - rc.startNs();
        }
        rc.requestId();
        access.model = rc.fields().model;
        access.stream = rc.fields().stream;
        access.status = r.status().code();
        access.bytesOut = r.content().readableBytes();
        log.log(access);
    }

    /**
     * Answers a request from its head alone. Its body is never buffered: when the head announces none, the
     * connection goes on (skipping the empty last content); when a body would follow, the connection is closed
     * after the answer (lingering), so an unauthorized or misdirected client cannot make the gateway read it.
     */
    private void refuseHead(FullHttpResponse r, int status) {
        HttpRequest req = rc.head();
        boolean bodyFollows = HttpUtil.isTransferEncodingChunked(req) || HttpUtil.getContentLength(req, 0L) > 0;
        if (bodyFollows || !HttpUtil.isKeepAlive(req)) {
            closeAfter(r);
            return;
        }
        logAnswered(r);
        r.headers().set("x-request-id", rc.requestId());
        endTrace(status);
        skippingBody = true;
        ctx.writeAndFlush(r);
    }

    private void respond(FullHttpResponse r, boolean keepAliveAllowed) {
        endTrace(r.status().code());
        boolean keepAlive = keepAliveAllowed && rc.head() != null && HttpUtil.isKeepAlive(rc.head());
        logAnswered(r);
        r.headers().set("x-request-id", rc.requestId());
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

    /**
     * Sends a final answer with {@code Connection: close}, then closes: at once when the request was read whole,
     * else after shutting output and draining input for at most {@link #LINGER_MS}.
     */
    private void closeAfter(FullHttpResponse r) {
        endTrace(r.status().code());
        boolean requestPending = rc.head() != null && !skippingBody;
        if (!skippingBody) {
            logAnswered(r); // a refused head's line was written when it was refused
        }
        r.headers().set("x-request-id", rc.requestId());
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
        RequestTrace t = rc.trace();
        if (t != null) {
            rc.trace(null);
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
        settleTenant();
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
        return rc.access();
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
