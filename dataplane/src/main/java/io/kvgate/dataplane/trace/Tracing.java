package io.kvgate.dataplane.trace;

import io.kvgate.control.config.TracingConfig;
import io.kvgate.control.log.Log;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.SpanProcessor;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.samplers.Sampler;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

/**
 * The gateway's OpenTelemetry tracer (docs/tracing.md), built once at start-up from {@code tracing}: an SDK tracer
 * provider with parent-based ratio sampling and a batch span processor that exports over OTLP/HTTP on the SDK's own
 * thread, never on an I/O thread. {@link #OFF} (no endpoint, or {@code sample_ratio: 0}) does nothing at all:
 * {@link #begin} returns null at its first line and the client's {@code traceparent} reaches the engine untouched.
 *
 * <p>With a ratio above 0, a request whose client sent a valid, unsampled {@code traceparent} is recognised from
 * the header's bytes and not traced either (parent-based sampling would drop it; no SDK object is made); a sampled
 * one is continued; one without a (valid) header starts a trace with probability {@code sample_ratio}, drawn before
 * any SDK object is made ({@link #rootSampled}). Only a sampled
 * request gets a {@link RequestTrace}; its engine requests then carry the gateway's span as their parent.
 * Thread-safe: {@link #begin} runs on any I/O thread.
 */
public final class Tracing implements AutoCloseable {
    /** Nothing traced, nothing built. */
    public static final Tracing OFF = new Tracing(null, null, 0);

    static final String TRACEPARENT = "traceparent";
    static final String TRACESTATE = "tracestate";
    private static final AttributeKey<String> SERVICE_NAME = AttributeKey.stringKey("service.name");
    private static final W3CTraceContextPropagator W3C = W3CTraceContextPropagator.getInstance();

    /** Reads the client's headers for the W3C propagator (only on the sampled path). */
    static final TextMapGetter<HttpHeaders> HEADERS = (carrier, key) -> carrier == null ? null : carrier.get(key);

    private final SdkTracerProvider provider;
    private final Tracer tracer;
    private final double ratio;

    Tracing(SdkTracerProvider provider, Tracer tracer, double ratio) {
        this.provider = provider;
        this.tracer = tracer;
        this.ratio = ratio;
    }

    /** The tracer {@code config} asks for: {@link #OFF} unless it has an endpoint and a ratio above 0. */
    public static Tracing start(TracingConfig config) {
        if (!config.enabled()) {
            return OFF;
        }
        OtlpHttpSpanExporter exporter = OtlpHttpSpanExporter.builder().setEndpoint(config.otlpEndpoint()).build();
        Tracing t = of(config, BatchSpanProcessor.builder(exporter).build());
        Log.info("tracing: " + config.sampleRatio() + " of new traces sampled (client decisions honoured), spans to "
            + config.otlpEndpoint() + " as service " + config.serviceName());
        return t;
    }

    /** A tracer over {@code processor} (tests hand in a processor over an in-memory exporter). */
    public static Tracing of(TracingConfig config, SpanProcessor processor) {
        SdkTracerProvider provider = SdkTracerProvider.builder()
            .setResource(Resource.getDefault().merge(Resource.create(Attributes.of(SERVICE_NAME, config.serviceName()))))
            // Parent-based; a trace the gateway starts was already drawn at sample_ratio by begin (see rootSampled).
            .setSampler(Sampler.parentBased(Sampler.alwaysOn()))
            .addSpanProcessor(processor)
            .build();
        return new Tracing(provider, provider.get("io.kvgate.gateway"), config.sampleRatio());
    }

    /** Whether any request can be traced. */
    public boolean enabled() {
        return tracer != null;
    }

    /**
     * The trace of a request whose head arrived at {@code startNs} (the gateway's clock), or null when it is not
     * sampled: tracing off, a client's unsampled {@code traceparent}, or the ratio said no. Its server span continues
     * the client's {@code traceparent} when there is a valid one.
     *
     * @param route the route path, e.g. {@code /v1/chat/completions}
     */
    public RequestTrace begin(HttpHeaders clientHeaders, long startNs, long nowNs, String route, boolean chat) {
        if (tracer == null) {
            return null;
        }
        String parent = clientHeaders.get(TRACEPARENT);
        Context ctx;
        if (parent == null) {
            if (!rootSampled()) {
                return null;
            }
            ctx = Context.root();
        } else if (unsampledParent(parent)) {
            return null;
        } else {
            ctx = W3C.extract(Context.root(), clientHeaders, HEADERS);
            if (!Span.fromContext(ctx).getSpanContext().isValid() && !rootSampled()) {
                return null; // an invalid header counts as none
            }
        }
        long epochStart = RequestTrace.epochNanos() - (nowNs - startNs);
        Span server = tracer.spanBuilder((chat ? "chat" : "text_completion") + " " + route).setParent(ctx)
            .setSpanKind(SpanKind.SERVER).setStartTimestamp(epochStart, TimeUnit.NANOSECONDS).startSpan();
        if (!server.isRecording()) {
            return null; // the ratio said no: nothing was recorded, the client's header (if any) goes on untouched
        }
        return new RequestTrace(tracer, server, startNs, epochStart, route, chat);
    }

    /**
     * Whether a trace the gateway starts (no valid client parent) is sampled: drawn here, before any SDK object, so an
     * unsampled request allocates nothing. The SDK's root sampler is then always-on: together this is
     * {@code parentBased(traceIdRatioBased(ratio))} with the draw taken from a thread-local generator instead of the
     * new trace id's bits (equally uniform: the SDK's ids are random).
     */
    private boolean rootSampled() {
        return ratio >= 1.0 || ThreadLocalRandom.current().nextDouble() < ratio;
    }

    /**
     * Whether {@code h} is a valid version-00 {@code traceparent} whose sampled flag is clear: parent-based sampling
     * drops such a request, so it is recognised here without building a context. A header that is not exactly that
     * shape goes through the propagator (which treats an invalid one as absent).
     */
    static boolean unsampledParent(String h) {
        if (h.length() != 55 || h.charAt(0) != '0' || h.charAt(1) != '0' || h.charAt(2) != '-' || h.charAt(35) != '-'
            || h.charAt(52) != '-') {
            return false;
        }
        if (!lowerHex(h, 3, 35) || !lowerHex(h, 36, 52) || !lowerHex(h, 53, 55)) {
            return false;
        }
        if (zeros(h, 3, 35) || zeros(h, 36, 52)) {
            return false; // an all-zero id is invalid: the propagator ignores the header and the ratio decides
        }
        return (Character.digit(h.charAt(54), 16) & 1) == 0;
    }

    private static boolean lowerHex(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
                return false;
            }
        }
        return true;
    }

    private static boolean zeros(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            if (s.charAt(i) != '0') {
                return false;
            }
        }
        return true;
    }

    /** Exports what is queued (bounded wait) and stops the exporter thread; at gateway stop. */
    @Override
    public void close() {
        if (provider != null) {
            var done = provider.shutdown().join(10, TimeUnit.SECONDS);
            if (!done.isSuccess()) {
                Log.warn("tracing: spans not all exported at shutdown (the OTLP endpoint did not take them within 10 s)");
            }
        }
    }

    /** Test support: the spans ended so far are handed to the processor's exporter now. */
    public void flush() {
        if (provider != null) {
            provider.forceFlush().join(10, TimeUnit.SECONDS);
        }
    }
}
