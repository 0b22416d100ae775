package io.kvgate.dataplane.upstream;

import io.kvgate.control.log.Log;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.kvgate.dataplane.wire.EngineRequest;
import io.kvgate.dataplane.wire.EngineResponseDecoder;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * One HTTP request to one engine and its response: the single leg type of the data path. A plain request is one
 * leg; a P/D request composes two. Runs on the client connection's event loop; the engine connection is pooled per
 * (event loop, endpoint), so no proxied byte crosses threads.
 *
 * <p><b>States</b> ({@link State}): {@code NEW → CONNECTING → SENT → HEAD → STREAMING → DONE}, or {@code FAILED} /
 * {@code CANCELLED} from any live state. Every way out goes through {@link #end}, the one teardown: it stops the
 * timer, releases the request body and any aggregate, returns the connection to the pool (only after a clean,
 * keep-alive response) or closes it, and reports the endpoint's outcome exactly once, classified by
 * {@link LegFailure} (engine 5xx and transport failures charge the endpoint, 4xx and the client's or the gateway's
 * own failures do not).
 *
 * <p><b>Wire</b>: the request head is encoded straight into bytes from the client's decoded headers on every send
 * ({@link EngineRequest}); the response is read by {@link EngineResponseDecoder}, which hands over the head's raw bytes
 * and the few facts the gateway acts on ({@link ResponseHead}), never a header map.
 *
 * <p><b>Body</b>: the leg holds one reference to the request body and writes a retained duplicate on every send,
 * so a resend (the stale keep-alive race: a pooled connection the engine had already closed) carries all of it.
 *
 * <p><b>Back-pressure</b>: the engine connection never auto-reads (connectors create it with auto-read off and never
 * turn it on, so no read costs an {@code epoll_ctl}). After each read batch the
 * listener writes to the client and calls {@link #readAfter} with the write's future; the next upstream read
 * happens when the client has taken the bytes (Netty's read-after-write proxy idiom). Time spent waiting on the
 * client is the client's: it does not count toward the engine's idle timeout, and a client that takes nothing
 * for the stall timeout ends the leg as {@link LegFailure#CLIENT_STALL}.
 *
 * <p><b>Time</b> comes from the event loop's ticker, the same clock that runs the timers, so tests drive every
 * timeout with {@code EmbeddedChannel.advanceTimeBy}.
 */
public final class UpstreamLeg {
    /** Where a leg is in its life. Terminal: {@link #DONE}, {@link #FAILED}, {@link #CANCELLED}. */
    public enum State {
        NEW, CONNECTING, SENT, HEAD, STREAMING, DONE, FAILED, CANCELLED;

        public boolean terminal() {
            return this == DONE || this == FAILED || this == CANCELLED;
        }
    }

    /** Timeouts of one leg, in nanoseconds. */
    public record Timeouts(long firstByteNs, long idleNs, long clientStallNs) {
        /** The last value made: every request of a configuration asks for the same three timeouts. */
        private static volatile Timeouts last = new Timeouts(0, 0, 0);

        /** The timeouts for these values; the one kept from the previous call when they are the same (no allocation). */
        public static Timeouts ofMillis(long firstByteMs, long idleMs, long clientStallMs) {
            long firstByteNs = TimeUnit.MILLISECONDS.toNanos(firstByteMs);
            long idleNs = TimeUnit.MILLISECONDS.toNanos(idleMs);
            long clientStallNs = TimeUnit.MILLISECONDS.toNanos(clientStallMs);
            Timeouts t = last;
            if (t.firstByteNs != firstByteNs || t.idleNs != idleNs || t.clientStallNs != clientStallNs) {
                t = new Timeouts(firstByteNs, idleNs, clientStallNs);
                last = t;
            }
            return t;
        }
    }

    private final UpstreamConnector connector;
    private final EventLoop loop;
    private final EndpointState endpoint;
    private final EndpointOutcomes outcomes;
    private final GatewayMetrics metrics;
    private final EngineRequest request;
    private final ByteBuf body;
    private final LegListener listener;
    private final Timeouts timeouts;
    /** The engine answers 503 while its model loads (llama-server): such a 503 does not charge the breaker. */
    private boolean loading503;
    private final ChannelFutureListener onClientWritten = this::onClientWritten;

    private State state = State.NEW;
    private Channel channel;
    private boolean reused;
    private boolean resentFresh;
    private boolean anyResponseBytes;
    /** The first body bytes arrived (a streamed 2xx answer's is its first token, reported once as the TTFT). */
    private boolean firstBodyBytes;
    private long connectStartNs;
    private long connectNs;
    private long sentAtNs;
    /** When the engine became responsible for the next bytes (last read request or last bytes read). */
    private long engineClockFromNs;
    /** When reads were paused to wait for the client's write, or -1 while the gateway is reading. */
    private long clientHoldSinceNs = -1;
    /** Whether the leg wants {@link #onTimer} by {@link #timerDeadlineNs} (its connection's handler wakes it). */
    private boolean timerArmed;
    private long timerDeadlineNs;
    private Handler handler;
    private ResponseHead head;
    private int aggregateLimit = -1;
    private CompositeByteBuf aggregate;
    /** Uncached prompt tokens the routing stage charged this leg's endpoint, until the first response bytes. */
    private int prefillTokens;
    /** The DP rank the routing stage pinned this request to, -1 for none (its end is reported with it). */
    private int dpRank = -1;

    /**
     * @param request what the engine is sent (its head is encoded on each send, with this endpoint's {@code host} and
     *                the body's {@code content-length})
     * @param body    the request body; the leg takes over this reference and releases it in its teardown
     */
    public UpstreamLeg(UpstreamConnector connector, EventLoop loop, EndpointState endpoint, EndpointOutcomes outcomes,
                       GatewayMetrics metrics, EngineRequest request, ByteBuf body, Timeouts timeouts, LegListener listener) {
        this.connector = connector;
        this.loop = loop;
        this.endpoint = endpoint;
        this.outcomes = outcomes;
        this.metrics = metrics;
        this.request = request;
        this.body = body;
        this.timeouts = timeouts;
        this.listener = listener;
    }

    /**
     * Marks the engine as one that answers 503 while loading: that answer ends the leg before its head reaches the
     * listener, as {@link LegFailure#ENGINE_LOADING} (connect-class: the request may go elsewhere).
     */
    public UpstreamLeg answers503WhileLoading(boolean yes) {
        this.loading503 = yes;
        return this;
    }

    public EndpointState endpoint() {
        return endpoint;
    }

    public State state() {
        return state;
    }

    /** The final response head, or null before it arrived (its bytes are released once the listener's onHead returned). */
    public ResponseHead head() {
        return head;
    }

    /** Time since the request was sent, on the leg's ticker (0 before {@link #start}). */
    public long elapsedNs() {
        return now() - sentAtNs;
    }

    /** Whether the response head arrived (the engine produced output). */
    public boolean answered() {
        return head != null;
    }

    private long now() {
        return loop.ticker().nanoTime();
    }

    // ---- lifecycle -------------------------------------------------------------------------------------------

    public void start() {
        if (state != State.NEW) {
            throw new IllegalStateException("leg already started: " + state);
        }
        state = State.CONNECTING;
        Channel idle = connector.pollIdle(endpoint);
        if (idle != null) {
            reused = true;
            attach(idle);
            send();
            return;
        }
        connectFresh();
    }

    private void connectFresh() {
        state = State.CONNECTING;
        connectStartNs = now();
        ChannelFuture f = connector.connect(loop, endpoint);
        f.addListener(x -> {
            if (state != State.CONNECTING) {
                if (x.isSuccess()) {
                    f.channel().close(); // the leg ended while connecting
                }
                return;
            }
            if (!x.isSuccess()) {
                fail(LegFailure.CONNECT, x.cause());
                return;
            }
            connectNs = now() - connectStartNs;
            attach(f.channel());
            send();
        });
    }

    private void send() {
        ByteBuf requestHead = request.encodeHead(channel.alloc(), endpoint.hostHeader(), body.readableBytes());
        state = State.SENT;
        sentAtNs = now();
        engineClockFromNs = sentAtNs;
        Channel sentOn = channel;
        // The head's write carries no promise of its own: the body's completes only once the head was written, and
        // fails with it. A duplicate of the body per send: a resend must still carry every byte.
        channel.write(requestHead, channel.unsafe().voidPromise());
        channel.writeAndFlush(body.retainedDuplicate()).addListener(f -> {
            if (!f.isSuccess() && channel == sentOn && !state.terminal()) {
                // The request did not leave: on a reused connection this is the stale keep-alive race.
                fail(LegFailure.CONNECT, f.cause());
            }
        });
        if (state != State.SENT) {
            return; // the write failed synchronously
        }
        // Armed for the earlier of the first-byte and the idle deadline: the head then never needs a new timer (the idle
        // deadline it starts cannot come before this one), so a short response costs one schedule. Firing with no head
        // before the first-byte deadline just re-arms for it (onTimer).
        scheduleTimer(sentAtNs + Math.min(timeouts.firstByteNs(), timeouts.idleNs()));
        channel.read();
        listener.onSent(this, connectNs);
    }

    /** Reads the next response bytes now (aggregating legs and listeners that need no back-pressure). */
    public void read() {
        if (state.terminal() || channel == null) {
            return;
        }
        if (clientHoldSinceNs >= 0) {
            clientHoldSinceNs = -1;
        }
        engineClockFromNs = now();
        long idleDeadline = engineClockFromNs + timeouts.idleNs();
        if (head != null && (!timerArmed || timerDeadlineNs - idleDeadline > 0)) {
            scheduleTimer(idleDeadline); // back from a client hold whose (later) stall deadline was armed
        }
        channel.read();
    }

    /**
     * Reads the next response bytes once {@code clientWrite} (the last write of this batch to the client) has
     * completed. While it is pending the engine is not charged idle time; a client that takes nothing for the
     * stall timeout ends the leg as {@link LegFailure#CLIENT_STALL}.
     */
    public void readAfter(ChannelFuture clientWrite) {
        if (state.terminal() || channel == null) {
            return;
        }
        if (clientWrite == null || clientWrite.isSuccess()) {
            read();
            return;
        }
        if (clientWrite.isDone()) {
            return; // the client write failed: the client connection is closing and will cancel the exchange
        }
        clientHoldSinceNs = now();
        long stallDeadline = clientHoldSinceNs + timeouts.clientStallNs();
        if (!timerArmed || stallDeadline < timerDeadlineNs) {
            scheduleTimer(stallDeadline);
        }
        clientWrite.addListener(onClientWritten);
    }

    private void onClientWritten(ChannelFuture f) {
        if (f.isSuccess() && !state.terminal() && clientHoldSinceNs >= 0) {
            read();
        }
    }

    /**
     * From {@link LegListener#onHead}: gather the whole body (at most {@code maxBytes}) and deliver it through
     * {@link LegListener#onAggregated}; a larger body ends the leg as {@link LegFailure#RESPONSE_TOO_LARGE}.
     * The aggregate belongs to the leg, so every way the leg ends releases it.
     */
    public void aggregate(int maxBytes) {
        if (state != State.HEAD) {
            throw new IllegalStateException("aggregate() only from onHead, not in " + state);
        }
        aggregateLimit = maxBytes;
        aggregate = channel.alloc().compositeBuffer(Integer.MAX_VALUE);
    }

    /**
     * Abandons the leg without telling its listener (the caller decided): the connection is closed (never pooled),
     * which makes the engine abort the request; the endpoint is not charged. Returns false if the leg had ended.
     */
    public boolean cancel() {
        return end(State.CANCELLED, LegFailure.CANCELLED, null);
    }

    /** Ends the leg as failed and tells the listener (unless it already ended). */
    private void fail(LegFailure failure, Throwable cause) {
        if (state.terminal()) {
            return;
        }
        if (failure == LegFailure.CONNECT || failure == LegFailure.EARLY_CLOSE) {
            if (reused && !anyResponseBytes && !resentFresh) {
                // A pooled connection the engine had already closed (the keep-alive race): the request goes again
                // once on a fresh connection to the same endpoint, as HTTP clients do, before anyone hears of it.
                resentFresh = true;
                reused = false;
                cancelTimer();
                Channel old = channel;
                detach();
                old.close();
                connectFresh();
                return;
            }
        }
        end(State.FAILED, failure, cause);
        notifyFailure(failure, cause);
    }

    private void notifyFailure(LegFailure failure, Throwable cause) {
        try {
            listener.onFailure(this, failure, cause);
        } catch (Throwable t) {
            // The listener's own failure path failed: nothing more the leg can do; the exchange watchdog owns it.
            Log.error("leg listener failed while handling " + failure + ": " + t);
        }
    }

    /**
     * The one teardown. Returns false if the leg had already ended. {@code failure} null means a complete response
     * (classified by its status).
     */
    private boolean end(State terminal, LegFailure failure, Throwable cause) {
        if (state.terminal()) {
            return false;
        }
        boolean keepConnection = terminal == State.DONE && head != null && head.keepAlive();
        state = terminal;
        cancelTimer();
        clientHoldSinceNs = -1;
        if (body.refCnt() > 0) {
            body.release();
        }
        if (aggregate != null) {
            aggregate.release();
            aggregate = null;
        }
        if (channel != null) {
            Channel ch = channel;
            detach();
            if (keepConnection) {
                connector.release(endpoint, ch);
            } else {
                ch.close();
            }
        }
        int status = head == null ? 0 : head.status();
        LegFailure charged = failure != null ? failure : LegFailure.ofStatus(status);
        if (charged != null && charged != LegFailure.CANCELLED) {
            metrics.upstreamError(endpoint.key(), charged.metricName());
        }
        prefillDone();
        outcomes.complete(endpoint, charged == null ? Outcome.SUCCESS : charged.outcome(), dpRank);
        return true;
    }

    /**
     * The uncached prompt tokens the routing stage charged the endpoint for this request (kv_exact,
     * {@code kv.prefill_token_weight}): handed back through {@link EndpointOutcomes#prefillDone} when the first
     * response body bytes arrive (the engine has prefilled: an SSE stream's first event is the first token) or when
     * the leg ends, whichever comes first. Set before {@link #start}.
     */
    public UpstreamLeg prefillTokens(int tokens) {
        this.prefillTokens = Math.max(0, tokens);
        return this;
    }

    /** The DP rank the request is pinned to (its {@code X-data-parallel-rank}): outcomes are reported with it. */
    public UpstreamLeg dpRank(int rank) {
        this.dpRank = rank;
        return this;
    }

    private void prefillDone() {
        int t = prefillTokens;
        if (t > 0) {
            prefillTokens = 0;
            outcomes.prefillDone(endpoint, t, dpRank);
        }
    }

    /**
     * Ends the leg with a failure only its listener can see, and tells the listener: {@link LegFailure#NO_PROGRESS}
     * (the relay saw bytes arrive for the idle timeout without one complete event among them) or
     * {@link LegFailure#ENDPOINT_DOWN} (the health probe found the endpoint down). On the leg's loop. Returns false
     * if the leg had ended.
     */
    public boolean failFromListener(LegFailure failure) {
        if (failure != LegFailure.NO_PROGRESS && failure != LegFailure.ENDPOINT_DOWN) {
            throw new IllegalArgumentException("a listener does not decide " + failure);
        }
        if (state.terminal()) {
            return false;
        }
        fail(failure, null);
        return true;
    }

    /**
     * Ends the leg from the outside because something in the gateway failed while handling it (the exchange
     * watchdog); the listener is not called back. The endpoint is not charged.
     */
    public boolean abortInternal() {
        return end(State.FAILED, LegFailure.INTERNAL, null);
    }

    // ---- timer -----------------------------------------------------------------------------------------------

    /** Asks for {@link #onTimer} at {@code deadlineNs} (or earlier: it re-checks). Only while on a connection. */
    private void scheduleTimer(long deadlineNs) {
        timerArmed = true;
        timerDeadlineNs = deadlineNs;
        handler.wakeAt(deadlineNs, this);
    }

    /** The leg no longer wants its timer; the connection's wake-up, if one is pending, stays for the next leg. */
    private void cancelTimer() {
        timerArmed = false;
    }

    private void onTimer() {
        timerArmed = false;
        if (state.terminal()) {
            return;
        }
        long now = now();
        long deadline;
        LegFailure onExpiry;
        if (clientHoldSinceNs >= 0) {
            deadline = clientHoldSinceNs + timeouts.clientStallNs();
            onExpiry = LegFailure.CLIENT_STALL;
        } else if (head == null && state != State.HEAD) {
            deadline = sentAtNs + timeouts.firstByteNs();
            onExpiry = LegFailure.FIRST_BYTE_TIMEOUT;
        } else {
            deadline = engineClockFromNs + timeouts.idleNs();
            onExpiry = LegFailure.IDLE_TIMEOUT;
        }
        if (now - deadline >= 0) {
            guarded(() -> fail(onExpiry, null));
        } else {
            scheduleTimer(deadline);
        }
    }

    // ---- response --------------------------------------------------------------------------------------------

    private void attach(Channel ch) {
        this.channel = ch;
        // Reads are requested one batch at a time (see readAfter). Connectors hand out channels with auto-read already
        // off (UpstreamConnector), so this is a no-op that changes no epoll interest; it only guards the invariant.
        ch.config().setAutoRead(false);
        handler = ch.pipeline().get(Handler.class);
        handler.leg = this;
    }

    private void detach() {
        if (handler.leg == this) {
            handler.leg = null;
        }
        handler = null;
        channel = null;
    }

    private void onRead(Object msg) {
        if (state.terminal()) {
            ReferenceCountUtil.release(msg);
            return;
        }
        anyResponseBytes = true;
        engineClockFromNs = now();
        if (msg instanceof ResponseHead r) {
            onHeadRead(r);
            return;
        }
        if (msg instanceof HttpContent c) {
            if (head == null) {
                c.release(); // cannot happen: the decoder sends a body only after its head
                return;
            }
            boolean last = c instanceof LastHttpContent;
            if (!firstBodyBytes && c.content().isReadable()) {
                firstBodyBytes = true;
                if (head.eventStream() && head.status() < 300) {
                    // A stream's first event is its first token: the endpoint's TTFT as this gateway sees it.
                    outcomes.firstToken(endpoint, now() - sentAtNs);
                }
            }
            if (prefillTokens > 0 && c.content().isReadable()) {
                prefillDone(); // the engine produced output: its prefill of this prompt is over
            }
            if (aggregate != null) {
                onAggregateContent(c, last);
                return;
            }
            if (last) {
                end(State.DONE, null, null);
            }
            listener.onContent(this, c, last);
        } else {
            ReferenceCountUtil.release(msg);
        }
    }

    private void onHeadRead(ResponseHead r) {
        if (r.informational()) {
            // 1xx (100 Continue, 103 Early Hints): not the answer; the decoder goes on with the final head. 101 is
            // never asked for.
            r.release();
            if (r.status() == 101) {
                fail(LegFailure.EARLY_CLOSE, new IllegalStateException("engine switched protocols (101) unasked"));
            }
            return;
        }
        if (loading503 && r.status() == 503) {
            // llama-server answers every request 503 "Loading model" until its model is loaded: the engine processed
            // nothing, so the request may go to another engine as if the connection had been refused. The unread
            // body goes with the connection; the endpoint is not charged (the health probe tracks readiness).
            r.release();
            fail(LegFailure.ENGINE_LOADING, null);
            return;
        }
        head = r;
        state = State.HEAD;
        try {
            listener.onHead(this, r);
        } finally {
            // The head's bytes are a slice of the connection's read buffer: a live stream must not pin it. What the
            // listener needed (the client's head) was copied in onHead; the parsed facts stay readable.
            r.release();
        }
        if (state.terminal()) {
            return;
        }
        long idleDeadline = engineClockFromNs + timeouts.idleNs();
        if (timerArmed && clientHoldSinceNs < 0 && timerDeadlineNs - idleDeadline > 0) {
            // From the first-byte deadline to idle checks. Only moved when the idle deadline comes first (a head after
            // the timer was re-armed for a late first byte): a timer that fires earlier finds the idle deadline ahead
            // (onTimer) and re-arms itself for it, so the common short response schedules one timer, not two.
            scheduleTimer(idleDeadline);
        }
        state = State.STREAMING;
    }

    private void onAggregateContent(HttpContent c, boolean last) {
        ByteBuf b = c.content();
        if (aggregate.readableBytes() + b.readableBytes() > aggregateLimit) {
            c.release();
            fail(LegFailure.RESPONSE_TOO_LARGE, null);
            return;
        }
        if (b.isReadable()) {
            aggregate.addComponent(true, b.retain());
        }
        c.release();
        if (!last) {
            return;
        }
        CompositeByteBuf all = aggregate;
        aggregate = null; // handed to the listener below; end() must not release it a second time
        ResponseHead h = head;
        end(State.DONE, null, null);
        try {
            listener.onAggregated(this, h, all);
        } finally {
            all.release();
        }
    }

    private void onReadComplete() {
        if (state.terminal() || channel == null) {
            return;
        }
        if (aggregate != null || head == null) {
            channel.read(); // nothing has reached the client yet: keep reading
            return;
        }
        listener.onReadComplete(this);
    }

    /** Runs {@code r}; an exception ends the leg as {@link LegFailure#INTERNAL} and tells the listener. */
    private void guarded(Runnable r) {
        try {
            r.run();
        } catch (Throwable t) {
            onInternalError(t);
        }
    }

    private void onInternalError(Throwable t) {
        if (end(State.FAILED, LegFailure.INTERNAL, t)) {
            notifyFailure(LegFailure.INTERNAL, t);
        }
    }

    /**
     * The engine channel's handler: forwards to whichever leg currently owns the connection, and owns the
     * connection's one timer. A leg asks to be woken by a deadline ({@link #wakeAt}); a pending wake-up that comes no
     * later is kept, and one left by an earlier leg is not cancelled: it wakes the current leg, which re-checks its
     * own deadlines and asks again ({@link UpstreamLeg#onTimer}). Deadlines on a keep-alive connection only move
     * forward, so a stream of short requests schedules one timer per timeout period instead of a schedule and a
     * cancel per request.
     */
    public static final class Handler extends ChannelInboundHandlerAdapter {
        UpstreamLeg leg;
        private final Runnable onWakeup = this::onWakeup;
        private ScheduledFuture<?> wakeup;
        private long wakeupAtNs;

        /** Makes sure the current leg's {@link UpstreamLeg#onTimer} runs at or before {@code atNs}. */
        void wakeAt(long atNs, UpstreamLeg l) {
            if (wakeup != null) {
                if (atNs - wakeupAtNs >= 0) {
                    return;
                }
                wakeup.cancel(false);
            }
            wakeupAtNs = atNs;
            wakeup = l.loop.schedule(onWakeup, Math.max(0, atNs - l.now()), TimeUnit.NANOSECONDS);
        }

        private void onWakeup() {
            wakeup = null;
            UpstreamLeg l = leg;
            if (l != null && l.timerArmed) {
                l.onTimer();
            }
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            UpstreamLeg l = leg;
            if (l == null) {
                ReferenceCountUtil.release(msg); // bytes on an idle pooled connection: it is no longer trustworthy
                ctx.close();
                return;
            }
            try {
                l.onRead(msg);
            } catch (Throwable t) {
                l.onInternalError(t);
            }
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            UpstreamLeg l = leg;
            if (l != null) {
                try {
                    l.onReadComplete();
                } catch (Throwable t) {
                    l.onInternalError(t);
                }
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (wakeup != null) {
                wakeup.cancel(false);
                wakeup = null;
            }
            UpstreamLeg l = leg;
            if (l != null) {
                l.guarded(() -> l.fail(l.head != null ? LegFailure.MID_BODY : LegFailure.EARLY_CLOSE, null));
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            UpstreamLeg l = leg;
            if (l != null) {
                l.guarded(() -> l.fail(l.head != null ? LegFailure.MID_BODY : LegFailure.EARLY_CLOSE, cause));
            }
            ctx.close();
        }
    }
}
