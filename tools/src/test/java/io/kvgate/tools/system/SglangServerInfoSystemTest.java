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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * SGLang's {@code GET /server_info} (issue #36 item 8): read there first (a server whose deprecated
 * {@code /get_server_info} alias is gone still describes itself), at the alias on older servers; its KV-event
 * descriptor (port base, topic, block size, DP size) and an EAGLE speculative algorithm are checked against the
 * configuration, shown in the inventory and counted.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class SglangServerInfoSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "server-info-admin-token";
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void aServerWithoutTheDeprecatedAliasIsReadAndItsDisagreementsShown() throws Exception {
        int kv = TestPorts.free();
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.SGLANG)
            .model("m").ttftMs(1).itlMs(1).blockSize(4).kvTopic("kv").serverInfoRoutes("server_info")
            .speculativeAlgorithm("EAGLE").kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"))) {
            Gateway gw = start(sim, kv, 1, "other", 2);
            try {
                Await.until(WAIT, "the server info judged", () -> endpoint(gw).has("server_info"),
                    () -> "inventory: " + get(gw, "/admin/v1/inventory"));
                JsonNode si = endpoint(gw).get("server_info");
                assertEquals("/server_info", si.get("path").asText(), si.toString());
                List<String> fields = new ArrayList<>();
                si.get("mismatches").forEach(m -> fields.add(m.get("field").asText()));
                assertEquals(List.of("kv_events.topic", "kv_events.block_size", "kv_events.dp_size", "speculative_algorithm"),
                    fields, si.toString());
                JsonNode block = si.get("mismatches").get(1);
                assertEquals("4", block.get("engine").asText(), si.toString());
                assertTrue(block.get("fix").asText().startsWith("set the rule's block_size to 4"), si.toString());
                assertTrue(si.get("mismatches").get(0).get("fix").asText().contains("kv_topic: \"kv\""), si.toString());
                String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("kvgate_engine_server_info_mismatches_total 4.0"), metrics);
                assertEquals(0, sim.stats().get("get_server_info_requests"), "the deprecated path is not asked once /server_info answers");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void anOlderServerIsReadAtTheDeprecatedPathAndAMatchingOneIsClean() throws Exception {
        int kv = TestPorts.free();
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.SGLANG)
            .model("m").ttftMs(1).itlMs(1).blockSize(4).kvTopic("kv").serverInfoRoutes("get_server_info")
            .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"))) {
            Gateway gw = start(sim, kv, 4, "kv", 1);
            try {
                Await.until(WAIT, "the server info judged", () -> endpoint(gw).has("server_info"),
                    () -> "inventory: " + get(gw, "/admin/v1/inventory"));
                JsonNode si = endpoint(gw).get("server_info");
                assertEquals("/get_server_info", si.get("path").asText(), si.toString());
                assertEquals(0, si.get("mismatches").size(), si.toString());
            } finally {
                gw.close(100);
            }
        }
    }

    private Gateway start(EngineSimulator sim, int kv, int blockSize, String topic, int dpRanks) throws Exception {
        return Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 100}
            rules:
              - name: kv
                models: [m]
                engine: sglang
                policy: kv_exact
                block_size: %d
                endpoints:
                  - url: %s
                    kv_events: tcp://127.0.0.1:%d
                    kv_topic: "%s"
                    dp_ranks: %d
            """.formatted(ADMIN_TOKEN, blockSize, sim.baseUrl(), kv, topic, dpRanks)));
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
