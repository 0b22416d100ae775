package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TTFT-aware load ({@code load.ttft_aware}, issue #41 item 3) through a real gateway and two simulated engines, one
 * very slow to its first token: once the gateway measured both, least_outstanding stops sending the slow one new
 * requests (its excess fades over {@code ttft_recover_ms}, set long here so it cannot fade during the test); with the
 * key off, the same requests alternate between them. The margin is wide (3,000 ms against 5 ms first tokens: a
 * 600x ratio against the 2x threshold), so the host's load does not decide the outcome.
 */
@Timeout(120)
@Tag("system")
class TtftAwareRoutingSystemTest {
    private static final String BODY = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}";
    private static final int SEQUENTIAL = 6;

    private static EngineSimulator sim(double ttftMs) throws Exception {
        return EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(ttftMs).itlMs(1));
    }

    private static Gateway gateway(EngineSimulator a, EngineSimulator b, boolean aware) throws Exception {
        return Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 60000}
            load: {ttft_aware: %s, ttft_recover_ms: 600000}
            upstream: {first_byte_timeout_ms: 60000, idle_timeout_ms: 60000}
            rules:
              - name: r
                models: [m]
                policy: least_outstanding
                endpoints:
                  - url: %s
                  - url: %s
            """.formatted(aware, a.baseUrl(), b.baseUrl())));
    }

    private static HttpRequest request(Gateway gw) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.ofString(BODY)).build();
    }

    /**
     * Two requests sent together (one starts on each engine: both measured), then {@link #SEQUENTIAL} one after the
     * other; returns how many generations the slow engine started in all.
     */
    private static long slowEngineShare(boolean aware) throws Exception {
        try (EngineSimulator fast = sim(5); EngineSimulator slow = sim(3_000)) {
            Gateway gw = gateway(fast, slow, aware);
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            try {
                List<CompletableFuture<HttpResponse<String>>> both = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    both.add(http.sendAsync(request(gw), HttpResponse.BodyHandlers.ofString()));
                }
                for (CompletableFuture<HttpResponse<String>> f : both) {
                    assertEquals(200, f.get(60, TimeUnit.SECONDS).statusCode());
                }
                assertEquals(1, slow.stats().get("generations_started"), "one of the two started on the slow engine");
                for (int i = 0; i < SEQUENTIAL; i++) {
                    HttpResponse<String> r = http.send(request(gw), HttpResponse.BodyHandlers.ofString());
                    assertEquals(200, r.statusCode(), r.body());
                }
                assertEquals(2 + SEQUENTIAL, fast.stats().get("generations_started") + slow.stats().get("generations_started"));
                return slow.stats().get("generations_started");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void aMeasuredStragglerGetsNoNewRequestsWhileItsExcessLasts_withoutTheKeyItKeepsItsShare() throws Exception {
        assertEquals(1, slowEngineShare(true), "ttft_aware: after its measured first token, none of the sequential requests");
        long without = slowEngineShare(false);
        assertTrue(without >= 1 + SEQUENTIAL / 2 - 1,
            "without ttft_aware an idle straggler ties with the fast engine and takes its turns: " + without);
    }
}
