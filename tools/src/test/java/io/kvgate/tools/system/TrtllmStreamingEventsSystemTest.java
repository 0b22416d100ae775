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
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * KV-exact routing on TensorRT-LLM's streaming KV-event publisher (TensorRT-LLM PR #17023, issue #36 item 5): two
 * simulated engines publish their KV cache manager V2 radix keys over ZeroMQ (map events, signed keys, base port +
 * rank) and answer {@code POST /kv_cache_events} with an empty list, as the engine does in streaming mode. The
 * gateway subscribes with {@code kv_events: tcp://}, computes the same radix keys from the rendered prompt
 * ({@code kv_key_mode: exact}, {@code hash_algo: v2_sha256_64}) and routes each prompt family to the engine that
 * holds it; a hit is only possible when the gateway's keys equal the engine's. Its inventory equals each cache.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class TrtllmStreamingEventsSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "trtllm-streaming-admin-token";
    private final List<EngineSimulator> sims = new ArrayList<>();
    private final HttpClient http = HttpClient.newHttpClient();
    private Gateway gw;

    @BeforeAll
    void start() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path modelDir = root.resolve("deploy/models/qwen3");
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < 2; i++) {
            int kv = TestPorts.free();
            EngineSimulator s = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.TRTLLM)
                .model("qwen3").modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).cacheBlocks(64)
                .kvEvents("tcp://127.0.0.1:" + kv));
            sims.add(s);
            eps.append("      - url: ").append(s.baseUrl()).append("\n        kv_events: tcp://127.0.0.1:").append(kv)
                .append('\n');
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
                kv_key_mode: exact
                tokenizer: %s
                kv: {cold_readmit_every: 0, load_cap_factor: 100}
                endpoints:
            %s""".formatted(ADMIN_TOKEN, modelDir, eps)));
        Await.until(WAIT, "every subscriber up", () -> {
            JsonNode e = inventory().get("rules").get(0).get("endpoints");
            for (int i = 0; i < sims.size(); i++) {
                JsonNode subscriber = e.get(i).get("subscribers").get(0);
                if (subscriber == null || !"up".equals(subscriber.get("state").asText())) {
                    return false;
                }
            }
            return true;
        }, () -> "inventory: " + inventory());
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

    private static String chat(String system, String question) {
        return "{\"model\":\"qwen3\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":\"" + system
            + "\"},{\"role\":\"user\",\"content\":\"" + question + "\"}]}";
    }

    private static String system(int family) {
        return ("Family " + family + ": you are a meticulous assistant for a logistics company. ").repeat(12);
    }

    private HttpResponse<String> post(String body) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
                .header("content-type", "application/json").header("x-kvgate-explain", "1")
                .header("x-kvgate-admin-token", ADMIN_TOKEN).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException("POST /v1/chat/completions: " + e, e);
        }
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
    void exactRadixKeysFromTheZmqStreamRouteEachFamilyToItsEngine() throws Exception {
        long cached = 0;
        for (int family = 0; family < 4; family++) {
            String system = system(family);
            // Requests of the family until one is routed on a KV match: the first lands by the fallback, and a PUB
            // socket drops what it sends before the subscription reached it (like the engine's), so the match comes
            // with the first request whose predecessor's events were indexed.
            String[] owner = {null};
            int[] asked = {0};
            Await.until(WAIT, "a request of family " + family + " routed on a KV match", () -> {
                HttpResponse<String> first = post(chat(system, "Where is parcel " + (100 + asked[0]++) + "?"));
                assertEquals(200, first.statusCode(), first.body());
                owner[0] = endpointOf(first);
                return first.headers().firstValue("x-kvgate-route").orElseThrow().contains("tier=kv_exact");
            }, () -> "inventory: " + inventory());
            Set<String> endpoints = new HashSet<>();
            for (int q = 1; q <= 3; q++) {
                HttpResponse<String> r = post(chat(system, "Where is parcel " + q + "?"));
                assertEquals(200, r.statusCode(), r.body());
                String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
                assertTrue(route.contains("tier=kv_exact"), route);
                endpoints.add(endpointOf(r));
                long c = JSON.readTree(r.body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
                // The family's system prompt is ~170 tokens: at least its first 4 blocks of 32 come from the cache.
                assertTrue(c >= 4 * 32, "family " + family + " sibling " + q + " cached " + c + " tokens: " + r.body());
                cached += c;
            }
            assertEquals(Set.of(owner[0]), endpoints, "family " + family + ": every sibling goes where its prefix is cached");
            assertTrue(simIndex(owner[0]) >= 0);
        }
        assertTrue(cached >= 4 * 3 * 4 * 32, "the engines served the shared prefixes from cache: " + cached);

        for (int i = 0; i < sims.size(); i++) {
            int e = i;
            Await.until(WAIT, "inventory of engine " + e + " equals its cache",
                () -> inventoryBlocks(e) == sims.get(e).cachedBlocks(0), () -> "inventory: " + inventory());
            // Streaming mode: the draining route has nothing to hand out.
            HttpResponse<String> drained = http.send(HttpRequest.newBuilder(URI.create(sims.get(e).baseUrl()
                + "/kv_cache_events")).POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, drained.statusCode());
            assertEquals("[]", drained.body().strip());
        }
        JsonNode sub = inventory().get("rules").get(0).get("endpoints").get(0).get("subscribers").get(0);
        assertTrue(sub.get("uri").asText().startsWith("tcp://127.0.0.1:"), sub.toString());
    }
}
