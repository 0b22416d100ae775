package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.trace.OtlpReceiver;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import io.opentelemetry.proto.trace.v1.Span;
import io.opentelemetry.proto.trace.v1.Status;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #37 item 3, end to end: the real gateway exports its spans over OTLP/HTTP to a collector on loopback, with
 * the client's trace id, and the engine gets the gateway's span as its {@code traceparent}'s parent. Spans are read
 * after the gateway stopped (its stop flushes the batch processor), so nothing here waits on the export interval.
 */
@Timeout(60)
@Tag("system")
class TracingSystemTest {
    private static final String TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
    private static final String CLIENT_SPAN = "00f067aa0ba902b7";
    private static final String SAMPLED = "00-" + TRACE_ID + "-" + CLIENT_SPAN + "-01";
    private static final String UNSAMPLED = "00-" + TRACE_ID + "-" + CLIENT_SPAN + "-00";
    private static final String CHAT = "{\"model\":\"qwen3\",\"max_tokens\":7,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

    private FakeEngine engine;
    private OtlpReceiver otlp;
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void setUp() throws Exception {
        engine = new FakeEngine("a");
        otlp = new OtlpReceiver();
    }

    @AfterEach
    void tearDown() {
        stopGateway();
        engine.close();
        otlp.close();
    }

