package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
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
 * An engine keying at another block size than its rule (vLLM with DCP 2 keys at --block-size x 2; issue #36, V6/S4):
 * before #36 nothing but the zero-hit watchdog noticed. Now the inventory shows the engine's size and a warning, the
 * metrics count the mismatching events, and the status' readiness lists it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class BlockSizeMismatchSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "block-size-admin-token";
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void anEngineKeyingAtAnotherBlockSizeIsShownCountedAndListed() throws Exception {
        int kv = TestPorts.free();
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM)
            .model("m").ttftMs(1).itlMs(1).blockSize(32).hashSeed("0")
            .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                admin_token: %s
                health: {interval_ms: 60000}
                rules:
                  - name: kv
                    models: [m]
                    engine: vllm
                    policy: kv_exact
                    block_size: 16
                    hash_seed: "0"
                    endpoints:
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                """.formatted(ADMIN_TOKEN, sim.baseUrl(), kv)));
            try {
                int[] sent = {0};
                // Requests until one's events arrive: the first may be published before the subscription joined.
                Await.until(WAIT, "a mismatching stored event seen", () -> {
                    complete(gw, sent[0]++);
                    return endpoint(gw).path("block_size_mismatches").asLong() > 0;
                }, () -> "inventory: " + get(gw, "/admin/v1/inventory"));
                JsonNode ep = endpoint(gw);
                assertEquals(32, ep.get("event_block_size").asInt(), ep.toString());
                assertTrue(ep.get("block_size_warning").asText().contains("carry block_size 32 but this rule keys at 16"),
                    ep.toString());
                String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body();
                String ep0 = "127.0.0.1:" + sim.port();
                assertTrue(metrics.contains("kvgate_kv_event_block_size{endpoint=\"" + ep0 + "\"} 32"), metrics);
                assertTrue(metrics.matches("(?s).*kvgate_kv_block_size_mismatch_total\\{endpoint=\"" + ep0.replace(".", "\\.")
                    + "\"} [1-9][0-9]*\\.0\n.*"), metrics);
                JsonNode warnings = get(gw, "/admin/v1/status").get("readiness").get("warnings");
                assertEquals(1, warnings.size(), warnings.toString());
                assertTrue(warnings.get(0).asText().contains("rule kv endpoint " + ep0 + ": its KV events carry block_size 32,"
                    + " the rule keys at 16"), warnings.toString());
            } finally {
                gw.close(100);
            }
        }
    }

    /**
     * A learned-key rule (TensorRT-LLM's) left at the default 32 in front of an engine with 64 tokens per block: its
     * blocks are indexed at 64 tokens (the events' own), its requests were hashed at 32, so nothing could ever hit.
     * The rule adopts the engines' size through a reload, and the repeated prompt is then a KV hit.
     */
    @Test
    void aLearnedRuleAdoptsItsEnginesBlockSize() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.TRTLLM)
            .model("m").ttftMs(1).itlMs(1).blockSize(64))) {
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
                    kv: {cold_readmit_every: 0}
                    endpoints:
                      - url: %s
                        kv_events: %s/kv_cache_events
                        kv_poll_ms: 20
                """.formatted(ADMIN_TOKEN, sim.baseUrl(), sim.baseUrl())));
            try {
                assertEquals(32, get(gw, "/admin/v1/inventory").get("rules").get(0).get("block_size").asInt());
                complete(gw, 0);
                Await.until(WAIT, "the rule adopted the engine's block size",
                    () -> get(gw, "/admin/v1/inventory").get("rules").get(0).get("block_size").asInt() == 64,
                    () -> "inventory: " + get(gw, "/admin/v1/inventory"));
                assertEquals(64, endpoint(gw).get("event_block_size").asInt());
                HttpResponse<String> again = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                    + "/v1/completions")).header("content-type", "application/json").header("x-kvgate-explain", "1")
                    .header("x-kvgate-admin-token", ADMIN_TOKEN)
                    .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + tokens(0) + "}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
                String route = again.headers().firstValue("x-kvgate-route").orElseThrow();
                assertTrue(route.contains("tier=kv_exact"), route);
            } finally {
                gw.close(100);
            }
        }
    }

    private static String tokens(int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 128; t++) {
            sb.append(t == 0 ? "" : ",").append(2_000 + attempt * 128 + t);
        }
        return sb.append(']').toString();
    }

    private void complete(Gateway gw, int attempt) {
        try {
            http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/completions"))
                .header("content-type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + tokens(attempt) + "}")).build(),
                HttpResponse.BodyHandlers.ofString());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private JsonNode endpoint(Gateway gw) {
        return get(gw, "/admin/v1/inventory").get("rules").get(0).get("endpoints").get(0);
    }

    private JsonNode get(Gateway gw, String path) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + path))
                .header("authorization", "Bearer " + ADMIN_TOKEN).build(), HttpResponse.BodyHandlers.ofString());
            return JSON.readTree(r.body());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
