package io.kvgate.tools.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.kvgate.control.BuildInfo;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code ./kvgate ctl} over the control socket against a real gateway: tables, refusals and exit codes. */
@Timeout(60)
@Tag("system")
class ControlCommandTest {
    @TempDir
    Path dir;
    private HttpServer engine;
    private Gateway gw;
    private Path config;
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    @BeforeEach
    void setUp() throws Exception {
        engine = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
        engine.createContext("/", ex -> {
            ex.sendResponseHeaders(200, -1);
            ex.close();
        });
        // A completion reports 40 of its 100 prompt tokens served from the cache, unless the prompt asks it not to say.
        engine.createContext("/v1/completions", ex -> {
            String req = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
            String details = req.contains("unreported") ? "" : ",\"prompt_tokens_details\":{\"cached_tokens\":40}";
            byte[] answer = ("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"ok\","
                + "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":1,\"total_tokens\":101"
                + details + "}}").getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("content-type", "application/json");
            ex.sendResponseHeaders(200, answer.length);
            ex.getResponseBody().write(answer);
            ex.close();
        });
        engine.start();
        config = dir.resolve("kvgate.yaml");
        Files.writeString(config, """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                policy: kv_exact
                endpoints:
                  - url: http://127.0.0.1:%d
            """.formatted(engine.getAddress().getPort()));
        gw = Gateway.start(new Gateway.Options(GatewayConfig.load(config), NanoClock.SYSTEM, config, dir.resolve("ctl.sock")));
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        engine.stop(0);
    }

