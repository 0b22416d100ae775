package io.kvgate.perf.trace;

import io.kvgate.control.config.TracingConfig;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.trace.Tracing;
import io.kvgate.dataplane.wire.RequestHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.util.Collection;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What tracing costs a request (issue #37 item 3: unsampled ≤ 1 µs). One request's whole tracing path as the front
 * door and the exchange run it: {@link Tracing#begin} on the client's decoded headers (the gateway's own
 * {@code RequestHeaders}, eight of them), then, when a trace came back, the stage spans a plain request makes (parse,
 * route, upstream leg with its {@code traceparent}, connect) and the server span's end. Cases ({@link #mode}):
 * <ul>
 *   <li>{@code off}: no {@code tracing} section (the default);</li>
 *   <li>{@code ratio0_unsampled_header}: an endpoint with {@code sample_ratio: 0} (off entirely) and a client's
 *       unsampled {@code traceparent};</li>
 *   <li>{@code ratio0_sampled_header}: the same with a client's sampled header (still off: ratio 0 is off);</li>
 *   <li>{@code ratio_unsampled_header}: {@code sample_ratio: 0.01} and a client's unsampled header (read from its
 *       bytes, no SDK object);</li>
 *   <li>{@code ratio_no_header_not_sampled}: {@code sample_ratio: 1e-9} and no header: the SDK builds a span and its
 *       sampler says no (the one unsampled path that costs SDK work);</li>
 *   <li>{@code sampled}: a sampled request's full path, spans ended into an exporter that drops them (the batch
 *       processor's export runs on its own thread in the gateway and is not on the request's path).</li>
 * </ul>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class TracingBench {
    private static final String UNSAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    private static final String SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    private static final String ENDPOINT = "http://127.0.0.1:4318/v1/traces";

    @Param({"off", "ratio0_unsampled_header", "ratio0_sampled_header", "ratio_unsampled_header",
        "ratio_no_header_not_sampled", "sampled"})
    public String mode;

    private Tracing tracing;
    private HttpHeaders headers;
    private long clock;

    /** Drops what it is given: the cost measured is the request path's, not an exporter's. */
    private static final class Discard implements SpanExporter {
        @Override
        public CompletableResultCode export(Collection<SpanData> spans) {
            return CompletableResultCode.ofSuccess();
        }

        @Override
        public CompletableResultCode flush() {
            return CompletableResultCode.ofSuccess();
        }

        @Override
        public CompletableResultCode shutdown() {
            return CompletableResultCode.ofSuccess();
        }
    }

    @Setup(Level.Trial)
    public void setUp() {
        String traceparent = null;
        TracingConfig config;
        switch (mode) {
            case "off" -> config = TracingConfig.OFF;
            case "ratio0_unsampled_header" -> {
                config = new TracingConfig(ENDPOINT, 0, "bench");
                traceparent = UNSAMPLED;
            }
            case "ratio0_sampled_header" -> {
                config = new TracingConfig(ENDPOINT, 0, "bench");
                traceparent = SAMPLED;
            }
            case "ratio_unsampled_header" -> {
                config = new TracingConfig(ENDPOINT, 0.01, "bench");
                traceparent = UNSAMPLED;
            }
            case "ratio_no_header_not_sampled" -> config = new TracingConfig(ENDPOINT, 1e-9, "bench");
            case "sampled" -> {
                config = new TracingConfig(ENDPOINT, 1, "bench");
                traceparent = SAMPLED;
            }
            default -> throw new IllegalArgumentException(mode);
        }
        // What the gateway builds: OFF (no SDK) when off, else the SDK (its own processor here: see the class comment).
        tracing = config.enabled() ? Tracing.of(config, SimpleSpanProcessor.create(new Discard())) : Tracing.start(config);
        headers = RequestHeaders.HEADERS.newHeaders();
        headers.add("host", "127.0.0.1:8080").add("user-agent", "OpenAI/Python 1.99.0").add("accept", "application/json")
            .add("content-type", "application/json").add("authorization", "Bearer sk-0123456789abcdef")
            .add("x-stainless-lang", "python").add("content-length", "1024");
        if (traceparent != null) {
            headers.add("traceparent", traceparent);
        } else {
            headers.add("x-request-id", "req-0123456789");
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        tracing.close();
    }

    /** One request's tracing path; returns what the engine would get as traceparent (null: the client's untouched). */
    @Benchmark
    public String request() {
        long t = clock += 1_000;
        RequestTrace trace = tracing.begin(headers, t, t, "/v1/chat/completions", true);
        if (trace == null) {
            return null; // every later stage point is a null check
        }
        trace.request("qwen3", "chat", "vllm", 64, 1, true, "req-1");
        trace.stage("kvgate.parse", t, t + 10);
        Span route = trace.child("kvgate.route", t + 10);
        trace.decision(route, "10.0.0.1:8000", null, "any");
        trace.end(route, t + 20);
        Span leg = trace.leg("kvgate.upstream", t + 20, "10.0.0.1:8000", 1);
        String[] sent = RequestTrace.traceHeaders(leg);
        trace.end(trace.childOf(leg, "kvgate.connect", t + 20, io.opentelemetry.api.trace.SpanKind.INTERNAL), t + 30);
        trace.end(leg, t + 100);
        trace.status(200);
        trace.end(t + 110);
        return sent[0];
    }
}
