package io.kvgate.tools.bench;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObject;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.ReferenceCountUtil;
import java.nio.charset.StandardCharsets;

/**
 * One keep-alive HTTP/1.1 connection of the generator, carrying one request at a time (no pipelining, like a real
 * client SDK). It timestamps the response as it arrives: first byte, each SSE content frame (decoded incrementally
 * by {@link SseDecoder} from the ByteBufs as they are read), the end; it validates the response and names the
 * {@link ErrorClass} of a failure, then hands the finished request to its {@link BenchDriver}.
 *
 * <p>Non-streaming bodies are accumulated (bounded by {@link #MAX_BODY_BYTES}) because validating them needs the
 * whole JSON document; streams are never accumulated.
 *
 * <p>Threading: event-loop only (the driver and all its connections share one event loop).
 */
final class BenchConnection extends ChannelInboundHandlerAdapter implements SseDecoder.Listener {
    static final int MAX_BODY_BYTES = 16 << 20;
    static final int MAX_EVENT_BYTES = 4 << 20;
    private static final byte[] DONE = "[DONE]".getBytes(StandardCharsets.US_ASCII);

    private final BenchDriver driver;
    private final SseDecoder sse = new SseDecoder(MAX_EVENT_BYTES);
    private final CompletionJson.Result json = new CompletionJson.Result();
    Channel channel;
    boolean active;
    boolean busy;

    // State of the request in flight; reset by start().
    BenchRequest request;
    long seq;
    long intendedNs;
    long sendNs;
    boolean measured;
    private boolean streamRequested;
    int status;
    boolean headersSeen;
    private boolean sseBody;
    private boolean keepAlive;
    long firstByteNs;
    long firstContentNs;
    long lastContentNs;
    int contentFrames;
    private boolean doneSeen;
    ErrorClass error;
    private boolean timedOut;
    long promptTokens;
    long completionTokens;
    long cachedTokens;
    StringBuilder reply;
    private byte[] body = new byte[4096];
    private int bodyLength;
    private boolean bodyOverflow;

    BenchConnection(BenchDriver driver) {
        this.driver = driver;
    }

    /** Prepares the per-request state; the caller then writes the request. */
    void start(BenchRequest request, long seq, long intendedNs, long sendNs, boolean measured, boolean stream,
               boolean wantsReply) {
        this.busy = true;
        this.request = request;
        this.seq = seq;
        this.intendedNs = intendedNs;
        this.sendNs = sendNs;
        this.measured = measured;
        this.streamRequested = stream;
        status = 0;
        headersSeen = false;
        sseBody = false;
        keepAlive = true;
        firstByteNs = 0;
        firstContentNs = 0;
        lastContentNs = 0;
        contentFrames = 0;
        doneSeen = false;
        error = null;
        timedOut = false;
        promptTokens = -1;
        completionTokens = -1;
        cachedTokens = -1;
        bodyLength = 0;
        bodyOverflow = false;
        sse.reset();
        if (wantsReply) {
            if (reply == null) {
                reply = new StringBuilder(256);
            }
            reply.setLength(0);
            json.text = reply;
        } else {
            json.text = null;
        }
    }

    /** Called by the driver's timeout sweep: the request is failed as a timeout and the connection closed. */
    void onTimeout() {
        if (busy) {
            timedOut = true;
            channel.close();
        }
    }

    boolean reusable() {
        return active && keepAlive;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        active = true;
        driver.onConnected(this);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        active = false;
        if (busy) {
            ErrorClass e = timedOut ? ErrorClass.TIMEOUT
                : headersSeen || firstByteNs != 0 ? ErrorClass.TRUNCATED : ErrorClass.CONNECT;
            finish(e);
        }
        driver.onClosed(this);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        // I/O errors (reset, broken pipe) end the connection; channelInactive classifies the request.
        ctx.close();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        try {
            if (!busy || !(msg instanceof HttpObject http)) {
                // Bytes nobody asked for: the server is out of step with us; this connection cannot be trusted.
                ctx.close();
                return;
            }
            if (http.decoderResult().isFailure()) {
                error = ErrorClass.PROTOCOL;
                keepAlive = false;
                finish(error);
                ctx.close();
                return;
            }
            long now = driver.clock.nanoTime();
            if (msg instanceof HttpResponse response) {
                onHeaders(response, now);
            }
            if (msg instanceof HttpContent content) {
                onContent(content.content());
                if (msg instanceof LastHttpContent && busy) {
                    onEnd();
                }
            }
        } finally {
            ReferenceCountUtil.release(msg);
        }
    }

