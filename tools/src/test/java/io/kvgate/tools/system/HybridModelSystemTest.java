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
 * vLLM serving a hybrid model (issue #36 item 6): its full-attention group keys 32-token blocks, a sliding-window
 * group 16-token blocks, so the engine hashes every 16 tokens and names each 32-token block by its last 16-token
 * hash; every group announces its blocks with {@code group_idx} and {@code kv_cache_spec_kind}. Only the
 * full-attention group is indexed (the other is counted), the block size check judges that group alone, an exact-key
 * rule is told that it cannot match and what to set, and a learned-key rule hits.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class HybridModelSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "hybrid-admin-token";
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void anExactRuleIsToldItsKeysCannotMatchAndTheOtherGroupIsNotIndexed() throws Exception {
        try (Fixture f = new Fixture("exact")) {
            int[] sent = {0};
            Await.until(WAIT, "the sliding-window group's blocks seen", () -> {
                complete(f.gw, sent[0]++);
                return endpoint(f.gw).path("kv_cache_groups").path("skipped_blocks").asLong() > 0;
            }, () -> "inventory: " + get(f.gw, "/admin/v1/inventory"));
            JsonNode ep = endpoint(f.gw);
            JsonNode groups = ep.get("kv_cache_groups");
            assertEquals(2, groups.get("groups").asInt(), ep.toString());
            assertEquals(16, groups.get("hash_unit").asInt(), ep.toString());
            assertTrue(groups.get("warning").asText().contains("set kv_key_mode: learned"), ep.toString());
            // The full-attention group keys at the rule's 32: no block size mismatch from the other group's 16.
            assertEquals(32, ep.get("event_block_size").asInt(), ep.toString());
            assertEquals(0, ep.get("block_size_mismatches").asLong(), ep.toString());
            String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + f.gw.port() + "/metrics"))
                .build(), HttpResponse.BodyHandlers.ofString()).body();
            assertTrue(metrics.matches("(?s).*kvgate_kv_group_blocks_skipped_total\\{endpoint=\"127\\.0\\.0\\.1:"
                + f.sim.port() + "\"} [1-9][0-9]*\\.0\n.*"), metrics);
        }
    }

    @Test
    void aLearnedRuleHitsOnTheFullAttentionGroup() throws Exception {
        try (Fixture f = new Fixture("learned")) {
            int[] sent = {0};
            Await.until(WAIT, "blocks of the full-attention group indexed", () -> {
                complete(f.gw, sent[0]++);
                return endpoint(f.gw).path("blocks").asLong() > 0;
            }, () -> "inventory: " + get(f.gw, "/admin/v1/inventory"));
            // A prompt stored once the subscription is known to work: its next send is a KV hit.
            complete(f.gw, 100);
            String[] route = {""};
            Await.until(WAIT, "the repeated prompt routed on its cached blocks", () -> {
                route[0] = explainRoute(f.gw, 100);
                return route[0].contains("tier=kv_exact");
            }, () -> "route: " + route[0] + ", inventory: " + get(f.gw, "/admin/v1/inventory"));
            JsonNode ep = endpoint(f.gw);
            assertTrue(!ep.get("kv_cache_groups").has("warning"), ep.toString());
        }
    }

    private final class Fixture implements AutoCloseable {
        final EngineSimulator sim;
        final Gateway gw;

        Fixture(String keyMode) throws Exception {
            int kv = TestPorts.free();
            sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(1)
                .itlMs(1).blockSize(32).hashSeed("0").hybridGroup("sliding_window", 16)
                .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"));
            gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                admin_token: %s
                health: {interval_ms: 60000}
                rules:
                  - name: kv
                    models: [m]
                    engine: vllm
                    policy: kv_exact
                    block_size: 32
                    hash_seed: "0"
                    kv_key_mode: %s
                    kv: {cold_readmit_every: 0}
                    endpoints:
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                """.formatted(ADMIN_TOKEN, keyMode, sim.baseUrl(), kv)));
        }

        @Override
        public void close() {
            gw.close(100);
            sim.close();
        }
    }

    private static String tokens(int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 128; t++) {
            sb.append(t == 0 ? "" : ",").append(3_000 + attempt * 128 + t);
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

    /** The routing decision of a completions request for {@code tokens(attempt)} (its X-Kvgate-Route header). */
    private String explainRoute(Gateway gw, int attempt) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/completions"))
                .header("content-type", "application/json").header("x-kvgate-explain", "1")
                .header("x-kvgate-admin-token", ADMIN_TOKEN)
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + tokens(attempt) + "}"))
                .build(), HttpResponse.BodyHandlers.ofString()).headers().firstValue("x-kvgate-route").orElse("");
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
