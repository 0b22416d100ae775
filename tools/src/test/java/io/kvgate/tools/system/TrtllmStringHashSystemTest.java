package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.Await;
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
 * TensorRT-LLM's KV cache manager V2 with {@code v2_sha256} writes every block hash as a hex string (issue #36, T4).
 * Before #36 each such drained body was malformed and cleared the endpoint on every poll, so the inventory stayed
 * empty; now the hashes fold to stable keys, blocks are indexed, removals (evictions) find them, and repeats hit.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class TrtllmStringHashSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "trtllm-string-hash-admin-token";
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void v2Sha256StringHashesAreIndexedEvictedAndHit() throws Exception {
        // 8 blocks of 32 tokens: three 4-block prompts make the engine evict.
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.TRTLLM)
            .model("m").ttftMs(1).itlMs(1).cacheBlocks(8).trtllmHashAlgo("v2_sha256"))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                admin_token: %s
                health: {interval_ms: 60000}
                rules:
                  - name: kv
                    models: [m]
                    engine: trtllm
                    policy: kv_exact
                    block_size: 32
                    kv: {cold_readmit_every: 0}
                    endpoints:
                      - url: %s
                        kv_events: %s/kv_cache_events
                        kv_poll_ms: 20
                """.formatted(ADMIN_TOKEN, sim.baseUrl(), sim.baseUrl())));
            try {
                for (int family = 0; family < 3; family++) {
                    assertEquals(200, complete(gw, prompt(family, 4 * 32)).statusCode());
                    Await.until(WAIT, "family " + family + "'s blocks indexed",
                        () -> blocks(gw) == sim.cachedBlocks(0) && blocks(gw) > 0,
                        () -> "engine holds " + sim.cachedBlocks(0) + "; inventory: " + inventory(gw));
                }
                assertTrue(sim.stats().get("blocks_evicted") > 0, "the engine evicted: its string-hash removals were applied");
                HttpResponse<String> again = complete(gw, prompt(2, 4 * 32));
                String route = again.headers().firstValue("x-kvgate-route").orElseThrow();
                assertTrue(route.contains("tier=kv_exact"), route);
                JsonNode sub = inventory(gw).get("rules").get(0).get("endpoints").get(0).get("subscribers").get(0);
                assertEquals(0, sub.get("decode_errors").asLong(), sub.toString());
                assertEquals(0, sub.get("gaps").asLong(), sub.toString());
            } finally {
                gw.close(100);
            }
        }
    }

    private static String prompt(int family, int tokens) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < tokens; t++) {
            sb.append(t == 0 ? "" : ",").append(1_000 + family * 5_000 + t);
        }
        return sb.append(']').toString();
    }

    private HttpResponse<String> complete(Gateway gw, String prompt) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/completions"))
            .header("content-type", "application/json").header("x-kvgate-explain", "1")
            .header("x-kvgate-admin-token", ADMIN_TOKEN)
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}")).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private long blocks(Gateway gw) {
        return inventory(gw).get("rules").get(0).get("endpoints").get(0).get("blocks").asLong();
    }

    private JsonNode inventory(Gateway gw) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort()
                + "/admin/v1/inventory")).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
            return JSON.readTree(r.body());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
