package io.kvgate.dataplane.relay;

import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.kvgate.dataplane.wire.RelayHead;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.DefaultLastHttpContent;
import io.netty.handler.codec.http.EmptyHttpHeaders;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import java.nio.charset.StandardCharsets;

/**
 * The client's side of one exchange: everything written to the client connection goes through here. A response is
 * either relayed (the engine's head copied as bytes, {@link RelayHead}, then its body chunk by chunk, framed by the
 * client codec; SSE through an {@link SseFramer}) or answered in one piece (an error, a normalized engine error, a P/D
 * decode's JSON, a rewritten JSON answer). Every response carries the client's request id, the route explanation when
 * asked for, and {@code Connection: close} when the request did not allow keep-alive.
 * The last write of each read batch is kept for read-after-write back-pressure ({@link #flushBatch}).
 *
 * <p>A successful answer's token usage is read on its way out ({@link UsageScanner}, whose state this object carries
 * so the byte-for-byte relay allocates nothing for it); a stream with an {@link AnswerRewrite} goes through an
 * {@link SseRewriter} instead, which counts the usage chunk itself (it may drop it). Event-loop only.
 */
public final class ClientResponse extends UsageScanner {
    private final ChannelHandlerContext ctx;
    private final HttpRequest request;
    private final String requestId;
    private final boolean keepAlive;
    private boolean streaming;
    private SseFramer framer;
    private EngineStreamCheck streamCheck;
    /** Rewrites a stream's events (alias, greedy replication, forced usage); null relays them byte for byte. */
    private SseRewriter rewriter;
    /** A successful answer: its bytes are scanned for token usage. */
    private boolean countsUsage;
    /** The stream carried an error event (the engine's, or the gateway's when it could not finish it). */
    private boolean streamFailed;
    private ChannelFuture lastWrite;
    /** {@code X-Kvgate-Warning} for every response of this exchange, or null. */
    private String warning;
    /** Finds a successful stream's events with output (first token, inter-token gaps); null for any other answer. */
    private ContentEventScanner outputScanner;
    /** Events with output relayed since {@link #takeOutputEvents} last asked. */
    private int outputEvents;
    /** Body bytes sent to the client (the access log's {@code bytes_out}). */
    private long bytesOut;
    /** Mid-stream failover's view of the stream ({@link #stitch}), or null: the rule has none or the request is refused. */
    private StreamStitch stitch;

    public ClientResponse(ChannelHandlerContext ctx, HttpRequest request, String requestId) {
        this.ctx = ctx;
        this.request = request;
        this.requestId = requestId;
        this.keepAlive = HttpUtil.isKeepAlive(request);
    }

    public boolean keepAlive() {
        return keepAlive;
    }

    /** Whether a relayed response head went out (the status can no longer change). */
    boolean streaming() {
        return streaming;
    }

    /**
     * Mid-stream failover (issue #41): a successful stream's complete events go through {@code s} first, which holds
     * back an engine's error event and the end of a stream cut short, so the exchange can continue it elsewhere.
     */
    public void stitch(StreamStitch s) {
        this.stitch = s;
    }

    /**
     * The stream continues on another engine: the partial event of the engine that failed is dropped (the client
     * never saw it) and the next engine's events are stitched on; no new response head goes out.
     */
    public void continueOnNextLeg() {
        if (framer != null) {
            framer.discard();
        }
        stitch.nextLeg();
    }

    /** Whether the relayed response is a server-sent-event stream. */
    public boolean sse() {
        return framer != null;
    }

    /**
     * Whether a started stream ended in error: the engine sent an error event, the gateway ended it with one, or it
     * lacked {@code [DONE]} (counted as {@code status="stream_error"}, not as the 200 on the wire).
     */
    public boolean streamFailed() {
        return streamFailed;
    }

    /** Sets the {@code X-Kvgate-Warning} every response of the exchange carries (null: none). */
    public void warning(String value) {
        this.warning = value;
    }

    private void decorate(HttpResponse r, String explanation) {
        r.headers().set("x-request-id", requestId);
        if (warning != null) {
            r.headers().set(io.kvgate.dataplane.request.ParsedRequest.WARNING_HEADER, warning);
        }
        if (explanation != null) {
            r.headers().set("x-kvgate-route", explanation);
        }
        if (!keepAlive()) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
    }

