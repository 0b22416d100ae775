package io.kvgate.dataplane.relay;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.accesslog.AccessLog;
import io.kvgate.dataplane.accesslog.AccessRecord;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.quality.LossCause;
import io.kvgate.dataplane.quality.PromptLedger;
import io.kvgate.dataplane.request.AnswerRewrite;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.upstream.LegFailure;
import io.kvgate.dataplane.upstream.UpstreamLeg;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Carries one engine answer to the client, for whichever exchange owns the leg it comes from: the response head and
 * body relayed as bytes ({@link ClientResponse}; SSE framed by {@link SseFramer}, usage read by {@link UsageScanner}),
 * or, for an engine error or an answer that must be edited, aggregated within a bound and re-emitted whole (the
 * OpenAI error shape, {@code kv_transfer_params} stripped, {@link AnswerRewrite}); the mid-stream error frame; and
 * what the answer is measured by (time to first token, inter-token gaps, {@code kvgate_tokens_total}, the request's
 * status, its access-log line and its trace's outcome).
 *
 * <p>What it does not do is decide anything about the engine request: routing, retries and the leg's failures before
 * a response head stay with the exchange, which forwards the leg's {@code onHead}/{@code onContent}/
 * {@code onReadComplete}/{@code onAggregated} here and ends itself when a call says the answer is complete.
 * Event-loop only.
 */
public final class Relay {
    private final ChannelHandlerContext ctx;
    private final Supplier<GatewayConfig> config;
    private final GatewayMetrics metrics;
    private final NanoClock clock;
    private final AccessLog accessLog;
    private final ClientResponse client;
    private final String ruleName;
    private final String model;
    private final String requestId;
    /** When the client's request arrived: time to first token and the request's duration run from here. */
    private final long startNs;
    /** {@code /v1/chat/completions} rather than completions: how an engine's context error names its {@code param}. */
    private final boolean chat;
    /** What the answers need rewritten (its request edits are in the body already), or null: relayed byte for byte. */
    private final AnswerRewrite rewrite;
    /** The access-log record of this request (the client connection's), completed and logged when it ends. */
    private final AccessRecord access;
    /** A P/D decode's JSON answer must lose {@code kv_transfer_params}: it is aggregated to strip them. */
    private boolean stripsTransferParams;
    /** The request's trace when it is sampled, else null. */
    private RequestTrace trace;
    private int status;
    private boolean relaying;
    /**
     * When the relay last passed on something the client can use (a complete event, body bytes) or started, on the
     * event loop's clock (the leg's timers' clock): bytes that complete nothing do not move it ({@link #onContent}).
     */
    private long progressAtNs;
    /** Time to first token (from {@link #startNs}), or -1 before the first output reached the client. */
    private long ttftNs = -1;
    /** When the last event with output was relayed (inter-token latency runs from here). */
    private long lastOutputNs;
    /** Why the request failed, for the access log (an OpenAI error code); null while it has not. */
    private String errorCode;
    /** Routing-quality accounting of the gateway ({@link #accountingTo}), or null: not accounted. */
    private PromptLedger ledger;

    public Relay(ChannelHandlerContext ctx, HttpRequest request, String requestId, Supplier<GatewayConfig> config,
                 GatewayMetrics metrics, NanoClock clock, AccessLog accessLog, AccessRecord access, String ruleName,
                 String model, long startNs, AnswerRewrite rewrite) {
        this.ctx = ctx;
        this.config = config;
        this.metrics = metrics;
        this.clock = clock;
        this.accessLog = accessLog;
        this.access = access;
        this.client = new ClientResponse(ctx, request, requestId);
        this.chat = request.uri().startsWith("/v1/chat/");
        this.requestId = requestId;
        this.ruleName = ruleName;
        this.model = model;
        this.startNs = startNs;
        this.rewrite = rewrite;
    }

    /** The answer goes out without {@code kv_transfer_params} (a P/D decode's: the client never sees them). */
    public Relay strippingTransferParams() {
        this.stripsTransferParams = true;
        return this;
    }

    /** Successful answers are accounted in {@code ledger} (reachable / predicted / observed prompt tokens). */
    public Relay accountingTo(PromptLedger l) {
        this.ledger = l;
        return this;
    }

    public Relay withTrace(RequestTrace t) {
        this.trace = t;
        return this;
    }

    /** The client connection's writer: the exchange's own answers (429, 503, 500) go through it too. */
    public ClientResponse client() {
        return client;
    }

    /** The engine's status once its head arrived (0 before). */
    public int status() {
        return status;
    }

    /** Whether the engine's response head went to the client (its status can no longer change). */
    public boolean relaying() {
        return relaying;
    }

    public void errorCode(String code) {
        this.errorCode = code;
    }

    /**
     * The engine's response head: relayed at once ({@code true}: the exchange is relaying now), or, for an error or an
     * answer to edit, the leg told to aggregate it within its bound ({@code false}: {@link #onAggregated} follows).
     */
    public boolean onHead(UpstreamLeg l, ResponseHead head, String explanation) {
        status = head.status();
        boolean sse = head.eventStream();
        if (!sse && status >= 400) {
            // Aggregated (bounded) to re-emit the engine's error in the OpenAI shape.
            l.aggregate(config.get().upstream().maxErrorBodyBytes());
            return false;
        }
        if (!sse && head.json() && (stripsTransferParams || (status < 300 && rewrite != null && rewrite.rewritesJson()))) {
            // A P/D decode's JSON must lose kv_transfer_params; an aliased or replicated answer is rewritten whole.
            l.aggregate(config.get().limits().maxBodyBytes());
            return false;
        }
        relaying = true;
        progressAtNs = loopNanoTime();
        client.startRelay(head, sse, explanation, chat, rewrite);
        return true;
    }

    /**
     * A chunk of a relayed body (released here). Returns true when it was the last: the answer is complete (the
     * exchange ends with {@link #status()} and {@link ClientResponse#keepAlive()}).
     */
    public boolean onContent(UpstreamLeg l, HttpContent content, boolean last) {
        boolean progressed = client.relay(content, last);
        outputRelayed(client.takeOutputEvents());
        if (last) {
            if (!client.sse() && status < 300) {
                firstToken(); // a whole answer: its first token reached the client with its last byte
            }
            return true;
        }
        // The leg's idle timer restarts on every byte, so an engine dripping an event that never completes would hold
        // the client for ever with nothing delivered: the same timeout also runs from the last progress.
        long now = loopNanoTime();
        if (progressed) {
            progressAtNs = now;
        } else if (now - progressAtNs >= TimeUnit.MILLISECONDS.toNanos(config.get().upstream().idleTimeoutMs())) {
            l.failFromListener(LegFailure.NO_PROGRESS);
        }
        return false;
    }

    /** Read-after-write: flush what this batch wrote and read the next upstream batch once the client took it. */
    public void onReadComplete(UpstreamLeg l) {
        l.readAfter(client.flushBatch());
    }

    /** The aggregated answer {@link #onHead} asked for, re-emitted whole; the answer is complete after this. */
    public void onAggregated(ByteBuf aggregated, String explanation) {
        String text = aggregated.toString(StandardCharsets.UTF_8);
        String json;
        if (status >= 400) {
            json = EngineErrors.toOpenAiShape(text, status, chat);
        } else {
            json = stripsTransferParams ? EngineErrors.withoutKvTransferParams(text) : text;
            if (status < 300 && rewrite != null && rewrite.rewritesJson()) {
                json = AnswerJson.rewriteAnswer(json, rewrite);
            }
        }
        client.answerJson(status, json, explanation);
        if (status < 300) {
            firstToken();
        } else {
            errorCode = "engine_error";
        }
    }

    /**
     * The leg failed after the head went out: an SSE client gets one {@code data: {"error":…}} event plus
     * {@code data: [DONE]} (a silent close looks like success to the SDKs). Returns whether the connection may be
     * kept alive.
     */
    public boolean failMidStream(LegFailure failure, String message) {
        errorCode = failure.code();
        if (client.sse()) {
            metrics.midStreamErrors.increment();
        }
        metrics.responseIncomplete(failure.metricName());
        boolean open = client.endStreamWithError(message, failure.code());
        return open && client.keepAlive();
    }

    /**
     * Records the answer; a stream that ended in an error event is {@code status="stream_error"}, not its 200. The
     * token usage the answer carried (as the client saw it, the usage chunk counted even when it was dropped) goes
     * to {@code kvgate_tokens_total}. {@code endpoint}, {@code tier} and the prompt token counts are the routing
     * decision's ({@link io.kvgate.dataplane.route.Decision}), for the access log and, with what the
     * engine reported it served from its cache, for routing-quality accounting.
     */
    public void record(int st, String endpoint, String tier, int reachableTokens, int predictedTokens,
                       int confirmedTokens, LossCause routeLoss) {
        if (client.usageSeen()) {
            metrics.tokens(ruleName, model, client.promptTokens(), client.completionTokens(), client.cachedTokens());
            // Whether or not the access log is on: the front door settles the tenant's reservation from these.
            access.promptTokens = client.promptTokens();
            access.completionTokens = client.completionTokens();
        }
        if (ledger != null && tier != null && st < 300 && !client.streamFailed()) {
            if (client.cachedReported()) {
                ledger.record(ruleName, client.promptTokens(), client.cachedTokens(), reachableTokens, predictedTokens,
                    confirmedTokens, routeLoss);
            } else {
                ledger.unreported(ruleName);
            }
        }
        if (trace != null) {
            traceOutcome(st);
        }
        logAccess(st, endpoint, tier, reachableTokens, predictedTokens, routeLoss);
        if (client.streamFailed()) {
            metrics.request(ruleName, model, GatewayMetrics.STREAM_ERROR, clock.nanoTime() - startNs);
            return;
        }
        metrics.request(ruleName, model, st, clock.nanoTime() - startNs);
    }

    /** The request's access-log line: the status the client got, what the engine reported, when output started. */
    public void logAccess(int st, String endpoint, String tier, int reachableTokens, int predictedTokens,
                          LossCause routeLoss) {
        if (!accessLog.enabled()) {
            return;
        }
        AccessRecord a = access;
        a.requestId = requestId;
        a.rule = ruleName;
        a.model = model;
        a.endpoint = endpoint;
        a.status = st;
        a.bytesOut = client.bytesOut();
        if (client.usageSeen()) {
            a.promptTokens = client.promptTokens();
            a.cachedTokens = client.cachedTokens();
        }
        a.ttftNs = ttftNs;
        a.tier = tier;
        a.reachableTokens = reachableTokens;
        a.predictedTokens = predictedTokens;
        a.routeLoss = routeLoss == null ? null : routeLoss.label;
        a.durationNs = clock.nanoTime() - startNs;
        a.errorCode = errorCode != null ? errorCode : client.streamFailed() ? GatewayMetrics.STREAM_ERROR : null;
        accessLog.log(a);
    }

    /** The first output reached the client now: time to first token. */
    private void firstToken() {
        if (ttftNs < 0) {
            lastOutputNs = clock.nanoTime();
            ttftNs = lastOutputNs - startNs;
            metrics.timeToFirstToken(ruleName, ttftNs, access.traceId);
            if (trace != null) {
                trace.firstToken(lastOutputNs); // the first content token (the access log's and the histogram's TTFT)
            }
        }
    }

    /**
     * {@code n} events with output were just relayed: the first of the stream is its first token, each later one an
     * inter-token gap (events that arrived in one read are 0 apart: that is what the client saw).
     */
    private void outputRelayed(int n) {
        if (n == 0) {
            return;
        }
        int gaps = n;
        if (ttftNs < 0) {
            firstToken();
            gaps--;
        } else {
            long now = clock.nanoTime();
            metrics.interTokenLatency(ruleName, now - lastOutputNs, access.traceId);
            lastOutputNs = now;
            gaps--;
        }
        for (int i = 0; i < gaps; i++) {
            metrics.interTokenLatency(ruleName, 0, access.traceId);
        }
    }

    /** The answer's status and usage on the request's server span; a stream that ended in an error event is an error. */
    private void traceOutcome(int st) {
        trace.status(st);
        if (client.usageSeen()) {
            trace.usage(client.promptTokens(), client.completionTokens(), client.cachedTokens());
        }
        if (client.streamFailed()) {
            trace.error(GatewayMetrics.STREAM_ERROR);
        }
    }

    private long loopNanoTime() {
        return ctx.channel().eventLoop().ticker().nanoTime();
    }
}
