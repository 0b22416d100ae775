package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.trace.OtlpReceiver;
import io.opentelemetry.proto.trace.v1.Span;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * P/D under tracing: the prefill and the decode leg are each a CLIENT span of the request's server span, and each
 * engine gets its own leg's span as the parent in its {@code traceparent}, in both dialects.
 */
@Timeout(60)
@Tag("system")
class PdTracingSystemTest {
    private static final String TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
    private static final String CLIENT = "00-" + TRACE_ID + "-b7ad6b7169203331-01";
    private final PdFakeEngine.Fleet fleet = new PdFakeEngine.Fleet();
    private PdFakeEngine prefill;
    private PdFakeEngine decode;
    private OtlpReceiver otlp;
    private Gateway gw;

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        for (AutoCloseable c : new AutoCloseable[] {prefill, decode, otlp}) {
            try {
                if (c != null) {
                    c.close();
                }
            } catch (Exception ignored) {
                // best effort
            }
        }
    }

    private void bothLegsCarryTheGatewaysContext(String engine) throws Exception {
        otlp = new OtlpReceiver();
        prefill = new PdFakeEngine(engine, "prefill", fleet);
        decode = new PdFakeEngine(engine, "decode", fleet);
        String bootstrap = engine.equals("sglang") ? "\n        bootstrap_port: 8998" : "";
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 500}
            health: {interval_ms: 60000}
            tracing: {otlp_endpoint: "%s", sample_ratio: 1}
            rules:
              - name: pd
                models: [m]
                engine: %s
                policy: pd
                endpoints:
                  - url: %s
                    role: prefill%s
                  - url: %s
                    role: decode
            """.formatted(otlp.endpoint(), engine, prefill.url(), bootstrap, decode.url())));
        HttpResponse<String> r = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build().send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
                .header("Content-Type", "application/json").header("traceparent", CLIENT)
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    + "\"max_tokens\":5}")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        gw.close(100); // flushes the spans
        gw = null;

        List<Span> servers = otlp.spans.stream().filter(s -> s.getKind() == Span.SpanKind.SPAN_KIND_SERVER).toList();
        assertEquals(1, servers.size(), otlp.spans.toString());
        String serverId = OtlpReceiver.hex(servers.get(0).getSpanId());
        assertEquals(TRACE_ID, OtlpReceiver.hex(servers.get(0).getTraceId()));
        List<Span> prefillLegs = otlp.named("kvgate.prefill_leg");
        List<Span> decodeLegs = otlp.named("kvgate.decode_leg");
        assertEquals(1, prefillLegs.size(), otlp.spans.toString());
        assertEquals(1, decodeLegs.size(), otlp.spans.toString());
        for (Span leg : List.of(prefillLegs.get(0), decodeLegs.get(0))) {
            assertEquals(serverId, OtlpReceiver.hex(leg.getParentSpanId()), leg.getName());
            assertEquals(Span.SpanKind.SPAN_KIND_CLIENT, leg.getKind());
        }
        assertEquals(List.of("00-" + TRACE_ID + "-" + OtlpReceiver.hex(prefillLegs.get(0).getSpanId()) + "-01"), prefill.traceparents);
        assertEquals(List.of("00-" + TRACE_ID + "-" + OtlpReceiver.hex(decodeLegs.get(0).getSpanId()) + "-01"), decode.traceparents);
        assertNotEquals(prefill.traceparents, decode.traceparents, "each leg is its own parent");
        assertTrue(otlp.named("kvgate.route").size() >= 1, "the P/D routing decisions are spans");
    }

    @Test
    void vllmBothLegsCarryTheGatewaysContext() throws Exception {
        bothLegsCarryTheGatewaysContext("vllm");
    }

    @Test
    void sglangBothLegsCarryTheGatewaysContext() throws Exception {
        bothLegsCarryTheGatewaysContext("sglang");
    }
}
