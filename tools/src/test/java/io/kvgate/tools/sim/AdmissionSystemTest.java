package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.Admission;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Priority shedding end to end: the gateway in front of a simulated engine it may send one request at a time
 * ({@code admission.max_outstanding: 1}). While the engine is busy, requests wait in the admission queue; a full
 * queue sheds batch requests first (429, Retry-After, OpenAI rate_limit_error), interactive ones displace waiting
 * batch ones and are served first, and a malformed class is a 400 naming the header.
 *
 * <p>The engine is held by one request the simulator never answers ({@code hang_next}) until the gateway's
 * first-byte timeout ends it: the queue is arranged while that slot is provably taken. (It used to be a request that
 * took 300 ms, which a loaded machine outlived while the test was still arranging the queue.)
 */
@Timeout(60)
@Tag("system")
class AdmissionSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(20);
    /** A request named by its {@code user} field, which the engine records as it starts each generation. */
    private static CompletableFuture<HttpResponse<String>> send(Gateway gw, String priority, String key, String name) {
        String body = SimHttp.chat("m", "hello", "\"max_tokens\":2,\"user\":\"" + name + "\"");
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
            .header("authorization", "Bearer " + key).POST(HttpRequest.BodyPublishers.ofString(body));
        if (priority != null) {
            b.header("X-Kvgate-Priority", priority);
        }
        return SimHttp.CLIENT.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /**
     * The order in which the engine started the requests (its recent-request ring, by {@code user}): the order the
     * gateway let them through. The order the client's callbacks ran in is not it — two answers a few microseconds
     * apart can complete on the client's executor in either order (this test flaked that way).
     */
    private static List<String> engineStartOrder(EngineSimulator sim) {
        List<String> order = new ArrayList<>();
        for (JsonNode e : sim.stats().toJson().path("recent")) {
            JsonNode user = e.path("received").path("user");
            if (user.isTextual()) {
                order.add(user.asText());
            }
        }
        return order;
    }

    @Test
    void batchIsShedFirstAndInteractiveIsServedFirstWhileTheEngineIsSaturated() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"hang_next\":1}");
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 60000}
                upstream: {first_byte_timeout_ms: 8000}
                rules:
                  - name: chat
                    models: [m]
                    policy: least_outstanding
                    admission: {max_outstanding: 1, max_queue: 4, max_wait_ms: 20000}
                    endpoints:
                      - url: %s
                """.formatted(sim.baseUrl())));
            try {
                HttpResponse<String> bad = send(gw, "urgent", "k0", "bad").get();
                assertEquals(400, bad.statusCode(), bad.body());
                assertTrue(bad.body().contains("X-Kvgate-Priority"), bad.body());

                Admission adm = gw.router().admission("chat");
                CompletableFuture<HttpResponse<String>> busy = send(gw, null, "k0", "busy");
                Await.until(WAIT, "the engine taken", () -> gw.router().routed() >= 1);
                // Four batch requests from two keys fill the queue.
                List<CompletableFuture<HttpResponse<String>>> batch = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    batch.add(send(gw, "batch", i % 2 == 0 ? "k1" : "k2", "batch" + i));
                    int queued = i + 1;
                    Await.until(WAIT, queued + " batch requests waiting", () -> adm.depth(PriorityClass.BATCH) == queued);
                }
                // Two interactive requests each displace a waiting batch request.
                List<CompletableFuture<HttpResponse<String>>> interactive = new ArrayList<>();
                for (int i = 0; i < 2; i++) {
                    interactive.add(send(gw, "interactive", "k3", "interactive" + i));
                    int queued = i + 1;
                    Await.until(WAIT, queued + " interactive requests waiting", () -> adm.depth(PriorityClass.INTERACTIVE) == queued);
                }
                // A batch arrival at a full queue whose lowest class is batch is itself refused.
                HttpResponse<String> refused = send(gw, "batch", "k4", "refused").get();
                assertEquals(429, refused.statusCode(), refused.body());

                assertEquals(504, busy.get().statusCode(), "the held request ends at the first-byte timeout");
                int shed = 0;
                int served = 0;
                for (CompletableFuture<HttpResponse<String>> f : batch) {
                    HttpResponse<String> r = f.get();
                    if (r.statusCode() == 429) {
                        shed++;
                        assertEquals("20", r.headers().firstValue("retry-after").orElse(null));
                        JsonNode err = SimHttp.MAPPER.readTree(r.body()).path("error");
                        assertEquals("rate_limit_error", err.path("type").asText(), r.body());
                        assertEquals("rate_limit_exceeded", err.path("code").asText(), r.body());
                        assertTrue(err.path("message").asText().contains("admission queue is full"), r.body());
                    } else {
                        assertEquals(200, r.statusCode(), r.body());
                        served++;
                    }
                }
                assertEquals(2, shed, "one batch request displaced per interactive arrival");
                assertEquals(2, served, "the other two waited and were served");
                for (CompletableFuture<HttpResponse<String>> f : interactive) {
                    assertEquals(200, f.get().statusCode());
                }
                // Service order at the engine once the held request gave up its slot: both interactive, then the
                // surviving batch requests (the held one hung before the engine recorded it; the shed ones never
                // reached it).
                List<String> order = engineStartOrder(sim);
                assertEquals(4, order.size(), order.toString());
                assertTrue(order.get(0).startsWith("interactive") && order.get(1).startsWith("interactive"), order.toString());
                for (String n : order.subList(2, 4)) {
                    assertTrue(n.startsWith("batch") && batch.get(n.charAt(5) - '0').join().statusCode() == 200, order.toString());
                }

                assertEquals(3, adm.shedCount(PriorityClass.BATCH));
                assertEquals(0, adm.shedCount(PriorityClass.INTERACTIVE));
                String metrics = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics"))
                    .GET().build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("kvgate_admission_shed_total{class=\"batch\",rule=\"chat\"} 3.0\n"), metrics);
                assertTrue(metrics.contains("kvgate_admission_wait_seconds_count{class=\"interactive\",rule=\"chat\"} 2\n"), metrics);
                assertTrue(metrics.contains("kvgate_shed_total{reason=\"admission\"} 3"), metrics);
            } finally {
                gw.close(100);
            }
        }
    }
}
