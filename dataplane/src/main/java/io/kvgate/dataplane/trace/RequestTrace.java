package io.kvgate.dataplane.trace;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapSetter;
import java.time.Instant;
import java.util.concurrent.TimeUnit;

/**
 * One sampled request's trace: its server span and the children the stages add (docs/tracing.md lists them). It
 * exists only for a sampled request, so every stage point guards with a null check and an unsampled request costs
 * nothing more. Stage timestamps are the gateway's own clock ({@code NanoClock}) moved to the epoch by the offset
 * taken when the trace began, so a span's duration is exactly what the stage timers measure. Event-loop only (the
 * request's loop); ended spans go to the SDK's batch processor, which exports them on its own thread.
 */
public final class RequestTrace {
    static final AttributeKey<String> OPERATION = AttributeKey.stringKey("gen_ai.operation.name");
    static final AttributeKey<String> PROVIDER = AttributeKey.stringKey("gen_ai.provider.name");
    static final AttributeKey<String> REQUEST_MODEL = AttributeKey.stringKey("gen_ai.request.model");
    static final AttributeKey<Long> MAX_TOKENS = AttributeKey.longKey("gen_ai.request.max_tokens");
    static final AttributeKey<Long> CHOICE_COUNT = AttributeKey.longKey("gen_ai.request.choice.count");
    static final AttributeKey<Long> INPUT_TOKENS = AttributeKey.longKey("gen_ai.usage.input_tokens");
    static final AttributeKey<Long> OUTPUT_TOKENS = AttributeKey.longKey("gen_ai.usage.output_tokens");
    static final AttributeKey<String> HTTP_METHOD = AttributeKey.stringKey("http.request.method");
    static final AttributeKey<String> HTTP_ROUTE = AttributeKey.stringKey("http.route");
    static final AttributeKey<Long> HTTP_STATUS = AttributeKey.longKey("http.response.status_code");
    static final AttributeKey<String> ERROR_TYPE = AttributeKey.stringKey("error.type");
    static final AttributeKey<String> SERVER_ADDRESS = AttributeKey.stringKey("server.address");
    static final AttributeKey<Long> CACHED_TOKENS = AttributeKey.longKey("kvgate.usage.cached_tokens");
    static final AttributeKey<Boolean> STREAM = AttributeKey.booleanKey("kvgate.request.stream");
    static final AttributeKey<String> RULE = AttributeKey.stringKey("kvgate.rule");
    static final AttributeKey<String> REQUEST_ID = AttributeKey.stringKey("kvgate.request_id");
    static final AttributeKey<String> ENDPOINT = AttributeKey.stringKey("kvgate.endpoint");
    static final AttributeKey<String> DECISION = AttributeKey.stringKey("kvgate.route.decision");
    static final AttributeKey<String> ROLE = AttributeKey.stringKey("kvgate.route.role");
    static final AttributeKey<Long> ATTEMPT = AttributeKey.longKey("kvgate.attempt");
    static final AttributeKey<Long> PROMPT_TOKENS = AttributeKey.longKey("kvgate.prompt.tokens");

    /** Writes the propagator's two headers into a {@code String[2]}: {@code traceparent}, {@code tracestate}. */
    private static final TextMapSetter<String[]> INTO_PAIR = (pair, key, value) -> {
        if (pair != null) {
            pair[Tracing.TRACEPARENT.equals(key) ? 0 : 1] = value;
        }
    };

    private final Tracer tracer;
    private final Span server;
    private final long monoStartNs;
    private final long epochStartNs;
    private int status;
    private String errorCode;

    RequestTrace(Tracer tracer, Span server, long monoStartNs, long epochStartNs, String route, boolean chat) {
        this.tracer = tracer;
        this.server = server;
        this.monoStartNs = monoStartNs;
        this.epochStartNs = epochStartNs;
        server.setAttribute(OPERATION, chat ? "chat" : "text_completion");
        server.setAttribute(HTTP_METHOD, "POST");
        server.setAttribute(HTTP_ROUTE, route);
    }

    static long epochNanos() {
        Instant now = Instant.now();
        return TimeUnit.SECONDS.toNanos(now.getEpochSecond()) + now.getNano();
    }

    private long epoch(long monoNs) {
        return epochStartNs + (monoNs - monoStartNs);
    }

    /** The trace id (32 lower-case hex digits): what the access log and histogram exemplars carry. */
    public String traceId() {
        return server.getSpanContext().getTraceId();
    }

    /** The request's server span (the parent of every stage span). */
    public Span serverSpan() {
        return server;
    }

