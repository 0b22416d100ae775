package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A current vLLM started with sha256_cbor and no PYTHONHASHSEED hashes its chain from NONE_HASH = H("vllm-none-hash")
 * (PR #51875). A rule with {@code hash_seed: auto} must find that seed from the engine's own events (the parity
 * probe) and then score real cache hits; before #36 the gateway refused both the seed and {@code auto}, and its
 * default "0" matched nothing.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class AutoHashSeedSystemTest {
    /** Bound of the waits: the resolver probes every 5 s and the first probe may lose its events to the slow joiner. */
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "auto-seed-admin-token";
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void autoSeedResolvesToVllmDefaultAndThenHits() throws Exception {
        int kv = TestPorts.free();
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM)
            .model("m").ttftMs(1).itlMs(1).blockSize(16).hashSeed("vllm-none-hash")
            .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                admin_token: %s
                health: {interval_ms: 60000}
                rules:
                  - name: auto
                    models: [m]
                    engine: vllm
                    policy: kv_exact
                    block_size: 16
                    hash_seed: auto
                    kv: {cold_readmit_every: 0, speculative_ttl_ms: 0}
                    endpoints:
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                """.formatted(ADMIN_TOKEN, sim.baseUrl(), kv)));
            try {
                Await.until(WAIT, "hash_seed auto resolved",
                    () -> "resolved".equals(rule(gw).path("hash_seed_auto").path("state").asText()),
                    () -> "inventory: " + rule(gw));
                JsonNode r = rule(gw);
                assertEquals("vllm-none-hash", r.get("hash_seed_auto").get("seed").asText(), r.toString());
                // Applied as a reload: the rule now hashes with the found seed.
                Await.until(WAIT, "resolved seed applied", () -> "vllm-none-hash".equals(rule(gw).path("hash_seed").asText()),
                    () -> "inventory: " + rule(gw));

                String prompt = prompt(5 * 16);
                assertEquals(200, complete(gw, prompt).statusCode());
                Await.until(WAIT, "the engine's blocks indexed", () -> rule(gw).get("endpoints").get(0).get("blocks").asLong() >= 5,
                    () -> "inventory: " + rule(gw));
                RuleStats stats = gw.router().stats("auto");
                long matchedBefore = stats.matchedBlocks();
                assertEquals(200, complete(gw, prompt).statusCode());
                assertEquals(5, stats.matchedBlocks() - matchedBefore, "the repeated prompt's 5 blocks are cache hits");
            } finally {
                gw.close(100);
            }
        }
    }

    private static String prompt(int tokens) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < tokens; t++) {
            sb.append(t == 0 ? "" : ",").append(30_000 + t * 7);
        }
        return sb.append(']').toString();
    }

    private HttpResponse<String> complete(Gateway gw, String prompt) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/completions"))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}")).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private JsonNode rule(Gateway gw) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort()
                + "/admin/v1/inventory")).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
            return JSON.readTree(r.body()).get("rules").get(0);
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