    private void startGateway(double ratio, String... urls) throws Exception {
        StringBuilder eps = new StringBuilder();
        for (String u : urls) {
            eps.append("      - url: ").append(u).append('\n');
        }
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 500, max_connect_attempts: 1}
            health: {interval_ms: 60000}
            tracing: {otlp_endpoint: "%s", sample_ratio: %s, service_name: gw-under-test}
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: round_robin
                endpoints:
            %s""".formatted(otlp.endpoint(), ratio, eps)));
    }

    /** Stops the gateway: its tracer exports every ended span before close returns. */
    private void stopGateway() {
        if (gw != null) {
            gw.close(100);
            gw = null;
        }
    }

    private HttpResponse<String> chat(String body, String traceparent) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        if (traceparent != null) {
            b.header("traceparent", traceparent).header("tracestate", "client=1");
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static <T> T only(List<T> items, String what) {
        assertEquals(1, items.size(), what + ": " + items);
        return items.get(0);
    }

    private Span serverSpan() {
        return only(otlp.spans.stream().filter(s -> s.getKind() == Span.SpanKind.SPAN_KIND_SERVER).toList(), "server spans");
    }

    @Test
    void continuesTheClientsTraceAndParentsTheEngineToTheGatewaysSpan() throws Exception {
        startGateway(1.0, engine.url());
        engine.mode = FakeEngine.Mode.SSE;
        HttpResponse<String> r = chat(CHAT.replace("}]}", "}],\"stream\":true}"), SAMPLED);
        assertEquals(200, r.statusCode(), r.body());
        stopGateway();

        Span server = serverSpan();
        String serverId = OtlpReceiver.hex(server.getSpanId());
        assertEquals(TRACE_ID, OtlpReceiver.hex(server.getTraceId()), "the client's trace is continued");
        assertEquals(CLIENT_SPAN, OtlpReceiver.hex(server.getParentSpanId()), "under the client's span");
        assertEquals("chat /v1/chat/completions", server.getName());
        assertEquals("qwen3", OtlpReceiver.attr(server, "gen_ai.request.model"));
        assertEquals("chat", OtlpReceiver.attr(server, "gen_ai.operation.name"));
        assertEquals("7", OtlpReceiver.attr(server, "gen_ai.request.max_tokens"));
        assertEquals("200", OtlpReceiver.attr(server, "http.response.status_code"));
        assertEquals("chat", OtlpReceiver.attr(server, "kvgate.rule"));
        assertTrue(server.getEventsList().stream().anyMatch(e -> e.getName().equals("gen_ai.first_token")), "first token event");
        assertEquals(List.of("gw-under-test"), otlp.serviceNames.stream().distinct().toList());
        assertTrue(otlp.contentTypes.stream().allMatch(c -> c.startsWith("application/x-protobuf")), otlp.contentTypes.toString());

        for (String stage : List.of("kvgate.parse", "kvgate.route", "kvgate.upstream")) {
            Span s = only(otlp.named(stage), stage);
            assertEquals(TRACE_ID, OtlpReceiver.hex(s.getTraceId()), stage);
            assertEquals(serverId, OtlpReceiver.hex(s.getParentSpanId()), stage + " is a child of the server span");
            assertTrue(s.getEndTimeUnixNano() >= s.getStartTimeUnixNano(), stage);
            assertTrue(s.getStartTimeUnixNano() >= server.getStartTimeUnixNano() && s.getEndTimeUnixNano() <= server.getEndTimeUnixNano(),
                stage + " lies within the request");
        }
        Span route = only(otlp.named("kvgate.route"), "route");
        assertEquals("127.0.0.1:" + engine.port(), OtlpReceiver.attr(route, "kvgate.endpoint"));
        assertEquals("any", OtlpReceiver.attr(route, "kvgate.route.role"));
        Span upstream = only(otlp.named("kvgate.upstream"), "upstream");
        assertEquals(Span.SpanKind.SPAN_KIND_CLIENT, upstream.getKind());

        // The engine's parent is the gateway's upstream span, in the client's trace; the client's state is not sent on.
        String sent = only(engine.traceparents, "engine requests");
        assertEquals("00-" + TRACE_ID + "-" + OtlpReceiver.hex(upstream.getSpanId()) + "-01", sent, "the client's flags kept");
        assertNotEquals(SAMPLED, sent);
    }

    @Test
    void withoutATraceparentTheGatewayStartsTheTrace() throws Exception {
        startGateway(1.0, engine.url());
        assertEquals(200, chat(CHAT, null).statusCode());
        stopGateway();
        Span server = serverSpan();
        assertTrue(server.getParentSpanId().isEmpty(), "a root span");
        String traceId = OtlpReceiver.hex(server.getTraceId());
        assertNotEquals(TRACE_ID, traceId);
        Span upstream = only(otlp.named("kvgate.upstream"), "upstream");
        // Sampled, and (W3C level 2) flagged random: the SDK generated the trace id.
        assertEquals("00-" + traceId + "-" + OtlpReceiver.hex(upstream.getSpanId()) + "-03", only(engine.traceparents, "engine"));
        assertEquals("3", OtlpReceiver.attr(server, "gen_ai.usage.input_tokens"));
        assertEquals("1", OtlpReceiver.attr(server, "gen_ai.usage.output_tokens"));
    }

    /** Ratio 0 is off entirely: no span, and the client's own traceparent reaches the engine byte for byte. */
    @Test
    void ratioZeroExportsNothingAndPassesTheClientsTraceparentThrough() throws Exception {
        startGateway(0.0, engine.url());
        assertEquals(200, chat(CHAT, SAMPLED).statusCode());
        assertEquals(200, chat(CHAT, null).statusCode());
        stopGateway();
        assertEquals(List.of(), otlp.spans);
        assertEquals(List.of(SAMPLED, "null"), engine.traceparents);
    }

    /** A client that decided not to sample is honoured (parent-based): nothing exported, its header passed on as is. */
    @Test
    void aClientsUnsampledDecisionIsHonoured() throws Exception {
        startGateway(1.0, engine.url());
        assertEquals(200, chat(CHAT, UNSAMPLED).statusCode());
        stopGateway();
        assertEquals(List.of(), otlp.spans);
        assertEquals(List.of(UNSAMPLED), engine.traceparents);
    }

    /** A request the gateway fails: the server span is an error with the gateway's code, the failed leg too. */
    @Test
    void aFailedRequestIsAnErrorSpanWithItsCode() throws Exception {
        try (RefusedPort dead = TestPorts.refused()) {
            startGateway(1.0, dead.url());
            assertEquals(503, chat(CHAT, SAMPLED).statusCode());
            stopGateway();
        }
        Span server = serverSpan();
        assertEquals(Status.StatusCode.STATUS_CODE_ERROR, server.getStatus().getCode());
        assertEquals("503", OtlpReceiver.attr(server, "http.response.status_code"));
        Span upstream = only(otlp.named("kvgate.upstream"), "upstream");
        assertEquals(Status.StatusCode.STATUS_CODE_ERROR, upstream.getStatus().getCode());
        Set<String> codes = otlp.spans.stream().map(s -> OtlpReceiver.attr(s, "error.type")).filter(c -> c != null)
            .collect(Collectors.toSet());
        assertTrue(codes.contains("upstream_connect_failed"), codes.toString());
    }

    /** A refusal the front door gives (a bad body) ends the server span there, with the status the client got. */
    @Test
    void aFrontDoorRefusalEndsTheSpan() throws Exception {
        startGateway(1.0, engine.url());
        assertEquals(400, chat("{\"model\":\"qwen3\",\"messages\":7}", SAMPLED).statusCode());
        stopGateway();
        Span server = serverSpan();
        assertEquals(TRACE_ID, OtlpReceiver.hex(server.getTraceId()));
        assertEquals("400", OtlpReceiver.attr(server, "http.response.status_code"));
        assertEquals(List.of(), engine.traceparents, "no engine was asked");
    }
}
