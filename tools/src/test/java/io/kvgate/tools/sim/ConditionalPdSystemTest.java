package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Timeout;

/**
 * Conditional P/D through the gateway over simulators (issue #14 item 4), for both sequential dialects: a prompt
 * shorter than {@code pd.min_uncached_tokens} is served by the decode engine alone (the prefill engine never sees
 * it, the decode engine computes the prompt), a longer one takes both legs with verified transfer parameters;
 * {@code kvgate_pd_decisions_total{path}} counts both.
 */
@Timeout(60)
@Tag("system")
class ConditionalPdSystemTest {
    private static final String LONG = "Please summarise the following shipping manifest line by line. ".repeat(40);

    private static HttpResponse<String> chat(Gateway gw, String content) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(SimHttp.chat("m", content, "\"max_tokens\":4"))).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    @ParameterizedTest
    @EnumSource(value = Dialect.class, names = {"VLLM", "TRTLLM"})
    void shortPromptsSkipThePrefillLegAndLongOnesSplit(Dialect dialect) throws Exception {
        Path modelDir = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/models/qwen3");
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(dialect).role(Role.PREFILL).pdRegistry(registry));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(dialect).role(Role.DECODE).pdRegistry(registry))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                upstream: {connect_timeout_ms: 1000}
                health: {interval_ms: 60000}
                rules:
                  - name: pd
                    models: [m]
                    engine: %s
                    policy: pd
                    tokenizer: %s
                    pd: {prefill_timeout_ms: 5000, prefill_policy: least_outstanding, min_uncached_tokens: 256}
                    endpoints:
                      - {url: "%s", role: prefill}
                      - {url: "%s", role: decode}
                """.formatted(dialect.name().toLowerCase(java.util.Locale.ROOT), modelDir, prefill.baseUrl(), decode.baseUrl())));
            try {
                for (int i = 0; i < 5; i++) {
                    HttpResponse<String> r = chat(gw, "short question " + i);
                    assertEquals(200, r.statusCode(), r.body());
                    assertEquals(4, SimHttp.MAPPER.readTree(r.body()).at("/usage/completion_tokens").asInt(), r.body());
                }
                assertEquals(0, prefill.stats().get("pd_prefill_requests"), "no short prompt reached the prefill engine");
                assertEquals(5, decode.stats().get("pd_decode_without_params"), "the decode engine computed each prompt");
                for (int i = 0; i < 3; i++) {
                    HttpResponse<String> r = chat(gw, LONG + " Item " + i + ".");
                    assertEquals(200, r.statusCode(), r.body());
                    assertTrue(SimHttp.MAPPER.readTree(r.body()).at("/usage/prompt_tokens").asInt() > 256, r.body());
                }
                assertEquals(3, prefill.stats().get("pd_prefill_requests"), "long prompts take the prefill leg");
                assertEquals(3, decode.stats().get("pd_decode_with_params"), "with the transfer parameters it issued");
                String metrics = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                    + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("kvgate_pd_decisions_total{path=\"local\"} 5"), metrics);
                assertTrue(metrics.contains("kvgate_pd_decisions_total{path=\"split\"} 3"), metrics);
            } finally {
                gw.close(100);
            }
        }
    }
}
