package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The real gateway in front of simulated engines: the simulator's protocol checks pass only for a correct proxy. */
@Timeout(60)
@Tag("system")
class GatewayOverSimulatorSystemTest {

    static HttpResponse<String> chat(Gateway gw, String body, String requestId) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json").header("x-request-id", requestId)
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    static String pdYaml(String engine, EngineSimulator prefill, EngineSimulator decode) {
        String bootstrap = engine.equals("sglang") ? ", bootstrap_port: " + prefill.bootstrapPort() : "";
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000}
            health: {interval_ms: 60000}
            rules:
              - name: pd
                models: [m]
                engine: %s
                policy: pd
                pd: {prefill_timeout_ms: 5000}
                endpoints:
                  - {url: "%s", role: prefill%s}
                  - {url: "%s", role: decode}
            """.formatted(engine, prefill.baseUrl(), bootstrap, decode.baseUrl());
    }

    static final String BODY = SimHttp.chat("m", "tell me about the prefix cache and the gateway that routes by it, "
        + "in a few words, with enough prompt tokens to fill more than one block of sixteen", "\"max_tokens\":6");

    @Test
    void vllmPdThroughTheGateway() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.PREFILL).pdRegistry(registry));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.DECODE).pdRegistry(registry))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(pdYaml("vllm", prefill, decode)));
            try {
                HttpResponse<String> r = chat(gw, BODY, "gw-pd-1");
                assertEquals(200, r.statusCode(), r.body());
                JsonNode b = SimHttp.MAPPER.readTree(r.body());
                assertEquals(6, b.at("/usage/completion_tokens").asInt());
                assertFalse(b.hasNonNull("kv_transfer_params"), "internal params must not leak to clients");
                assertEquals(1, prefill.stats().get("pd_prefill_params_issued"));
                assertEquals(1, decode.stats().get("pd_decode_with_params"), "decode got the prefill's params verbatim");
                assertEquals(0, decode.stats().get("pd_decode_rejected"));
                assertTrue(b.at("/usage/prompt_tokens_details/cached_tokens").asInt() > 0);
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void sglangPdThroughTheGateway() throws Exception {
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.PREFILL)
                 .bootstrapPort(0).bootstrapTimeoutMs(5000));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.DECODE)
                 .bootstrapTimeoutMs(5000))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(pdYaml("sglang", prefill, decode)));
            try {
                HttpResponse<String> r = chat(gw, BODY, "gw-pd-2");
                assertEquals(200, r.statusCode(), r.body());
                HttpResponse<String> s = chat(gw, BODY.substring(0, BODY.length() - 1) + ",\"stream\":true}", "gw-pd-3");
                assertEquals(200, s.statusCode(), s.body());
                assertTrue(s.body().endsWith("data: [DONE]\n\n"), s.body());
                assertEquals(2, prefill.stats().get("pd_rendezvous"), "both legs arrived concurrently");
                assertEquals(2, decode.stats().get("pd_kv_received"));
                assertEquals(0, prefill.stats().get("pd_bootstrap_timeouts"));
            } finally {
                gw.close(100);
            }
        }
    }
}