    /**
     * Starts relaying the engine's response: its head's bytes (borrowed: copied here), without the lines the client
     * must not see, with the gateway's own headers. An SSE stream's events are checked ({@link EngineStreamCheck}) and
     * may change, so its body goes out chunked whatever length the engine declared; {@code chat} names a context
     * overflow's {@code param} in error events; a successful stream is rewritten for {@code rewrite} (null: relayed
     * as it came).
     */
    public void startRelay(ResponseHead engineHead, boolean sse, String explanation, boolean chat, AnswerRewrite rewrite) {
        RelayHead out = RelayHead.relay(ctx.alloc(), engineHead, requestId, explanation, warning, !keepAlive(), sse);
        boolean ok = engineHead.status() < 300;
        countsUsage = ok && !engineHead.contentEncoded(); // a compressed body cannot be read
        if (sse) {
            framer = new SseFramer();
            streamCheck = ok ? new EngineStreamCheck(chat) : null;
            rewriter = ok && rewrite != null ? new SseRewriter(rewrite) : null;
            outputScanner = ok ? new ContentEventScanner() : null;
        }
        streaming = true;
        lastWrite = ctx.write(out);
    }

    /**
     * Relays one body chunk (taking it over); {@code last} ends and flushes the response. Returns whether the engine
     * made progress the client can use: body bytes, or on SSE at least one complete event (whatever the gateway then
     * does with it); bytes of an event still incomplete are not progress.
     */
    public boolean relay(HttpContent content, boolean last) {
        if (framer != null) {
            ByteBuf chunk = content.content().retain();
            content.release();
            if (last && stitching()) {
                ByteBuf rest = stitch.onEvents(ctx.alloc(), framer.finish(ctx.alloc(), chunk));
                stitch.onLegEnd();
                if (stitch.wantsContinuation()) {
                    // Cut short: what came before the cut goes out, the response stays open for the next engine.
                    progressedTo(rest);
                    return true;
                }
                ByteBuf end = endOfStream(rest);
                bytesOut += end.readableBytes();
                ctx.writeAndFlush(new DefaultLastHttpContent(end, EmptyHttpHeaders.INSTANCE), noFuture());
                return true;
            }
            if (last) {
                ByteBuf end = endOfStream(framer.finish(ctx.alloc(), chunk));
                bytesOut += end.readableBytes();
                ctx.writeAndFlush(new DefaultLastHttpContent(end, EmptyHttpHeaders.INSTANCE), noFuture());
                return true;
            }
            ByteBuf out = framer.next(ctx.alloc(), chunk);
            boolean progressed = out.isReadable();
            if (stitching()) {
                out = stitch.onEvents(ctx.alloc(), out);
            }
            countOutput(out);
            if (streamCheck != null) {
                out = streamCheck.check(ctx.alloc(), out);
                streamFailed |= streamCheck.engineError();
            }
            out = rewriteOrCount(out);
            bytesOut += out.readableBytes();
            if (out.isReadable()) {
                lastWrite = ctx.write(new DefaultHttpContent(out));
            } else {
                out.release();
            }
            return progressed;
        }
        if (countsUsage) {
            scanUsage(content.content());
        }
        boolean progressed = last || content.content().isReadable();
        bytesOut += content.content().readableBytes();
        if (last) {
            ctx.writeAndFlush(content, noFuture());
        } else {
            lastWrite = ctx.write(content);
        }
        return progressed;
    }

    private boolean stitching() {
        return stitch != null && streamCheck != null;
    }

    /** Checked, counted and written, not ending the response (a leg cut short: the next one goes on). */
    private void progressedTo(ByteBuf events) {
        countOutput(events);
        ByteBuf out = streamCheck.check(ctx.alloc(), events);
        out = rewriteOrCount(out);
        bytesOut += out.readableBytes();
        if (out.isReadable()) {
            lastWrite = ctx.write(new DefaultHttpContent(out));
        } else {
            out.release();
        }
        ctx.flush();
    }

    /** Counts the events with output among the engine's complete events {@code events} (before any rewrite). */
    private void countOutput(ByteBuf events) {
        if (outputScanner != null) {
            outputEvents += outputScanner.scan(events);
        }
    }

    /** The events with output relayed since the last call (a stream's tokens as they reach the client). */
    public int takeOutputEvents() {
        int n = outputEvents;
        outputEvents = 0;
        return n;
    }

    /** Body bytes sent to the client so far. */
    public long bytesOut() {
        return bytesOut;
    }

