package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.testkit.Await;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reload matrix: every reloadable field changed one at a time through {@code PUT /admin/v1/config}, each
 * observed on the very next request; failed reloads change nothing (behaviour, version, inventory); restart-only
 * changes are refused naming the field; the redacted read-back PUT back unchanged is a no-op.
 */
@Timeout(60)
@Tag("system")
class ReloadSystemTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String CHAT = GatewayFixture.CHAT;
    @RegisterExtension
    final GatewayFixture fx = new GatewayFixture();

    /** The base configuration; each test edits one field of it. */
    private String yaml(String apiKey, String policy, String endpoints, String extra) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [%s]
            limits:
              max_body_bytes: 65536
            upstream:
              first_byte_timeout_ms: 20000
            health:
              interval_ms: 60000
              retry_after_seconds: 1
            %s
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: %s
                endpoints:
            %s""".formatted(apiKey, extra, policy, endpoints);
    }

    private String eps(String... lines) {
        StringBuilder sb = new StringBuilder();
        for (String l : lines) {
            sb.append("      - ").append(l).append('\n');
        }
        return sb.toString();
    }

    private String base() {
        return yaml("k1", "round_robin", eps("url: " + fx.a().url(), "url: " + fx.b().url()), "");
    }

    private HttpResponse<String> chat(String key, String body) throws Exception {
        HttpRequest.Builder r = HttpRequest.newBuilder(fx.uri("/v1/chat/completions"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        if (key != null) {
            r.header("Authorization", "Bearer " + key);
        }
        return fx.http().send(r.build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> admin(String method, String path, String body, String token) throws Exception {
        HttpRequest.Builder r = HttpRequest.newBuilder(fx.adminUri(path))
            .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (token != null) {
            r.header("Authorization", "Bearer " + token);
        }
        return fx.http().send(r.build(), HttpResponse.BodyHandlers.ofString());
    }

    private JsonNode put(String yaml) throws Exception {
        HttpResponse<String> r = admin("PUT", "/admin/v1/config", yaml, null);
        assertEquals(200, r.statusCode(), r.body());
        JsonNode n = JSON.readTree(r.body());
        assertTrue(n.get("applied").asBoolean(), r.body());
        return n;
    }

    @Test
    void apiKeyRevokedIsRefusedOnTheNextRequest() throws Exception {
        fx.start(base());
        assertEquals(200, chat("k1", CHAT).statusCode());
        assertEquals(401, chat("k2", CHAT).statusCode());
        JsonNode out = put(base().replace("api_keys: [k1]", "api_keys: [k2]"));
        assertEquals(2, out.get("version").asLong());
        assertEquals(401, chat("k1", CHAT).statusCode(), "a revoked key is refused at once");
        assertEquals(200, chat("k2", CHAT).statusCode());
        assertEquals("[api_keys: <redacted> -> <redacted, changed>]", out.get("changes").toString().replace("\"", ""));
    }

    @Test
    void loweredBodyLimitIsEnforcedOnTheNextRequest() throws Exception {
        fx.start(base());
        String big = CHAT.replace("hi", "x".repeat(4000));
        assertEquals(200, chat("k1", big).statusCode());
        put(base().replace("max_body_bytes: 65536", "max_body_bytes: 2048"));
        assertEquals(413, chat("k1", big).statusCode());
        assertEquals(200, chat("k1", CHAT).statusCode());
    }

    @Test
    void loweredConnectionLimitRefusesTheNextConnection() throws Exception {
        fx.start(base());
        put(base().replace("max_body_bytes: 65536", "max_body_bytes: 65536\n  max_connections: 1"));
        try (java.net.Socket held = new java.net.Socket("127.0.0.1", fx.gateway().port())) {
            held.getOutputStream().write("GET /health HTTP/1.1\r\nhost: x\r\n\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            assertTrue(new String(held.getInputStream().readNBytes(12), java.nio.charset.StandardCharsets.US_ASCII).startsWith("HTTP/1.1 200"));
            try (java.net.Socket extra = new java.net.Socket("127.0.0.1", fx.gateway().port())) {
                extra.setSoTimeout(10_000);
                assertEquals(-1, extra.getInputStream().read(), "the connection over the new limit is closed at once");
            }
        }
    }

    @Test
    void policyChangeMakesNewDecisionsAndRemovedEndpointGetsNoTraffic() throws Exception {
        fx.start(base());
        for (int i = 0; i < 8; i++) {
            assertEquals(200, chat("k1", CHAT).statusCode());
        }
        assertEquals(4, fx.a().requests.get());
        assertEquals(4, fx.b().requests.get());
        put(yaml("k1", "weighted", eps("url: " + fx.a().url() + "\n        weight: 1", "url: " + fx.b().url() + "\n        weight: 3"), ""));
        for (int i = 0; i < 8; i++) {
            assertEquals(200, chat("k1", CHAT).statusCode());
        }
        assertEquals(4 + 2, fx.a().requests.get(), "weighted 1:3 over 8 requests");
        assertEquals(4 + 6, fx.b().requests.get());
        put(yaml("k1", "weighted", eps("url: " + fx.b().url() + "\n        weight: 3"), ""));
        for (int i = 0; i < 5; i++) {
            assertEquals(200, chat("k1", CHAT).statusCode());
        }
        assertEquals(6, fx.a().requests.get(), "a removed endpoint gets no more traffic");
        assertEquals(15, fx.b().requests.get());
    }

    @Test
    void upstreamTimeoutAndRetryAfterApplyToTheNextRequest() throws Exception {
        fx.start(yaml("k1", "round_robin", eps("url: " + fx.a().url()), ""));
        put(yaml("k1", "round_robin", eps("url: " + fx.a().url()), "").replace("first_byte_timeout_ms: 20000", "first_byte_timeout_ms: 300"));
        assertEquals(300, fx.gateway().pool().config().firstByteTimeoutMs());
        fx.a().mode = FakeEngine.Mode.HANG;
        HttpResponse<String> r = chat("k1", CHAT);
        assertEquals(504, r.statusCode(), r.body());
        assertTrue(r.body().contains("300 ms"), "the new first-byte timeout cut the request: " + r.body());
        fx.a().mode = FakeEngine.Mode.OK_JSON;
        // retry_after_seconds: a drained endpoint leaves no candidate -> 503 with the new Retry-After.
        put(yaml("k1", "round_robin", eps("url: " + fx.a().url()), "").replace("first_byte_timeout_ms: 20000", "first_byte_timeout_ms: 300")
            .replace("retry_after_seconds: 1", "retry_after_seconds: 7"));
        assertEquals(200, admin("POST", "/control/v1/endpoints/" + fx.a().url().substring(7) + "/drain", "", null).statusCode());
        r = chat("k1", CHAT);
        assertEquals(503, r.statusCode(), r.body());
        assertEquals("7", r.headers().firstValue("retry-after").orElse(""));
        assertEquals(200, admin("POST", "/control/v1/endpoints/" + fx.a().url().substring(7) + "/undrain", "", null).statusCode());
        assertEquals(200, chat("k1", CHAT).statusCode());
    }

    @Test
    void healthSettingsAndAdminTokenApplyAtOnce() throws Exception {
        fx.start(base());
        put(base().replace("interval_ms: 60000", "interval_ms: 30000\n  unhealthy_threshold: 7"));
        assertEquals(30000, fx.gateway().health().config().intervalMs());
        assertEquals(7, fx.gateway().health().config().unhealthyThreshold());
        put(base().replace("api_keys: [k1]", "api_keys: [k1]\nadmin_token: tok-0123456789abcdef"));
        assertEquals(401, admin("GET", "/admin/v1/endpoints", null, null).statusCode(), "the new admin token is required at once");
        assertEquals(200, admin("GET", "/admin/v1/endpoints", null, "tok-0123456789abcdef").statusCode());
    }

    @Test
    void adminDrainStopsNewRequestsAndCanBeUndone() throws Exception {
        fx.start(base());
        assertEquals(200, admin("POST", "/admin/v1/drain", "", null).statusCode());
        HttpResponse<String> r = chat("k1", CHAT);
        assertEquals(503, r.statusCode(), r.body());
        assertEquals(503, fx.get("/health").statusCode());
        assertEquals(200, admin("DELETE", "/admin/v1/drain", null, null).statusCode());
        assertEquals(200, chat("k1", CHAT).statusCode(), "drain undone");
        assertEquals(1, fx.a().requests.get() + fx.b().requests.get(), "the request refused while draining never reached an engine");
    }

    @Test
    void restartOnlyChangesAreRefusedWith409NamingThem() throws Exception {
        fx.start(base());
        HttpResponse<String> r = admin("PUT", "/admin/v1/config",
            "listen: 127.0.0.1:1\n" + base().substring("listen: 127.0.0.1:0\n".length()) + "router:\n  ring_size: 1024\n", null);
        assertEquals(409, r.statusCode(), r.body());
        assertEquals("[\"listen\",\"router.ring_size\"]", JSON.readTree(r.body()).get("error").get("restart_only").toString());
        assertEquals(1, fx.gateway().applied().version());
    }

    @Test
    void failedReloadsChangeNothing(@TempDir Path dir) throws Exception {
        String withKv = yaml("k1", "round_robin",
            eps("url: " + fx.a().url() + "\n        kv_events: tcp://127.0.0.1:1", "url: " + fx.b().url() + "\n        kv_events: tcp://127.0.0.1:2"), "");
        fx.start(withKv);
        awaitTrue(() -> fx.gateway().kv().status().size() == 2, "both subscribers registered by the ingest thread");
        String inventoryBefore = endpointsOf(admin("GET", "/admin/v1/inventory", null, null).body());
        assertTrue(inventoryBefore.contains("tcp://127.0.0.1:2"), inventoryBefore);
        Files.createDirectories(dir.resolve("no-tokenizer"));
        // Drops b and names a tokenizer directory that cannot be loaded: refused before anything is touched.
        String broken = yaml("k2", "round_robin", eps("url: " + fx.a().url() + "\n        kv_events: tcp://127.0.0.1:1"), "")
            .replace("policy: round_robin", "policy: round_robin\n    tokenizer: " + dir.resolve("no-tokenizer"));
        HttpResponse<String> r = admin("PUT", "/admin/v1/config", broken, null);
        assertEquals(400, r.statusCode(), r.body());
        assertTrue(r.body().contains("tokenizer: value '" + dir.resolve("no-tokenizer") + "' cannot be loaded"), r.body());
        String seed = withKv.replace("policy: round_robin", "policy: round_robin\n    hash_seed: \"abc\"").replace("[k1]", "[k2]");
        r = admin("PUT", "/admin/v1/config", seed, null);
        assertEquals(400, r.statusCode(), r.body());
        assertTrue(r.body().contains("hash_seed: value 'abc'"), r.body());
        assertEquals(1, fx.gateway().applied().version());
        assertEquals(inventoryBefore, endpointsOf(admin("GET", "/admin/v1/inventory", null, null).body()), "inventory untouched");
        assertEquals(200, chat("k1", CHAT).statusCode(), "the old key still works");
        assertEquals(401, chat("k2", CHAT).statusCode());
        chat("k1", CHAT);
        assertEquals(1, fx.a().requests.get());
        assertEquals(1, fx.b().requests.get(), "b still gets its share");

        // Now a valid reload that drops b: its subscription and inventory go.
        put(withKv.replace("\n      - url: " + fx.b().url() + "\n        kv_events: tcp://127.0.0.1:2", ""));
        String after = endpointsOf(admin("GET", "/admin/v1/inventory", null, null).body());
        assertFalse(after.contains(fx.b().url()), after);
        // The ingest thread drops the subscription (and the endpoint's blocks) on its next duty cycle.
        awaitTrue(() -> fx.gateway().kv().status().stream().noneMatch(s -> s.uri().endsWith(":2")), "b's subscriber is gone");
    }

    /** Waits (bounded) for work another thread does asynchronously; fails naming what did not happen. */
    private static void awaitTrue(java.util.function.BooleanSupplier c, String what) throws InterruptedException {
        Await.until(Duration.ofSeconds(10), what, c);
    }

    /** The inventory's structure (rules, endpoints, subscriber uris), without counters that move with time. */
    private static String endpointsOf(String inventory) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (JsonNode r : JSON.readTree(inventory).get("rules")) {
            sb.append(r.get("name").asText()).append(':');
            for (JsonNode e : r.get("endpoints")) {
                sb.append(e.get("url").asText()).append(" blocks=").append(e.get("blocks").asLong()).append(" subs=");
                for (JsonNode s : e.get("subscribers")) {
                    sb.append(s.get("uri").asText()).append(',');
                }
                sb.append(';');
            }
        }
        return sb.toString();
    }

    @Test
    void readBackIsRedactedAndPutBackUnchangedIsANoOp() throws Exception {
        fx.start(base().replace("api_keys: [k1]", "api_keys: [k1-very-secret]\nadmin_token: tok-0123456789abcdef"));
        HttpResponse<String> r = admin("GET", "/admin/v1/config", null, "tok-0123456789abcdef");
        assertEquals(200, r.statusCode());
        assertFalse(r.body().contains("k1-very-secret"), r.body());
        assertFalse(r.body().contains("tok-0123456789abcdef"), r.body());
        HttpResponse<String> back = admin("PUT", "/admin/v1/config", r.body(), "tok-0123456789abcdef");
        assertEquals(200, back.statusCode(), back.body());
        JsonNode n = JSON.readTree(back.body());
        assertFalse(n.get("applied").asBoolean());
        assertEquals(1, n.get("version").asLong());
        assertEquals(200, chat("k1-very-secret", CHAT).statusCode(), "the kept secret still works");
        // An edit next to redacted secrets keeps them and applies the edit.
        HttpResponse<String> edit = admin("PUT", "/admin/v1/config", r.body().replace("retry_after_seconds: 1", "retry_after_seconds: 2"),
            "tok-0123456789abcdef");
        assertEquals(200, edit.statusCode(), edit.body());
        assertEquals(2, JSON.readTree(edit.body()).get("version").asLong());
        assertEquals(200, chat("k1-very-secret", CHAT).statusCode());
        assertEquals(2, fx.gateway().config().health().retryAfterSeconds());
        // With api_keys set, /metrics on the client listener needs a key too (it names every engine and rule).
        String metrics = fx.http().send(HttpRequest.newBuilder(fx.uri("/metrics"))
            .header("authorization", "Bearer k1-very-secret").build(), HttpResponse.BodyHandlers.ofString()).body();
        assertTrue(metrics.contains("kvgate_config_version 2.0\n"), metrics);
        assertTrue(metrics.contains("kvgate_config_info{digest=\"" + fx.gateway().applied().digest() + "\",version=\"2\"} 1"), metrics);
    }
}
