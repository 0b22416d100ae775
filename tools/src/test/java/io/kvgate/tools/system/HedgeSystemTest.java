package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hedged first token (issue #41 item 3) through a real gateway and two simulated engines, one of which is very slow
 * to its first token. Two requests sent together under least_outstanding start one on each engine whatever their
 * order. Latency margins are wide (a hedge after 300 ms; 1.5 s against 30 s first tokens), so which leg wins does not
 * depend on the host's load; where a fast engine's cold start could pass after_ms, the assertion does not care.
 */
@Timeout(90)
@Tag("system")
class HedgeSystemTest {
    private static final String BODY = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"tell me a story\"}]}";

    private static EngineSimulator sim(double ttftMs) throws Exception {
        return EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(ttftMs).itlMs(2));
    }

    private static Gateway gateway(EngineSimulator a, EngineSimulator b, String hedge) throws Exception {
        return Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 60000}
            upstream: {first_byte_timeout_ms: 60000, idle_timeout_ms: 60000}
            rules:
              - name: r
                models: [m]
                policy: least_outstanding
                explain: true
                hedge: %s
                endpoints:
                  - url: %s
                  - url: %s
            """.formatted(hedge, a.baseUrl(), b.baseUrl())));
    }

    private static HttpRequest request(Gateway gw, String priority) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").header("x-kvgate-priority", priority)
            .timeout(Duration.ofSeconds(60)).POST(HttpRequest.BodyPublishers.ofString(BODY)).build();
    }

    /** One clean stream: content events, no error event, exactly one [DONE] at the end. */
    private static void assertCleanStream(HttpResponse<String> r) {
        assertEquals(200, r.statusCode(), r.body());
        String b = r.body();
        assertFalse(b.contains("\"error\""), b);
        assertTrue(b.contains("\"content\""), b);
        assertEquals(b.indexOf("data: [DONE]"), b.lastIndexOf("data: [DONE]"), "one [DONE]: " + b);
        assertTrue(b.strip().endsWith("data: [DONE]"), b);
    }

    private static void await(LongSupplier value, long atLeast, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (value.getAsLong() < atLeast && System.nanoTime() - deadline < 0) {
            TimeUnit.MILLISECONDS.sleep(20);
        }
        assertTrue(value.getAsLong() >= atLeast, what + ": " + value.getAsLong());
    }

    @Test
    void theHedgeWinsAgainstAStragglerAndThePrimaryWinsWhenItIsFastEnough() throws Exception {
        try (EngineSimulator fast = sim(1_500); EngineSimulator straggler = sim(30_000)) {
            Gateway gw = gateway(fast, straggler, "{after_ms: 300, max_extra_ratio: 1.0}");
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            try {
                // Sent together: one starts on each engine. The one on the straggler is hedged to the fast engine at
                // 300 ms and wins (~1.8 s against 30 s); the one on the fast engine is hedged to the straggler and its
                // primary wins (1.5 s against 30 s). Neither waits for the straggler.
                List<CompletableFuture<HttpResponse<String>>> sent = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    sent.add(http.sendAsync(request(gw, "interactive"), HttpResponse.BodyHandlers.ofString()));
                }
                for (CompletableFuture<HttpResponse<String>> f : sent) {
                    HttpResponse<String> r = f.get(60, TimeUnit.SECONDS);
                    assertCleanStream(r);
                    String route = r.headers().firstValue("x-kvgate-route").orElse("");
                    assertTrue(route.contains("hedge=127.0.0.1:"), "the explanation names the hedge leg: " + route);
                    assertTrue(route.contains("endpoint=127.0.0.1:" + URI.create(fast.baseUrl()).getPort()),
                        "the fast engine answered: " + route);
                }
                assertEquals(1, gw.metrics().hedges("r", "won_hedge"), "the request that started on the straggler");
                assertEquals(1, gw.metrics().hedges("r", "won_primary"), "the request that started on the fast engine");
                assertTrue(gw.metrics().hedgeExtraPromptTokens("r") > 0);
                // Both losing legs were on the straggler: it sees each of them aborted, and generated nothing.
                await(() -> straggler.stats().get("aborted_by_client"), 2, "requests the straggler saw aborted");
                assertEquals(0, straggler.stats().get("completion_tokens"), "no straggler token was generated");
                assertEquals(0, fast.stats().get("aborted_by_client"), "the fast engine's legs all answered");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void nonInteractiveRequestsAreNeverHedged() throws Exception {
        try (EngineSimulator fast = sim(5); EngineSimulator slow = sim(1_500)) {
            Gateway gw = gateway(fast, slow, "{after_ms: 100, max_extra_ratio: 1.0}");
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            try {
                // Sent together: one starts on each engine, so the slow one's is late for its first token.
                List<CompletableFuture<HttpResponse<String>>> sent = new ArrayList<>();
                for (String priority : new String[] {"standard", "batch"}) {
                    sent.add(http.sendAsync(request(gw, priority), HttpResponse.BodyHandlers.ofString()));
                }
                for (CompletableFuture<HttpResponse<String>> f : sent) {
                    assertCleanStream(f.get(60, TimeUnit.SECONDS));
                }
                for (String result : new String[] {"won_hedge", "won_primary", "skipped_budget", "no_candidate"}) {
                    assertEquals(0, gw.metrics().hedges("r", result), result);
                }
                assertEquals(0, slow.stats().get("aborted_by_client"));
                assertTrue(slow.stats().get("completion_tokens") > 0, "the slow engine answered its share itself");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void overTheBudgetNoHedgeGoesOut() throws Exception {
        try (EngineSimulator fast = sim(5); EngineSimulator slow = sim(1_500)) {
            Gateway gw = gateway(fast, slow, "{after_ms: 300, max_extra_ratio: 0.01}");
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            try {
                List<CompletableFuture<HttpResponse<String>>> sent = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    sent.add(http.sendAsync(request(gw, "interactive"), HttpResponse.BodyHandlers.ofString()));
                }
                for (CompletableFuture<HttpResponse<String>> f : sent) {
                    assertCleanStream(f.get(60, TimeUnit.SECONDS));
                }
                // At least the request on the slow engine found the budget spent (0.01 of two prompts is < 1 token).
                assertTrue(gw.metrics().hedges("r", "skipped_budget") >= 1);
                assertEquals(0, gw.metrics().hedges("r", "won_hedge") + gw.metrics().hedges("r", "won_primary"));
                assertEquals(0, gw.metrics().hedgeExtraPromptTokens("r"));
                assertEquals(0, fast.stats().get("aborted_by_client") + slow.stats().get("aborted_by_client"));
                assertTrue(slow.stats().get("completion_tokens") > 0, "the slow engine answered its request itself");
            } finally {
                gw.close(100);
            }
        }
    }
}
