package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * A second consumer of a TensorRT-LLM engine's {@code POST /kv_cache_events} (issue #36 item 4): the route removes
 * what each POST returns, so when this test drains the simulator between the gateway's polls (as TensorRT-LLM's own
 * {@code KvCacheAwareRouter} or another kvgate replica would) the gateway's next poll starts past an event-id jump.
 * Alone, the gateway sees no jump and no episode; with the other consumer, the pattern shows in the inventory and the
 * metrics.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class TrtllmOtherDrainerSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "trtllm-drainer-test-admin-token";
    /** Rounds of each phase: enough polls with events to fill the detection window (8) with room to spare. */
    private static final int ROUNDS = 14;
    private final HttpClient http = HttpClient.newHttpClient();
    private EngineSimulator sim;
    private Gateway gw;
    private int question;

    @BeforeAll
    void start() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path modelDir = root.resolve("deploy/models/qwen3");
        sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.TRTLLM).model("qwen3")
            .modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1));
        // A slow poll (200 ms) leaves the other consumer, which drains right after each answer, the first read.
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            rules:
              - name: kv
                models: [qwen3]
                engine: trtllm
                policy: kv_exact
                tokenizer: %s
                block_size: 32
                endpoints:
                  - url: %s
                    kv_events: %s/kv_cache_events
                    kv_poll_ms: 200
            """.formatted(ADMIN_TOKEN, modelDir, sim.baseUrl(), sim.baseUrl())));
        Await.until(WAIT, "the drain poll answered", () -> {
            JsonNode s = subscriber();
            return s != null && "up".equals(s.get("state").asText());
        }, () -> "inventory: " + inventory());
    }

    @AfterAll
    void stop() {
        if (gw != null) {
            gw.close(100);
        }
        if (sim != null) {
            sim.close();
        }
    }

    private JsonNode inventory() {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort()
                + "/admin/v1/inventory")).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), "GET /admin/v1/inventory: " + r.body());
            return JSON.readTree(r.body());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException("inventory: " + e, e);
        }
    }

    private JsonNode subscriber() {
        return inventory().get("rules").get(0).get("endpoints").get(0).get("subscribers").get(0);
    }

    /** One request with a prompt never seen before: the engine stores new blocks, so events wait in its buffer. */
    private void newBlocks() throws Exception {
        String system = ("Question " + question++ + " opens a conversation nobody had before. ").repeat(12);
        String body = "{\"model\":\"qwen3\",\"max_tokens\":2,\"messages\":[{\"role\":\"system\",\"content\":\"" + system
            + "\"},{\"role\":\"user\",\"content\":\"hello\"}]}";
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
            + "/v1/chat/completions")).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
    }

    /** The other consumer: one {@code POST /kv_cache_events} straight to the engine, its answer discarded. */
    private void otherConsumerDrains() throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/kv_cache_events"))
            .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
    }

    /** Bounded wait for the gateway's next poll to apply the events of the last request. */
    private void gatewayDrains(long lastSeqBefore) throws InterruptedException {
        Await.until(WAIT, "the gateway drained past event " + lastSeqBefore,
            () -> subscriber().get("last_seq").asLong() > lastSeqBefore, () -> "inventory: " + inventory());
    }

    @Test
    void aSingleConsumerIsQuietAndASecondDrainerIsShownInTheInventoryAndMetrics() throws Exception {
        for (int round = 0; round < ROUNDS; round++) {
            long seq = subscriber().get("last_seq").asLong();
            newBlocks();
            gatewayDrains(seq);
        }
        JsonNode alone = subscriber();
        assertEquals(0, alone.get("gaps").asLong(), alone.toString());
        assertFalse(alone.get("other_drainer").asBoolean(), alone.toString());
        assertEquals(0, alone.get("other_drainer_episodes").asLong(), alone.toString());

        int jumpsSeen = 0;
        for (int round = 0; round < ROUNDS && !subscriber().get("other_drainer").asBoolean(); round++) {
            newBlocks();
            otherConsumerDrains();
            long seq = subscriber().get("last_seq").asLong();
            newBlocks();
            gatewayDrains(seq);
            jumpsSeen = subscriber().get("gaps").asInt();
        }
        JsonNode shared = subscriber();
        assertTrue(shared.get("other_drainer").asBoolean(), jumpsSeen + " jumps: " + shared);
        assertEquals(1, shared.get("other_drainer_episodes").asLong(), shared.toString());
        String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString()).body();
        String endpoint = "endpoint=\"127.0.0.1:" + sim.port() + "\",rank=\"0\"}";
        assertTrue(metrics.contains("kvgate_kv_other_drainer{" + endpoint + " 1"), metrics);
        assertTrue(metrics.contains("kvgate_kv_other_drainer_episodes_total{" + endpoint + " 1"), metrics);
    }
}
