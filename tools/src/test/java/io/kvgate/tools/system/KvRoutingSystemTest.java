package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
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
 * KV-exact routing end to end: simulated vLLM engines with the real Qwen3 tokenizer and chat template publish real
 * KV events over ZeroMQ; the gateway's inventory must equal what they hold, repeated prefixes must land where they
 * are cached (as the engines' own cached_tokens show), and a gateway hashing with the wrong seed must trip the
 * zero-hit watchdog.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class KvRoutingSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Waits for ZeroMQ delivery on a loaded machine; no timeout is under test here. */
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);
    private final List<EngineSimulator> sims = new ArrayList<>();
    private final List<Integer> kvPorts = new ArrayList<>();
    private Gateway gw;
    private final HttpClient http = HttpClient.newHttpClient();
    private Path modelDir;

    @BeforeAll
    void start() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        modelDir = root.resolve("deploy/models/qwen3");
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            int kv = freePort();
            EngineSimulator s = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("qwen3")
                .modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).blockSize(16).hashSeed("0")
                .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind")); // the gateway connects
            sims.add(s);
            kvPorts.add(kv);
            eps.append("      - url: ").append(s.baseUrl()).append("\n        kv_events: tcp://127.0.0.1:").append(kv).append('\n');
        }
        String yaml = """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            rules:
              - name: kv
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                tokenizer: %s
                block_size: 16
                hash_seed: "0"
                kv: {cold_readmit_every: 0, load_cap_factor: 100}
                endpoints:
            %s  - name: wrongseed
                models: [qwen3-wrong-seed]
                engine: vllm
                policy: kv_exact
                tokenizer: %s
                hash_seed: "1"
                kv: {watchdog_zero_hit_streak: 3, speculative_ttl_ms: 0}
                endpoints:
            %s""".formatted(ADMIN_TOKEN, modelDir, eps, modelDir, eps);
        gw = Gateway.start(GatewayConfig.parse(yaml));
        // Every test may publish right away: the gateway's subscribers have joined all three publishers.
        handshake(gw);
        // The handshake's first batches were dropped before the subscriptions arrived (that is the slow joiner), so
        // their blocks sit in the engines unknown to the gateway. Start from equal state: every engine empties its
        // cache and publishes AllBlocksCleared, which the gateway applies before any test runs.
        for (int i = 0; i < sims.size(); i++) {
            EngineSimulator sim = sims.get(i);
            int endpoint = i;
            sim.resetPrefixCache();
            Await.until(WAIT, "the gateway applied engine " + i + "'s AllBlocksCleared", () -> lastSeq(gw, endpoint) == sim.lastEventSeq(0) && inventoryBlocks(endpoint) == 0, () -> "engine last event seq " + sim.lastEventSeq(0) + "; inventory: " + inventory(gw));
        }
    }

    private long lastSeq(Gateway g, int endpoint) {
        return inventory(g).get("rules").get(0).get("endpoints").get(endpoint).get("subscribers").get(0)
            .get("last_seq").asLong();
    }

    @AfterAll
    void stop() {
        if (gw != null) {
            gw.close(100);
        }
        sims.forEach(EngineSimulator::close);
    }

    private static int freePort() {
        return TestPorts.free();
    }

    /**
     * The shared ZeroMQ slow-joiner handshake between every simulator and {@code g}'s subscribers: throwaway
     * requests straight to the engine until one of its batches is indexed, then until the last one is. PUB drops
     * what it publishes before the subscription arrives, and no {@code kv_replay} is configured to fill the gap, so
     * without this the first test's events could be lost. ({@code subscribers[].connected} is a TCP state, not
     * "subscribed".)
     */
    private void handshake(Gateway g) {
        for (int i = 0; i < sims.size(); i++) {
            EngineSimulator sim = sims.get(i);
            int endpoint = i;
            int[] sent = {0};
            ZmqHandshake.await("gateway " + g.port() + " subscribed to engine " + i, HANDSHAKE_TIMEOUT,
                () -> {
                    HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                        .header("content-type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"qwen3\",\"max_tokens\":1,\"prompt\":"
                            + handshakePrompt(endpoint, sent[0]++) + "}")).build(), HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode(), r.body());
                    return sim.lastEventSeq(0);
                },
                () -> {
                    TimeUnit.MILLISECONDS.sleep(10);
                    return lastSeq(g, endpoint);
                },
                () -> "inventory: " + inventory(g));
        }
    }

    /** One block of token ids per attempt, distinct per engine and from every chat prompt's ids. */
    private static String handshakePrompt(int engine, int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 16; t++) {
            sb.append(t == 0 ? "" : ",").append(10_000 + (engine * 2_000 + attempt) * 16 + t);
        }
        return sb.append(']').toString();
    }

    private JsonNode inventory(Gateway g) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.adminPort()
                + "/admin/v1/inventory")).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), "GET /admin/v1/inventory: " + r.body());
            return JSON.readTree(r.body());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException("inventory of gateway " + g.port() + ": " + e, e);
        }
    }

    private static final String ADMIN_TOKEN = "kv-routing-test-admin-token";

    private static final String SYSTEM = "You are a meticulous assistant for a logistics company. ".repeat(20);

    private String chat(String model, String question) {
        return "{\"model\":\"" + model + "\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":\"" + SYSTEM
            + "\"},{\"role\":\"user\",\"content\":\"" + question + "\"}]}";
    }

    private HttpResponse<String> post(String path, String body, boolean explain) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        if (explain) { // explanations are for operators: the admin token unlocks them
            b.header("x-kvgate-explain", "1").header("x-kvgate-admin-token", ADMIN_TOKEN);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private JsonNode admin(String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + path))
            .header("authorization", "Bearer " + ADMIN_TOKEN);
        b = body == null ? b.GET() : b.method(method, HttpRequest.BodyPublishers.ofString(body));
        return JSON.readTree(http.send(b.build(), HttpResponse.BodyHandlers.ofString()).body());
    }

    /**
     * Waits (bounded) for an asynchronous condition: events travel over ZeroMQ. {@code state} is evaluated at the
     * deadline, so the failure shows what the gateway held then.
     */

    private long inventoryBlocks(int endpoint) {
        try {
            return admin("GET", "/admin/v1/inventory", null).get("rules").get(0).get("endpoints").get(endpoint).get("blocks").asLong();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void repeatedPrefixLandsWhereItIsCachedAndInventoryMatchesEngines() throws Exception {
        HttpResponse<String> first = post("/v1/chat/completions", chat("qwen3", "Where is parcel 1?"), true);
        assertEquals(200, first.statusCode(), first.body());
        String firstRoute = first.headers().firstValue("x-kvgate-route").orElseThrow();
        String chosen = firstRoute.substring("endpoint=".length(), firstRoute.indexOf(';'));
        int idx = -1;
        for (int i = 0; i < sims.size(); i++) {
            if (sims.get(i).baseUrl().endsWith(chosen)) {
                idx = i;
            }
        }
        assertTrue(idx >= 0, firstRoute);
        final int owner = idx;
        Await.until(WAIT, "the engine's BlockStored events indexed", () -> inventoryBlocks(owner) == sims.get(owner).cachedBlocks(0)
            && inventoryBlocks(owner) > 0, () -> "engine holds " + sims.get(owner).cachedBlocks(0) + " blocks, last event seq "
                + sims.get(owner).lastEventSeq(0) + "; inventory: " + inventory(gw));

        Set<String> endpoints = new HashSet<>();
        long cached = 0;
        for (int q = 2; q <= 6; q++) {
            HttpResponse<String> r = post("/v1/chat/completions", chat("qwen3", "Where is parcel " + q + "?"), true);
            assertEquals(200, r.statusCode(), r.body());
            String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
            assertTrue(route.contains("tier=kv_exact"), route);
            endpoints.add(route.substring("endpoint=".length(), route.indexOf(';')));
            cached += JSON.readTree(r.body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
        }
        assertEquals(Set.of(chosen), endpoints, "every sibling goes where the prefix is cached");
        assertTrue(cached > 5 * 150, "the engine served the shared prefix from cache: " + cached);

        // The inventory equals what each engine holds, block for block count.
        for (int i = 0; i < sims.size(); i++) {
            final int e = i;
            Await.until(WAIT, "inventory of engine " + e, () -> inventoryBlocks(e) == sims.get(e).cachedBlocks(0), () -> "engine holds " + sims.get(e).cachedBlocks(0) + " blocks, last event seq "
                    + sims.get(e).lastEventSeq(0) + "; inventory: " + inventory(gw));
        }

        // Lookup and render agree with the engine: the whole shared prefix is cached on the owner.
        JsonNode lookup = admin("POST", "/admin/v1/lookup", chat("qwen3", "Where is parcel 2?"));
        JsonNode ownerRow = lookup.get("endpoints").get(owner);
        assertTrue(ownerRow.get("cached_blocks").asInt() >= 8, lookup.toString());
        HttpResponse<String> render = post("/kvgate/v1/chat/completions/render", chat("qwen3", "Where is parcel 2?"), false);
        JsonNode rj = JSON.readTree(render.body());
        assertEquals(rj.get("prompt_token_ids").size() / 16, rj.get("block_keys").size());
        assertTrue(rj.get("prompt").asText().startsWith("<|im_start|>system\n"));

        String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString()).body();
        assertTrue(metrics.contains("kvgate_kv_subscriber_connected{endpoint=\"127.0.0.1:" + sims.get(owner).port() + "\",rank=\"0\"} 1"),
            metrics);
        assertTrue(metrics.contains("kvgate_kv_subscriber_up{endpoint=\"127.0.0.1:" + sims.get(owner).port()
            + "\",rank=\"0\",rule=\"kv\"} 1"), metrics);
        JsonNode inventory = admin("GET", "/admin/v1/inventory", null);
        assertEquals("up", inventory.get("rules").get(0).get("endpoints").get(owner)
            .get("subscribers").get(0).get("state").asText());
        // Well-behaved engines: no frame refused, no session ended by ZeroMQ, no context rebuilt.
        JsonNode ingest = inventory.get("ingest");
        for (String counter : new String[] {"io_thread_errors", "refused_frames", "sessions_ended", "context_rebuilds"}) {
            assertEquals(0, ingest.get(counter).asLong(), counter + ": " + ingest);
        }
        assertTrue(metrics.contains("kvgate_kv_endpoint_blocks{endpoint=\"127.0.0.1:" + sims.get(owner).port() + "\"} "
            + sims.get(owner).cachedBlocks(0)), metrics);
        assertTrue(metrics.contains("kvgate_stage_latency_seconds_count{stage=\"hash\"}"));

        JsonNode explain = admin("POST", "/admin/v1/explain", chat("qwen3", "Where is parcel 9?"));
        assertTrue(explain.get("endpoint").asText().endsWith(chosen), explain.toString());
        assertTrue(explain.get("explanation").asText().contains("tier=kv_exact"), explain.toString());
    }

    /**
     * Routing-quality accounting against real engines (issue #35 item 1): for each request the tokens the index
     * predicted on the chosen engine (its explanation) are what the engine reports serving from its cache, and the
     * rule's counters (ctl quality's route) grow by exactly the prompt and cached tokens of the answers, every computed
     * token attributed.
     */
    @Test
    void theAccountingPredictsWhatTheEngineServes() throws Exception {
        JsonNode before = admin("GET", "/control/v1/quality", null).path("rules").path("kv");
        HttpResponse<String> first = post("/v1/chat/completions", chat("qwen3", "Which depot ships order 1?"), true);
        assertEquals(200, first.statusCode(), first.body());
        String firstRoute = first.headers().firstValue("x-kvgate-route").orElseThrow();
        String chosen = firstRoute.substring("endpoint=".length(), firstRoute.indexOf(';'));
        int owner = -1;
        for (int i = 0; i < sims.size(); i++) {
            if (sims.get(i).baseUrl().endsWith(chosen)) {
                owner = i;
            }
        }
        assertTrue(owner >= 0, firstRoute);
        final int o = owner;
        Await.until(WAIT, "the engine's BlockStored events indexed", () -> inventoryBlocks(o) == sims.get(o).cachedBlocks(0)
            && inventoryBlocks(o) > 0, () -> "engine holds " + sims.get(o).cachedBlocks(0) + " blocks; inventory: " + inventory(gw));
        JsonNode usage = JSON.readTree(first.body()).path("usage");
        long prompt = usage.path("prompt_tokens").asLong();
        long cached = usage.path("prompt_tokens_details").path("cached_tokens").asLong();
        long predictedSum = 0;
        for (int q = 2; q <= 4; q++) {
            HttpResponse<String> r = post("/v1/chat/completions", chat("qwen3", "Which depot ships order " + q + "?"), true);
            assertEquals(200, r.statusCode(), r.body());
            String route = r.headers().firstValue("x-kvgate-route").orElseThrow();
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("predicted_tokens=(\\d+)").matcher(route);
            assertTrue(m.find(), route);
            long predicted = Long.parseLong(m.group(1));
            usage = JSON.readTree(r.body()).path("usage");
            long served = usage.path("prompt_tokens_details").path("cached_tokens").asLong();
            assertTrue(predicted >= 8 * 16, "the shared system prompt is predicted: " + route);
            assertEquals(served, predicted, "the index predicted what the engine served: " + route);
            prompt += usage.path("prompt_tokens").asLong();
            cached += served;
            predictedSum += predicted;
        }
        JsonNode after = admin("GET", "/control/v1/quality", null).path("rules").path("kv");
        assertEquals(4, after.path("requests").asLong() - before.path("requests").asLong(), after.toString());
        assertEquals(prompt, delta(before, after, "tokens", "prompt"), after.toString());
        assertEquals(cached, delta(before, after, "tokens", "observed"), after.toString());
        assertTrue(delta(before, after, "tokens", "predicted") >= predictedSum, after.toString());
        long lost = 0;
        for (String cause : new String[] {"cold", "load_bound", "tier", "dp_rank", "min_match", "cold_readmit", "draining",
            "unavailable", "admission", "retry", "fallback", "speculative", "index_stale", "unknown"}) {
            lost += delta(before, after, "loss", cause);
        }
        assertEquals(prompt - cached, lost, "every computed prompt token has a cause: " + after);
        assertEquals(0, delta(before, after, "loss", "unknown"), "every request was looked up: " + after);
    }

    private static long delta(JsonNode before, JsonNode after, String group, String key) {
        return after.path(group).path(key).asLong() - before.path(group).path(key).asLong();
    }

    @Test
    void parityProbeProvesAgreementAndCatchesAWrongSeed() throws Exception {
        JsonNode ok = admin("POST", "/admin/v1/parity?rule=kv", "");
        assertEquals(6, ok.get("results").size(), ok.toString()); // 3 endpoints x (hash contract, chat pipeline)
        for (JsonNode r : ok.get("results")) {
            assertEquals("match", r.get("verdict").asText(), r.toString());
        }
        // A second gateway over the same engines, configured with the wrong PYTHONHASHSEED.
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < sims.size(); i++) {
            eps.append("      - url: ").append(sims.get(i).baseUrl()).append("\n        kv_events: tcp://127.0.0.1:")
                .append(kvPorts.get(i)).append('\n');
        }
        Gateway wrong = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 60000}
            rules:
              - name: wrong
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                hash_seed: "1"
                endpoints:
            %s""".formatted(eps)));
        try {
            // Its subscribers must have joined the engines' publishers before the probe's events are published.
            handshake(wrong);
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + wrong.adminPort()
                + "/admin/v1/parity?rule=wrong&timeout_ms=3000")).POST(HttpRequest.BodyPublishers.noBody()).build(),
                HttpResponse.BodyHandlers.ofString());
            JsonNode res = JSON.readTree(r.body()).get("results");
            assertEquals(3, res.size(), r.body());
            for (JsonNode x : res) {
                assertEquals("mismatch", x.get("verdict").asText(), x.toString());
                // The probe also names the seed the engines do hash with (they run PYTHONHASHSEED=0).
                assertEquals("0", x.get("hashSeed").asText(), x.toString());
            }
        } finally {
            wrong.close(100);
        }
    }

    @Test
    void wrongSeedTripsTheZeroHitWatchdog() throws Exception {
        // Warm the engines' caches through the correct rule first so the inventory is not empty.
        assertEquals(200, post("/v1/chat/completions", chat("qwen3", "warm"), false).statusCode());
        Await.until(WAIT, "inventory not empty", () -> inventoryBlocks(0) + inventoryBlocks(1) + inventoryBlocks(2) > 0, () -> "inventory: " + inventory(gw));
        for (int i = 0; i < 4; i++) {
            post("/v1/chat/completions", chat("qwen3-wrong-seed", "warm"), false); // the engines 404 the alias; routing ran first
        }
        RuleStats stats = gw.router().stats("wrongseed");
        assertTrue(stats.watchdogFirings() >= 1, "a seed mismatch must be detected");
        assertTrue(stats.missCount(RuleStats.MissReason.NO_MATCH) >= 3);
    }
}
