package io.kvgate.dataplane.trace;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.TracingConfig;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Propagation in and out, the sampling decisions, and the spans a request's stages produce (in memory, no sockets). */
class TracingTest {
    private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
    private static final String SAMPLED = "00-" + TRACE_ID + "-00f067aa0ba902b7-01";
    private static final String UNSAMPLED = "00-" + TRACE_ID + "-00f067aa0ba902b7-00";
    private final InMemorySpanExporter exported = InMemorySpanExporter.create();
    private Tracing tracing;

    private Tracing tracing(double ratio) {
        tracing = Tracing.of(new TracingConfig("http://127.0.0.1:1/v1/traces", ratio, "svc"), SimpleSpanProcessor.create(exported));
        return tracing;
    }

    @AfterEach
    void close() {
        if (tracing != null) {
            tracing.close();
        }
    }

    private static HttpHeaders headers(String traceparent) {
        HttpHeaders h = new DefaultHttpHeaders();
        if (traceparent != null) {
            h.add("traceparent", traceparent);
        }
        return h;
    }

    @Test
    void offBuildsNothingAndTracesNothing() {
        assertSame(Tracing.OFF, Tracing.start(TracingConfig.OFF));
        assertSame(Tracing.OFF, Tracing.start(new TracingConfig("http://127.0.0.1:1/v1/traces", 0, "svc")), "ratio 0 is off");
        assertFalse(Tracing.OFF.enabled());
        assertNull(Tracing.OFF.begin(headers(SAMPLED), 0, 0, "/v1/chat/completions", true), "even a sampled client header");
        Tracing.OFF.close(); // nothing to shut down
    }

    @Test
    void continuesASampledClientTrace() {
        RequestTrace t = tracing(0.000001).begin(headers(SAMPLED), 100, 100, "/v1/chat/completions", true);
        assertNotNull(t, "a sampled parent is honoured whatever the ratio");
        assertEquals(TRACE_ID, t.traceId());
        t.end(200);
        SpanData s = exported.getFinishedSpanItems().get(0);
        assertEquals("00f067aa0ba902b7", s.getParentSpanId());
        assertEquals("chat /v1/chat/completions", s.getName());
        assertEquals(100, s.getEndEpochNanos() - s.getStartEpochNanos(), "durations are the gateway clock's");
    }

    @Test
    void anUnsampledClientTraceIsNotTraced() {
        assertNull(tracing(1).begin(headers(UNSAMPLED), 0, 0, "/v1/completions", false));
        assertEquals(List.of(), exported.getFinishedSpanItems());
    }

    @Test
    void theRatioDecidesForRequestsWithoutAParent() {
        assertNotNull(tracing(1).begin(headers(null), 0, 0, "/v1/completions", false));
        tracing.close();
        assertNull(tracing(Double.MIN_VALUE).begin(headers(null), 0, 0, "/v1/completions", false), "practically never");
        assertNull(tracing.begin(headers("00-" + "0".repeat(32) + "-00f067aa0ba902b7-01"), 0, 0, "/v1/completions", false),
            "an invalid header counts as none: the ratio decides, not its sampled flag");
        assertNotNull(tracing.begin(headers(SAMPLED), 0, 0, "/v1/completions", false), "a valid sampled parent is honoured");
        // An invalid client header is ignored (a new trace), as the W3C propagator reads it.
        tracing.close();
        RequestTrace t = tracing(1).begin(headers("00-" + "0".repeat(32) + "-00f067aa0ba902b7-00"), 0, 0, "/v1/completions", false);
        assertNotNull(t);
        assertFalse(t.traceId().equals("0".repeat(32)));
    }

    @Test
    void unsampledParentReadsOnlyValidVersion00Headers() {
        assertTrue(Tracing.unsampledParent(UNSAMPLED));
        assertTrue(Tracing.unsampledParent("00-" + TRACE_ID + "-00f067aa0ba902b7-02"), "random flag alone: not sampled");
        assertFalse(Tracing.unsampledParent(SAMPLED));
        assertFalse(Tracing.unsampledParent("00-" + TRACE_ID + "-00f067aa0ba902b7-03"));
        assertFalse(Tracing.unsampledParent(UNSAMPLED.toUpperCase()), "upper-case hex is invalid");
        assertFalse(Tracing.unsampledParent("00-" + "0".repeat(32) + "-00f067aa0ba902b7-00"), "all-zero trace id");
        assertFalse(Tracing.unsampledParent("00-" + TRACE_ID + "-" + "0".repeat(16) + "-00"), "all-zero span id");
        assertFalse(Tracing.unsampledParent("01-" + TRACE_ID + "-00f067aa0ba902b7-00"), "another version: the propagator decides");
        assertFalse(Tracing.unsampledParent(UNSAMPLED + "-x"));
        assertFalse(Tracing.unsampledParent(""));
    }

    @Test
    void stagesAreChildrenAndTheEngineGetsTheLegsContext() {
        RequestTrace t = tracing(1).begin(headers(SAMPLED), 1_000, 1_000, "/v1/chat/completions", true);
        t.request("qwen3", "chat", "vllm", 64, 2, true, "rid");
        t.stage("kvgate.parse", 1_000, 1_500);
        Span leg = t.leg("kvgate.upstream", 2_000, "10.0.0.1:8000", 1);
        String[] headers = RequestTrace.traceHeaders(leg);
        assertEquals("00-" + TRACE_ID + "-" + leg.getSpanContext().getSpanId() + "-01", headers[0]);
        t.fail(leg, "upstream_connect_failed", 2_500);
        t.usage(10, 5, 4);
        t.status(503);
        t.error("no_healthy_endpoint");
        t.end(3_000);

        List<SpanData> spans = exported.getFinishedSpanItems();
        SpanData server = spans.stream().filter(s -> s.getName().startsWith("chat")).findFirst().orElseThrow();
        SpanData parse = spans.stream().filter(s -> s.getName().equals("kvgate.parse")).findFirst().orElseThrow();
        SpanData upstream = spans.stream().filter(s -> s.getName().equals("kvgate.upstream")).findFirst().orElseThrow();
        assertEquals(server.getSpanId(), parse.getParentSpanId());
        assertEquals(500, parse.getEndEpochNanos() - parse.getStartEpochNanos());
        assertEquals(server.getStartEpochNanos(), parse.getStartEpochNanos(), "parsing starts with the request");
        assertEquals(1_000, upstream.getStartEpochNanos() - server.getStartEpochNanos());
        assertEquals(2_000, server.getEndEpochNanos() - server.getStartEpochNanos());
        assertEquals(server.getSpanId(), upstream.getParentSpanId());
        assertEquals(StatusCode.ERROR, upstream.getStatus().getStatusCode());
        assertEquals(StatusCode.ERROR, server.getStatus().getStatusCode());
        assertEquals("no_healthy_endpoint", server.getStatus().getDescription());
        assertEquals(64L, server.getAttributes().get(RequestTrace.MAX_TOKENS));
        assertEquals("qwen3", server.getAttributes().get(RequestTrace.REQUEST_MODEL));
        assertEquals(10L, server.getAttributes().get(RequestTrace.INPUT_TOKENS));
        assertEquals(5L, server.getAttributes().get(RequestTrace.OUTPUT_TOKENS));
        assertEquals(503L, server.getAttributes().get(RequestTrace.HTTP_STATUS));
        assertEquals(2L, server.getAttributes().get(RequestTrace.CHOICE_COUNT));
    }
}