    private void onHeaders(HttpResponse response, long now) {
        int code = response.status().code();
        if (code == 100) {
            return;
        }
        headersSeen = true;
        status = code;
        firstByteNs = now;
        keepAlive = HttpUtil.isKeepAlive(response);
        if (code != 200) {
            error = ErrorClass.ofStatus(code);
            return;
        }
        if (streamRequested) {
            String type = response.headers().get(HttpHeaderNames.CONTENT_TYPE);
            if (type != null && type.regionMatches(true, 0, "text/event-stream", 0, 17)) {
                sseBody = true;
            } else {
                error = ErrorClass.STREAM_ERROR;
            }
        }
    }

    private void onContent(ByteBuf content) {
        if (!content.isReadable() || error != null && !sseBody) {
            return;
        }
        if (sseBody) {
            sse.feed(content, this);
            return;
        }
        int n = content.readableBytes();
        if (bodyOverflow || bodyLength + n > MAX_BODY_BYTES) {
            bodyOverflow = true;
            return;
        }
        if (bodyLength + n > body.length) {
            byte[] bigger = new byte[Math.min(MAX_BODY_BYTES, Math.max(body.length * 2, bodyLength + n))];
            System.arraycopy(body, 0, bigger, 0, bodyLength);
            body = bigger;
        }
        content.getBytes(content.readerIndex(), body, bodyLength, n);
        bodyLength += n;
    }

    private void onEnd() {
        if (error == null) {
            if (sseBody) {
                if (!doneSeen) {
                    error = ErrorClass.TRUNCATED;
                }
            } else if (bodyOverflow) {
                error = ErrorClass.PROTOCOL;
            } else if (!CompletionJson.inspect(body, 0, bodyLength, json)) {
                error = ErrorClass.INVALID_JSON;
            } else if (json.error) {
                error = ErrorClass.ERROR_BODY;
            } else if (!json.hasChoices) {
                error = ErrorClass.INVALID_JSON;
            } else {
                takeUsage();
                contentFrames = json.contentChars > 0 ? 1 : 0;
            }
        }
        finish(error);
    }

    private void takeUsage() {
        if (json.hasUsage()) {
            promptTokens = json.promptTokens;
            completionTokens = json.completionTokens;
            cachedTokens = json.cachedTokens;
        }
    }

    @Override
    public void onData(byte[] data, int length) {
        if (doneSeen) {
            if (error == null) {
                error = ErrorClass.INVALID_JSON; // [DONE] must be the last frame
            }
            return;
        }
        if (length == DONE.length && java.util.Arrays.equals(data, 0, length, DONE, 0, length)) {
            doneSeen = true;
            return;
        }
        if (!CompletionJson.inspect(data, 0, length, json)) {
            if (error == null) {
                error = ErrorClass.INVALID_JSON;
            }
            return;
        }
        if (json.error) {
            error = ErrorClass.STREAM_ERROR; // wins over any earlier class: the engine told us it failed
            return;
        }
        if (json.contentChars > 0) {
            long now = driver.clock.nanoTime();
            if (contentFrames == 0) {
                firstContentNs = now;
            } else if (measured) {
                BenchStats.record(driver.stats.itlUs, now - lastContentNs);
            }
            lastContentNs = now;
            contentFrames++;
        }
        takeUsage();
    }

    @Override
    public void onOversized() {
        if (error == null) {
            error = ErrorClass.PROTOCOL;
        }
    }

    private void finish(ErrorClass e) {
        if (!busy) {
            return;
        }
        busy = false;
        error = e;
        driver.onRequestDone(this);
    }
}
