package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Gateway-owned cache salts over a vLLM simulator that keys its prefix cache by {@code cache_salt} as vLLM does
 * (issue #40 item 4): two tenants sending the same prompt to the same engine never share a cached block, while each
 * tenant's repeats hit; and the gateway's KV index, fed by the engine's events, matches a tenant's repeat
 * ({@code tier=kv_exact}) but never another tenant's prompt, because the gateway hashes the salt the engine sees.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class TenantCacheSaltSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "tenant-salt-test-admin-token";
    private static final String SYSTEM = "You are a meticulous assistant for a logistics company. ".repeat(20);

    @TempDir
    static Path dir;
    private EngineSimulator sim;
    private Gateway gw;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeAll
    void start() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path modelDir = root.resolve("deploy/models/qwen3");
        int kv = TestPorts.free();
        sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("qwen3")
            .modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).blockSize(16).hashSeed("0")
            .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"));
        Path secret = dir.resolve("salt.secret");
        Files.writeString(secret, "salt-secret-for-the-tenant-test");
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            cache_salt: {secret_file: %s}
            tenants:
              - {name: acme, api_key_sha256: [%s]}
              - {name: beta, api_key_sha256: [%s]}
              - {name: pub1, api_key_sha256: [%s], shared_prefix_salt: true}
              - {name: pub2, api_key_sha256: [%s], shared_prefix_salt: true}
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
                  - url: %s
                    kv_events: tcp://127.0.0.1:%d
            """.formatted(ADMIN_TOKEN, secret, TenancyConfig.sha256Hex("acme-key"), TenancyConfig.sha256Hex("beta-key"),
            TenancyConfig.sha256Hex("pub1-key"), TenancyConfig.sha256Hex("pub2-key"), modelDir, sim.baseUrl(), kv)));
        int[] sent = {0};
        ZmqHandshake.await("gateway subscribed to the engine", HANDSHAKE_TIMEOUT, () -> {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"qwen3\",\"max_tokens\":1,\"prompt\":" + handshakePrompt(sent[0]++) + "}")).build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            return sim.lastEventSeq(0);
        }, () -> {
            TimeUnit.MILLISECONDS.sleep(10);
            return lastSeq();
        }, () -> "inventory: " + inventory());
        sim.resetPrefixCache();
        Await.until(WAIT, "the gateway applied the engine's AllBlocksCleared",
            () -> lastSeq() == sim.lastEventSeq(0) && blocks() == 0, () -> "inventory: " + inventory());
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

    private static String handshakePrompt(int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 16; t++) {
            sb.append(t == 0 ? "" : ",").append(10_000 + attempt * 16 + t);
        }
        return sb.append(']').toString();
    }

    private JsonNode inventory() {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort()
                + "/admin/v1/inventory")).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
                HttpResponse.BodyHandlers.ofString());
            return JSON.readTree(r.body());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException("inventory: " + e, e);
        }
    }

    private long lastSeq() {
        return inventory().get("rules").get(0).get("endpoints").get(0).get("subscribers").get(0).get("last_seq").asLong();
    }

    private long blocks() {
        return inventory().get("rules").get(0).get("endpoints").get(0).get("blocks").asLong();
    }

    private record Answer(long cachedTokens, String route) {}

    /** Sends the shared prompt as {@code key}'s tenant and waits until the engine's events for it are indexed. */
    private Answer ask(String key, String question) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").header("authorization", "Bearer " + key)
            .header("x-kvgate-explain", "1").header("x-kvgate-admin-token", ADMIN_TOKEN)
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"qwen3\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\","
                + "\"content\":\"" + SYSTEM + "\"},{\"role\":\"user\",\"content\":\"" + question + "\"}]}")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        Await.until(WAIT, "the engine's events indexed", () -> lastSeq() == sim.lastEventSeq(0), () -> "inventory: " + inventory());
        return new Answer(JSON.readTree(r.body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong(),
            r.headers().firstValue("x-kvgate-route").orElse(""));
    }

    @Test
    void twoTenantsWithTheSamePromptNeverShareCachedBlocksWhileEachTenantsRepeatsHit() throws Exception {
        Answer acmeFirst = ask("acme-key", "Where is parcel 1?");
        assertEquals(0, acmeFirst.cachedTokens(), "a cold engine");
        Answer acmeRepeat = ask("acme-key", "Where is parcel 2?");
        assertTrue(acmeRepeat.cachedTokens() >= 160, "acme's shared system prompt is cached for acme: " + acmeRepeat);
        assertTrue(acmeRepeat.route().contains("tier=kv_exact"), "the gateway's salted hashes match the engine's: " + acmeRepeat);

        Answer betaFirst = ask("beta-key", "Where is parcel 1?");
        assertEquals(0, betaFirst.cachedTokens(), "the same prompt from another tenant hits nothing of acme's: " + betaFirst);
        assertFalse(betaFirst.route().contains("tier=kv_exact"), "nor does the gateway's index: " + betaFirst);
        Answer betaRepeat = ask("beta-key", "Where is parcel 2?");
        assertTrue(betaRepeat.cachedTokens() >= 160, "beta's own repeat hits: " + betaRepeat);
        assertTrue(betaRepeat.route().contains("tier=kv_exact"), betaRepeat.toString());

        // Two tenants that opted into the shared salt share public prefixes with each other, with nobody else.
        Answer pub1 = ask("pub1-key", "Where is parcel 3?");
        assertEquals(0, pub1.cachedTokens(), "acme's and beta's caches are not the shared one: " + pub1);
        Answer pub2 = ask("pub2-key", "Where is parcel 4?");
        assertTrue(pub2.cachedTokens() >= 160, "pub2 hits what pub1 cached: " + pub2);
    }
}
