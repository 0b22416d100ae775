package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
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
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Two simulated engines of one dialect serving LoRA adapter {@code sql-lora} on Qwen3 with ZeroMQ KV events, and a
 * kv_exact gateway rule over them, both caches emptied and the subscriptions joined: the fixture of the LoRA
 * kv_exact system tests ({@link LoraContractSystemTest} for vLLM, {@link SglangLoraKvSystemTest} for SGLang).
 */
final class LoraKvEngines implements AutoCloseable {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    static final Duration WAIT = Duration.ofSeconds(20);
    static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);
    static final String ADMIN_TOKEN = "lora-contract-admin-token";
    static final String SYSTEM = "You translate questions about parcels into SQL for a logistics company. ".repeat(20);
    final List<EngineSimulator> sims = new ArrayList<>();
    final HttpClient http = HttpClient.newHttpClient();
    final Gateway gw;

    LoraKvEngines(SimulatorConfig.Dialect dialect) throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        Path modelDir = root.resolve("deploy/models/qwen3");
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < 2; i++) {
            int kv = TestPorts.free();
            EngineSimulator s = EngineSimulator.start(new SimulatorConfig().dialect(dialect).model("qwen3")
                .lora("sql-lora").modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).blockSize(16).hashSeed("0")
                .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind"));
            sims.add(s);
            eps.append("      - url: ").append(s.baseUrl()).append("\n        kv_events: tcp://127.0.0.1:").append(kv).append('\n');
        }
        boolean vllm = dialect == SimulatorConfig.Dialect.VLLM;
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            rules:
              - name: lora
                models: [{name: qwen3, adapters: [sql-lora]}]
                engine: %s
                policy: kv_exact
                tokenizer: %s
                block_size: 16
            %s    kv: {cold_readmit_every: 0, load_cap_factor: 100, speculative_ttl_ms: 0}
                endpoints:
            %s""".formatted(ADMIN_TOKEN, vllm ? "vllm" : "sglang", modelDir, vllm ? "    hash_seed: \"0\"\n" : "", eps)));
        for (int i = 0; i < sims.size(); i++) {
            EngineSimulator sim = sims.get(i);
            int endpoint = i;
            int[] sent = {0};
            ZmqHandshake.await("gateway subscribed to engine " + i, HANDSHAKE_TIMEOUT,
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
                    return lastSeq(endpoint);
                },
                () -> "inventory: " + admin("/admin/v1/inventory"));
        }
        // Start from empty caches on both sides (the handshake's first batches may have been dropped by PUB).
        for (int i = 0; i < sims.size(); i++) {
            EngineSimulator sim = sims.get(i);
            int endpoint = i;
            sim.resetPrefixCache();
            Await.until(WAIT, "the gateway applied engine " + i + "'s AllBlocksCleared", () -> lastSeq(endpoint) == sim.lastEventSeq(0) && blocks(endpoint) == 0);
        }
    }

    @Override
    public void close() {
        if (gw != null) {
            gw.close(100);
        }
        sims.forEach(EngineSimulator::close);
    }

    private static String handshakePrompt(int engine, int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 16; t++) {
            sb.append(t == 0 ? "" : ",").append(10_000 + (engine * 2_000 + attempt) * 16 + t);
        }
        return sb.append(']').toString();
    }

    JsonNode admin(String path) {
        try {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + path))
                .header("authorization", "Bearer " + ADMIN_TOKEN).build(), HttpResponse.BodyHandlers.ofString());
            return JSON.readTree(r.body());
        } catch (Exception e) {
            throw new IllegalStateException(path + ": " + e, e);
        }
    }

    long lastSeq(int endpoint) {
        return admin("/admin/v1/inventory").get("rules").get(0).get("endpoints").get(endpoint).get("subscribers").get(0)
            .get("last_seq").asLong();
    }

    long blocks(int endpoint) {
        return admin("/admin/v1/inventory").get("rules").get(0).get("endpoints").get(endpoint).get("blocks").asLong();
    }

    HttpResponse<String> chat(String model, String question) throws Exception {
        String body = "{\"model\":\"" + model + "\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":\""
            + SYSTEM + "\"},{\"role\":\"user\",\"content\":\"" + question + "\"}]}";
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").header("x-kvgate-explain", "1")
            .header("x-kvgate-admin-token", ADMIN_TOKEN).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return r;
    }

    static String route(HttpResponse<String> r) {
        return r.headers().firstValue("x-kvgate-route").orElseThrow();
    }

    int engineOf(HttpResponse<String> r) {
        String route = route(r);
        String ep = route.substring("endpoint=".length(), route.indexOf(';'));
        for (int i = 0; i < sims.size(); i++) {
            if (sims.get(i).baseUrl().endsWith(ep)) {
                return i;
            }
        }
        throw new AssertionError("no engine for " + route);
    }

    static long cachedTokens(HttpResponse<String> r) throws Exception {
        return JSON.readTree(r.body()).path("usage").path("prompt_tokens_details").path("cached_tokens").asLong();
    }

    /** The adapter the engine ran its last request with (null: the base model). */
    String lastLora(int engine) {
        JsonNode recent = sims.get(engine).stats().toJson().get("recent");
        return recent.get(recent.size() - 1).path("lora").asText(null);
    }
}
