package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.testkit.TestPorts;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A rule's context length discovered from its endpoints over loopback (issue #13 item 1): fake engines state it
 * where vLLM and SGLang do; the gateway checks requests against the smallest, shows it in {@code /control/v1/rules}
 * and {@code kvgate_rule_context_length}, and reads it again when an endpoint comes back.
 */
@Timeout(60)
@Tag("system")
class ContextDiscoverySystemTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final List<HttpServer> engines = new ArrayList<>();
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        engines.forEach(s -> s.stop(0));
    }

    /** A stand-in engine on {@code port} (0: any) answering {@code GET path} with each JSON body, 200 elsewhere. */
    private HttpServer engine(int port, Map<String, String> routes) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 16);
        s.createContext("/", ex -> {
            String body = routes.getOrDefault(ex.getRequestURI().getPath(), "{}");
            ex.getRequestBody().readAllBytes();
            respond(ex, body);
        });
        s.start();
        engines.add(s);
        return s;
    }

    private static void respond(HttpExchange ex, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("content-type", "application/json");
        ex.sendResponseHeaders(200, b.length);
        try (OutputStream o = ex.getResponseBody()) {
            o.write(b);
        }
    }

    private static String url(HttpServer s) {
        return "http://127.0.0.1:" + s.getAddress().getPort();
    }

    private JsonNode ruleContext() throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort()
            + "/control/v1/rules")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return JSON.readTree(r.body()).path("rules").get(0).path("context_length");
    }

    private String get(String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path)).build(),
            HttpResponse.BodyHandlers.ofString()).body();
    }

    private HttpResponse<String> post(String path, String body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private static String ids(int n) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < n; i++) {
            b.append(i == 0 ? "" : ",").append(7);
        }
        return b.append(']').toString();
    }

    @Test
    void vllmEndpointsThatDisagreeGiveTheSmallestWithAWarning() throws Exception {
        HttpServer a = engine(0, Map.of("/v1/models", "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"max_model_len\":8192},"
            + "{\"id\":\"m-lora\",\"max_model_len\":null,\"parent\":\"m\"}]}"));
        HttpServer b = engine(0, Map.of("/v1/models", "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"max_model_len\":4096}]}"));
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 100}
            rules:
              - name: chat
                models: [m]
                endpoints:
                  - url: %s
                  - url: %s
            """.formatted(url(a), url(b))));
        awaitTrue(() -> ruleContext().path("tokens").asInt() == 4096 && ruleContext().path("endpoints").size() == 2
            && ruleContext().path("endpoints").path(url(a).substring(7)).asInt() == 8192, "both endpoints read");
        JsonNode c = ruleContext();
        assertEquals("discovered", c.get("source").asText());
        assertEquals("reject", c.get("on_context_overflow").asText());
        assertTrue(c.get("warning").asText().contains("its endpoints disagree on the context length ("
            + url(a).substring(7) + ": 8192, " + url(b).substring(7) + ": 4096); requests are checked against the smallest,"
            + " 4096 tokens"), c.toString());
        assertTrue(get("/metrics").contains("kvgate_rule_context_length{rule=\"chat\"} 4096"));
        // A request that fits 8192 but not 4096 is refused by the gateway: neither engine sees it.
        HttpResponse<String> r = post("/v1/completions", "{\"model\":\"m\",\"prompt\":" + ids(4000) + ",\"max_tokens\":200}");
        assertEquals(400, r.statusCode(), r.body());
        JsonNode e = JSON.readTree(r.body()).get("error");
        assertEquals("This model's maximum context length is 4096 tokens. However, you requested 4200 tokens (4000 in the"
            + " prompt, 200 in the completion). Please reduce the length of the prompt or completion.", e.get("message").asText());
        assertEquals("context_length_exceeded", e.get("code").asText());
        assertEquals("prompt", e.get("param").asText());
    }

    @Test
    void anSglangEndpointDownAtStartIsReadWhenItComesBackAndAgainAfterARestart() throws Exception {
        int port = TestPorts.free();
        // unhealthy_threshold 100: the endpoint stays "healthy" for 10 s of failed probes, so readiness shows the
        // model probe's own failure (what clears the one-per-up-period context read) rather than "unhealthy".
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 100, timeout_ms: 500, unhealthy_threshold: 100}
            rules:
              - name: sg
                models: [m]
                engine: sglang
                on_context_overflow: clamp
                endpoints:
                  - url: http://127.0.0.1:%d
            """.formatted(port)));
        awaitTrue(() -> gw.engineReadiness().waitingFor().toString().contains("GET /v1/models failed"), "a failed probe");
        JsonNode down = ruleContext();
        assertTrue(down.get("tokens").isNull(), down.toString());
        assertEquals("unknown", down.get("source").asText());
        assertFalse(get("/metrics").contains("kvgate_rule_context_length{"), "absent while unknown");
        // An SGLang whose card has no max_model_len: the launch argument in /server_info (on servers before it, the
        // deprecated /get_server_info after a 404: SglangServerInfoSystemTest).
        HttpServer first = engine(port, Map.of("/v1/models", "{\"object\":\"list\",\"data\":[{\"id\":\"m\"}]}",
            "/server_info", "{\"context_length\":2048,\"page_size\":1}"));
        awaitTrue(() -> ruleContext().path("tokens").asInt() == 2048, "read when the endpoint came back");
        assertEquals("discovered", ruleContext().get("source").asText());
        first.stop(0);
        engines.remove(first);
        awaitTrue(() -> gw.engineReadiness().waitingFor().toString().contains("GET /v1/models failed"), "the endpoint is gone");
        engine(port, Map.of("/v1/models", "{\"object\":\"list\",\"data\":[{\"id\":\"m\"}]}",
            "/server_info", "{\"context_length\":1024,\"page_size\":1}"));
        awaitTrue(() -> ruleContext().path("tokens").asInt() == 1024, "read again after the restart");
    }

    private interface Check {
        boolean ok() throws Exception;
    }

    private static void awaitTrue(Check c, String what) throws Exception {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!c.ok()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting: " + what);
            }
            Thread.sleep(20);
        }
    }
}