    /** Checked events on their way out: rewritten (and counted) for the answer's rewrite, else counted as they are. */
    private ByteBuf rewriteOrCount(ByteBuf events) {
        if (rewriter != null) {
            return rewriter.rewrite(ctx.alloc(), events, this);
        }
        if (countsUsage) {
            scanUsage(events);
        }
        return events;
    }

    /** The stream's last bytes, checked, plus an error event and {@code [DONE]} when the engine sent no {@code [DONE]}. */
    private ByteBuf endOfStream(ByteBuf rest) {
        countOutput(rest);
        if (streamCheck == null) {
            return rest;
        }
        ByteBuf out = streamCheck.check(ctx.alloc(), rest);
        streamFailed |= streamCheck.engineError();
        out = rewriteOrCount(out);
        if (rewriter != null) {
            out = rewriter.releaseHeld(ctx.alloc(), out); // a finish chunk no event followed
        }
        if (streamCheck.endedWithDone()) {
            return out;
        }
        streamFailed = true;
        boolean unterminated = out.isReadable() && SseFramer.lastEventEnd(out) != out.writerIndex();
        String frames = EngineStreamCheck.missingDoneFrames(streamCheck.engineError(), unterminated);
        return ctx.alloc().compositeBuffer(2).addComponents(true, out,
            Unpooled.copiedBuffer(frames, StandardCharsets.UTF_8));
    }

    /**
     * The promise of a write whose outcome nobody reads (the response's last one: read-after-write only waits on
     * writes before it): no promise object per response. It fires no exception either; a failed write to a client
     * that left surfaces as the connection's close. A handler that must act on the write (the codec closing after a
     * response) takes a real promise itself ({@code unvoid}).
     */
    private ChannelPromise noFuture() {
        return ctx.channel().unsafe().voidPromise();
    }

    /** Flushes this read batch's writes; returns the last one (null: nothing was written), for read-after-write. */
    public ChannelFuture flushBatch() {
        ChannelFuture w = lastWrite;
        lastWrite = null;
        ctx.flush();
        return w;
    }

    /** The whole answer at once: a JSON body with {@code status} (a successful one is scanned for token usage). */
    public void answerJson(int status, String json, String explanation) {
        FullHttpResponse r = OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.valueOf(status), json);
        decorate(r, explanation);
        if (status < 300) {
            scanUsage(r.content());
        }
        bytesOut += r.content().readableBytes();
        ctx.writeAndFlush(r);
    }

    /** The gateway's own error, in the OpenAI shape; {@code retryAfterSeconds} < 0 for none. */
    public void answerError(HttpResponseStatus status, String message, String code, long retryAfterSeconds, String explanation) {
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), status, message, null, code);
        if (retryAfterSeconds >= 0) {
            r.headers().set(HttpHeaderNames.RETRY_AFTER, retryAfterSeconds);
        }
        decorate(r, explanation);
        bytesOut += r.content().readableBytes();
        ctx.writeAndFlush(r);
    }

    /** An error answer after which the connection is closed, whatever the request allowed. */
    public void answerErrorAndClose(HttpResponseStatus status, String message, String code) {
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), status, message, null, code);
        r.headers().set("x-request-id", requestId);
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        bytesOut += r.content().readableBytes();
        ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
    }

    /**
     * Ends a started stream that cannot finish: on SSE one error event plus {@code [DONE]} (the partial event the
     * engine died in is dropped) and the end of the chunked body; any other body can only be cut by closing.
     * Returns whether the connection can carry on (SSE) or was closed.
     */
    public boolean endStreamWithError(String message, String code) {
        if (framer == null) {
            ctx.close(); // a truncated JSON body cannot be repaired: closing is the only honest signal
            return false;
        }
        framer.discard();
        streamFailed = true;
        String frames = OpenAiErrors.sseErrorFrames(message, OpenAiErrors.STREAM_ERROR_TYPE, code);
        ByteBuf framesBytes = Unpooled.copiedBuffer(frames, StandardCharsets.UTF_8);
        bytesOut += framesBytes.readableBytes();
        ctx.write(new DefaultHttpContent(framesBytes));
        ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        return true;
    }

    public void close() {
        ctx.close();
    }

    /** Frees what is held back (the exchange ended). */
    public void discard() {
        if (framer != null) {
            framer.discard();
        }
    }
}