    /** What the client asked for, from the body stage (GenAI semantic conventions plus ours). */
    public void request(String model, String rule, String engine, int maxTokens, int n, boolean stream, String requestId) {
        server.setAttribute(REQUEST_MODEL, model);
        server.setAttribute(RULE, rule);
        server.setAttribute(PROVIDER, engine);
        if (maxTokens > 0) {
            server.setAttribute(MAX_TOKENS, (long) maxTokens);
        }
        if (n > 1) {
            server.setAttribute(CHOICE_COUNT, (long) n);
        }
        server.setAttribute(STREAM, stream);
        server.setAttribute(REQUEST_ID, requestId);
    }

    /** A stage that already ran from {@code startNs} to {@code endNs} (gateway clock): one ended child span. */
    public void stage(String name, long startNs, long endNs) {
        child(name, startNs).end(epoch(endNs), TimeUnit.NANOSECONDS);
    }

    /** A stage under {@code parent} that already ran from {@code startNs} to {@code endNs}: one ended span. */
    public void stageUnder(Span parent, String name, long startNs, long endNs) {
        childOf(parent, name, startNs, SpanKind.INTERNAL).end(epoch(endNs), TimeUnit.NANOSECONDS);
    }

    /** A child of the server span started at {@code startNs}; end it with {@link #end(Span, long)}. */
    public Span child(String name, long startNs) {
        return childOf(server, name, startNs, SpanKind.INTERNAL);
    }

    /** A span under {@code parent} (a leg's connect under the leg). */
    public Span childOf(Span parent, String name, long startNs, SpanKind kind) {
        return tracer.spanBuilder(name).setParent(Context.root().with(parent)).setSpanKind(kind)
            .setStartTimestamp(epoch(startNs), TimeUnit.NANOSECONDS).startSpan();
    }

    /**
     * An engine request's span (a CLIENT span: the plain upstream request, the prefill leg, the decode leg) started
     * now; its context is what the engine gets as {@code traceparent} ({@link #traceHeaders}).
     */
    public Span leg(String name, long startNs, String endpoint, int attempt) {
        Span s = childOf(server, name, startNs, SpanKind.CLIENT);
        s.setAttribute(ENDPOINT, endpoint);
        s.setAttribute(SERVER_ADDRESS, endpoint);
        s.setAttribute(ATTEMPT, (long) attempt);
        return s;
    }

    /** Ends {@code span} at {@code endNs} (gateway clock). */
    public void end(Span span, long endNs) {
        span.end(epoch(endNs), TimeUnit.NANOSECONDS);
    }

    /** Ends {@code span} at {@code endNs} as failed with the gateway's error code. */
    public void fail(Span span, String code, long endNs) {
        span.setStatus(StatusCode.ERROR, code);
        span.setAttribute(ERROR_TYPE, code);
        end(span, endNs);
    }

    /** The routing decision, on the route span: the endpoint and the policy's explanation (tier, cached blocks ...). */
    public void decision(Span route, String endpoint, String why, String role) {
        if (endpoint != null) {
            route.setAttribute(ENDPOINT, endpoint);
        }
        if (why != null) {
            route.setAttribute(DECISION, why);
        }
        route.setAttribute(ROLE, role);
    }

    /** The prompt tokens the prompt stage produced for routing. */
    public void promptTokens(int tokens) {
        server.setAttribute(PROMPT_TOKENS, (long) tokens);
    }

    /** The first complete event of a stream went to the client. */
    public void firstToken(long atNs) {
        server.addEvent("gen_ai.first_token", epoch(atNs), TimeUnit.NANOSECONDS);
    }

    /** The token usage the answer reported. */
    public void usage(long input, long output, long cached) {
        server.setAttribute(INPUT_TOKENS, input);
        server.setAttribute(OUTPUT_TOKENS, output);
        if (cached > 0) {
            server.setAttribute(CACHED_TOKENS, cached);
        }
    }

    /** The status the client got (the last one recorded wins). */
    public void status(int httpStatus) {
        this.status = httpStatus;
    }

    /** The gateway's error code for a failed request (OpenAI error {@code code}), kept for the server span's end. */
    public void error(String code) {
        this.errorCode = code;
    }

    /**
     * The {@code traceparent} and {@code tracestate} an engine request under {@code leg} carries ({@code [1]} null
     * without a trace state), through the W3C propagator.
     */
    public static String[] traceHeaders(Span leg) {
        String[] pair = new String[2];
        W3CTraceContextPropagator.getInstance().inject(Context.root().with(leg), pair, INTO_PAIR);
        return pair;
    }

    /** Ends the server span at {@code endNs}: the status the client got, an error status on 5xx or a named error. */
    public void end(long endNs) {
        if (status > 0) {
            server.setAttribute(HTTP_STATUS, (long) status);
        }
        if (errorCode != null || status >= 500) {
            String code = errorCode != null ? errorCode : Integer.toString(status);
            server.setStatus(StatusCode.ERROR, code);
            server.setAttribute(ERROR_TYPE, code);
        }
        server.end(epoch(endNs), TimeUnit.NANOSECONDS);
    }
}
