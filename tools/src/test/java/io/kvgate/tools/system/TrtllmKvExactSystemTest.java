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
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * KV-exact routing over three TensorRT-LLM simulators (issue #15): the gateway drains each engine's
 * {@code POST /kv_cache_events} ({@code kv_poll_ms}), keys the blocks by its own hash of the events' tokens
 * (TensorRT-LLM's block hashes are internal), routes repeated prefixes to the engine that holds them, and its
 * inventory equals each engine's cache — also after the engines evict (removals mapped from the engine's hashes).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class TrtllmKvExactSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "trtllm-kv-test-admin-token";
    private final List<EngineSimulator> sims = new ArrayList<>();
    private final HttpClient http = HttpClient.newHttpClient();
    private Gateway gw;

    @BeforeAll
    void start() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path modelDir = root.resolve("deploy/models/qwen3");
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            // A small cache (8 blocks of 32 tokens) so that the prompt families below make the engines evict.
            EngineSimulator s = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.TRTLLM)
                .model("qwen3").modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).cacheBlocks(8));
            sims.add(s);
            eps.append("      - url: ").append(s.baseUrl()).append("\n        kv_events: ").append(s.baseUrl())
                .append("/kv_cache_events\n        kv_poll_ms: 20\n");
        }
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
                kv: {cold_readmit_every: 0, load_cap_factor: 100}
            %s    endpoints:
            %s""".formatted(ADMIN_TOKEN, modelDir, keySettings(), eps)));
        Await.until(WAIT, "every drain poll answered", () -> {
            JsonNode e = inventory().get("rules").get(0).get("endpoints");
            for (int i = 0; i < sims.size(); i++) {
                // The inventory can list an endpoint before the ingest agent applied it (no subscriber yet): not up.
                JsonNode subscriber = e.get(i).get("subscribers").get(0);
                if (subscriber == null || !"up".equals(subscriber.get("state").asText())) {
                    return false;
                }
            }
            return true;
        }, () -> "inventory: " + inventory());
    }

    /** The rule's key settings, each line indented as a rule key (default: learned keys). */
    protected String keySettings() {
        return "";
    }

    @AfterAll
    void stop() {
        if (gw != null) {
            gw.close(100);
        }
        sims.forEach(EngineSimulator::close);
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

    private long inventoryBlocks(int endpoint) {
        return inventory().get("rules").get(0).get("endpoints").get(endpoint).get("blocks").asLong();
    }

    /** Bounded wait for the drain polls (every kv_poll_ms) to bring the engines' events in. */

    private void awaitInventoryEqualsCaches() throws InterruptedException {
        for (int i = 0; i < sims.size(); i++) {
            final int e = i;
            Await.until(WAIT, "inventory of engine " + e + " equals its cache", () -> inventoryBlocks(e) == sims.get(e).cachedBlocks(0), () -> "engine holds " + sims.get(e).cachedBlocks(0) + " blocks; inventory: " + inventory());
        }
    }

    private static String chat(String system, String question) {
        return "{\"model\":\"qwen3\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":\"" + system
            + "\"},{\"role\":\"user\",\"content\":\"" + question + "\"}]}";
    }

    private static String system(int family) {
        return ("Family " + family + ": you are a meticulous assistant for a logistics company. ").repeat(12);
    }

    private HttpResponse<String> post(String body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").header("x-kvgate-explain", "1")
            .header("x-kvgate-admin-token", ADMIN_TOKEN).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private static String endpointOf(HttpResponse<String> r) {
        String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
        return route.substring("endpoint=".length(), route.indexOf(';'));
    }

    private int simIndex(String endpoint) {
        for (int i = 0; i < sims.size(); i++) {
            if (sims.get(i).baseUrl().endsWith(endpoint)) {
                return i;
            }
        }
        throw new AssertionError("no simulator at " + endpoint);
    }

    @Test
    void repeatedPrefixesLandOnTheEngineThatHoldsThemAndTheInventoryEqualsEachCache() throws Exception {
        Map<Integer, String> owners = new HashMap<>();
        long cached = 0;
        // Families one after another: the first request of a family lands somewhere, its siblings must follow it.
        for (int family = 0; family < 6; family++) {
            HttpResponse<String> first = post(chat(system(family), "Where is parcel 0?"));
            assertEquals(200, first.statusCode(), first.body());
            String owner = endpointOf(first);
            int idx = simIndex(owner);
            Await.until(WAIT, "family " + family + "'s blocks drained from engine " + idx, () -> inventoryBlocks(idx) == sims.get(idx).cachedBlocks(0) && inventoryBlocks(idx) > 0, () -> "engine holds " + sims.get(idx).cachedBlocks(0) + "; inventory: " + inventory());
            Set<String> endpoints = new HashSet<>();
            for (int q = 1; q <= 4; q++) {
                HttpResponse<String> r = post(chat(system(family), "Where is parcel " + q + "?"));
                assertEquals(200, r.statusCode(), r.body());
                String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
                assertTrue(route.contains("tier=kv_exact"), route);
                endpoints.add(endpointOf(r));
                long c = JSON.readTree(r.body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
                // The family's system prompt is ~170 tokens: at least its first 4 blocks of 32 come from the cache.
                assertTrue(c >= 4 * 32, "family " + family + " sibling " + q + " cached " + c + " tokens: " + r.body());
                cached += c;
            }
            assertEquals(Set.of(owner), endpoints, "family " + family + ": every sibling goes where its prefix is cached");
            owners.put(family, owner);
        }
        assertTrue(cached >= 6 * 4 * 4 * 32, "the engines served the shared prefixes from cache: " + cached);

        // Every engine's cache holds 8 blocks and six families of 6 blocks went through: engines evicted, and the
        // inventory still equals what each engine holds (removals mapped from TensorRT-LLM's hashes to own keys).
        awaitInventoryEqualsCaches();
        long evicted = 0;
        for (EngineSimulator s : sims) {
            evicted += s.stats().get("blocks_evicted");
        }
        assertTrue(evicted > 0, "the engines evicted: their removed events were applied");

        String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString()).body();
        for (EngineSimulator s : sims) {
            assertTrue(metrics.contains("kvgate_kv_subscriber_up{endpoint=\"127.0.0.1:" + s.port()
                + "\",rank=\"0\",rule=\"kv\"} 1"), metrics);
        }
        JsonNode sub = inventory().get("rules").get(0).get("endpoints").get(0).get("subscribers").get(0);
        assertEquals(sims.get(0).baseUrl() + "/kv_cache_events", sub.get("uri").asText(), sub.toString());
        assertEquals(0, sub.get("gaps").asLong(), sub.toString());
    }
}