    private int ctl(String... args) {
        out.reset();
        err.reset();
        String[] all = new String[args.length + 2];
        all[0] = "--socket";
        all[1] = dir.resolve("ctl.sock").toString();
        System.arraycopy(args, 0, all, 2, args.length);
        return ControlCommand.run(all, new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    private String out() {
        return out.toString(StandardCharsets.UTF_8);
    }

    private String err() {
        return err.toString(StandardCharsets.UTF_8);
    }

    @Test
    void operatorVerbsOverTheSocket() throws Exception {
        String ep = "127.0.0.1:" + engine.getAddress().getPort();
        assertEquals(0, ctl("rules"), err());
        assertTrue(out().startsWith("RULE  MODELS  ENGINE  POLICY    TOPOLOGY   HASH"), out());
        assertTrue(out().contains("chat  qwen3   vllm    kv_exact  pool of 1  sha256_cbor  16     0"), out());
        assertEquals(0, ctl("endpoints"), err());
        assertTrue(out().contains("http://" + ep) && out().contains("DRAINED"), out());
        assertEquals(0, ctl("drain", ep), err());
        assertTrue(gw.registry().get(ep).drained());
        assertEquals(0, ctl("undrain", ep), err());
        // --migrate: the endpoint's live streams move (none here); --within bounds the ones that cannot
        assertEquals(0, ctl("drain", ep, "--migrate", "--within", "1500"), err());
        assertTrue(out().contains("in flight move to other endpoints (those that cannot finish within 1500 ms)"), out());
        assertEquals(2, ctl("drain", "--migrate"), "the gateway's own drain has no streams to move");
        assertEquals(2, ctl("drain", ep, "--within", "5"), "--within comes with --migrate");
        assertEquals(0, ctl("undrain", ep), err());
        assertEquals(0, ctl("patch", "chat", "kv.load_cap_factor=1.2"), err());
        assertEquals("applied: configuration version 2\n  rules[name=chat].kv.load_cap_factor: 1.5 -> 1.2\n", out());
        assertEquals(0, ctl("status"), err());
        assertTrue(out().startsWith("configuration  version 2, digest " + gw.applied().digest()), out());
        assertTrue(out().contains("\nversion        " + BuildInfo.current().describe() + "\n"), out());
        // --json after the verb (it used to be taken for the verb's argument and ignored): the status JSON, with the
        // running gateway's build under "version"
        assertEquals(0, ctl("status", "--json"), err());
        JsonNode status = new ObjectMapper().readTree(out());
        assertEquals(BuildInfo.current().version(), status.path("version").path("version").asText(), out());
        assertEquals(BuildInfo.current().commit(), status.path("version").path("commit").asText(), out());
        assertEquals(Runtime.version().toString(), status.path("version").path("java").asText(), out());
        assertEquals(2, status.path("config_version").asLong(), "the keys that were there stay");
        // reload re-reads the file: back to version 3 with the file's value.
        Files.writeString(config, Files.readString(config).replace("policy: kv_exact", "policy: kv_exact\n    explain: true"));
        assertEquals(0, ctl("diff"), err());
        assertTrue(out().contains("rules[name=chat].explain: false -> true"), out());
        assertEquals(0, ctl("reload"), err());
        assertTrue(out().startsWith("applied: configuration version 3"), out());
        assertEquals(1.5, gw.config().rules().get(0).kvExact().loadCapFactor());
        assertEquals(0, ctl("reload"));
        assertTrue(out().startsWith("unchanged: configuration version 3"), out());
        assertEquals(0, ctl("--json", "rules"));
        assertTrue(out().contains("\"config_version\" : 3"), out());
    }

    /**
     * Routing-quality accounting end to end: the engine's usage through the relay into the ledger, out through the
     * control route as the table and as JSON. The rule has no KV events, so no lookup ran: the computed tokens are
     * "unknown", and an answer without cached_tokens is counted as unreported, not as a miss.
     */
    @Test
    void qualityShowsTheAccountedTokensAndTheirCauses() throws Exception {
        assertEquals(0, ctl("quality"), err());
        assertTrue(out().startsWith("no accounted requests yet"), out());
        java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
        for (String prompt : new String[] {"hello", "hello again", "unreported"}) {
            var resp = http.send(java.net.http.HttpRequest.newBuilder(
                    java.net.URI.create("http://127.0.0.1:" + gw.port() + "/v1/completions"))
                .header("content-type", "application/json")
                .POST(java.net.http.HttpRequest.BodyPublishers.ofString(
                    "{\"model\":\"qwen3\",\"prompt\":\"" + prompt + "\",\"max_tokens\":1}")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
            assertEquals(200, resp.statusCode(), resp.body());
        }
        assertEquals(0, ctl("quality"), err());
        assertTrue(out().startsWith("RULE  REQUESTS  UNREPORTED  PROMPT  REACHABLE  PREDICTED  OBSERVED"), out());
        assertTrue(out().contains("chat  2         1           200     0 (0.0%)   0 (0.0%)   80 (40.0%)"), out());
        assertTrue(out().contains("chat  unknown  120     100.0%"), out());
        assertEquals(0, ctl("quality", "--json"), err());
        JsonNode chat = new ObjectMapper().readTree(out()).path("rules").path("chat");
        assertEquals(200, chat.path("tokens").path("prompt").asLong(), out());
        assertEquals(80, chat.path("tokens").path("observed").asLong(), out());
        assertEquals(120, chat.path("loss").path("unknown").asLong(), out());
        assertEquals(1, chat.path("unreported_requests").asLong(), out());
    }

    @Test
    void tenantsShowsEachTenantsUsageAgainstItsShareOfTheLimits() throws Exception {
        Files.writeString(config, Files.readString(config).replace("rules:", """
            replicas: 3
            tenants:
              - name: acme
                api_key_sha256: [%s]
                limits: {requests_per_minute: 60, tokens_per_minute: 9000, max_concurrent: 4}
            rules:""".formatted(io.kvgate.control.config.TenancyConfig.sha256Hex("acme-key"))));
        assertEquals(0, ctl("reload"), err());
        assertEquals(0, ctl("tenants"), err());
        String[] lines = out().split("\n");
        assertTrue(lines[0].startsWith("TENANT     REQ/MIN    TOKENS/MIN     TOKENS/DAY  IN FLIGHT  ANSWERED  LIMITED"), out());
        assertTrue(lines[1].startsWith("anonymous  0          0              0           0          0         0"), out());
        assertTrue(lines[2].startsWith("acme       0/20 (60)  0/3000 (9000)  0           0/1 (4)    0         0"), out());
        assertEquals(0, ctl("--json", "tenants"), err());
        JsonNode acme = new ObjectMapper().readTree(out()).path("tenants").get(1);
        assertEquals(20, acme.path("replica_share").path("requests_per_minute").asLong(), out());
    }

    @Test
    void tenantsUnderASharedStoreShowTheStoresUsageLabelledBesideTheReplicas() throws Exception {
        String body = """
            {"tenants": [
              {"tenant": "acme", "limits": {"requests_per_minute": 60, "tokens_per_minute": 9000},
               "replica_share": {"requests_per_minute": 20, "tokens_per_minute": 3000},
               "used": {"requests_last_minute": 1, "tokens_last_minute": 50, "tokens_last_day": 50, "in_flight": 0},
               "shared": {"store": "redis://127.0.0.1:6379", "requests_last_minute": 41, "tokens_last_minute": 8800,
                          "tokens_last_day": 12000, "in_flight": 3},
               "requests": {"200": 5}, "limited": {}},
              {"tenant": "beta", "limits": {"requests_per_minute": 6}, "replica_share": {"requests_per_minute": 2},
               "used": {"requests_last_minute": 0, "tokens_last_minute": 0, "tokens_last_day": 0, "in_flight": 0},
               "shared": {"store": "redis://127.0.0.1:6379", "error": "the store did not answer within 1000 ms"},
               "requests": {}, "limited": {}}]}
            """;
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        ControlCommand.printTenants(new java.io.PrintStream(bytes, true, java.nio.charset.StandardCharsets.UTF_8), body);
        String[] lines = bytes.toString(java.nio.charset.StandardCharsets.UTF_8).split("\n");
        assertTrue(lines[1].startsWith("acme      1/20 (60)"), lines[1]);
        assertTrue(lines[2].matches("  shared +41/60 +8800/9000 +12000 +3\\s*"), lines[2]);
        assertTrue(lines[4].startsWith("  shared  unknown: the store did not answer within 1000 ms"), lines[4]);
        assertTrue(lines[5].startsWith("shared: the tenant's usage in rate_limit_store redis://127.0.0.1:6379 over every replica"),
            lines[5]);
    }

    @Test
    void refusalsExitNonZeroAndSayWhy() throws Exception {
        assertEquals(1, ctl("patch", "chat", "kv.load_cap_facter=1.2"));
        assertTrue(err().contains("refused (400)") && err().contains("kv.load_cap_facter: is not a rule key"), err());
        Files.writeString(config, Files.readString(config).replace("listen: 127.0.0.1:0\n", "listen: 127.0.0.1:1\n"));
        assertEquals(1, ctl("reload"));
        assertTrue(err().contains("refused (409)") && err().contains("restart-only: listen"), err());
        assertEquals(1, ctl("log-level", "chatty"));
        assertEquals(2, ctl("weight", "x"));
        assertEquals(2, ctl("frobnicate"));
        assertEquals(3, ControlCommand.run(new String[] {"--socket", dir.resolve("nobody-here.sock").toString(), "status"},
            new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8)));
        assertEquals(1, gw.applied().version(), "nothing applied");
    }
}
