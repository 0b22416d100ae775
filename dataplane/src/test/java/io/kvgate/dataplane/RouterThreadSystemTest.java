package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code router.thread} on the real gateway: {@code auto} runs the routing stage on the one I/O event loop when
 * {@code io_threads: 1} and keeps a dedicated routing thread otherwise; in io mode requests are routed and proxied,
 * the admin explain route (a publish from the admin thread) is decided on the loop, a reload's swap (admin thread) is
 * applied by the loop, and the router's metrics are the dedicated mode's.
 */
@Timeout(60)
@Tag("system")
class RouterThreadSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

    private FakeEngine a;
    private FakeEngine b;
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void setUp() throws Exception {
        a = new FakeEngine("a");
        b = new FakeEngine("b");
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        a.close();
        b.close();
    }

    private static String yaml(String top, String... urls) {
        StringBuilder eps = new StringBuilder();
        for (String u : urls) {
            eps.append("      - url: ").append(u).append('\n');
        }
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            %s
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: round_robin
                endpoints:
            %s""".formatted(top, eps);
    }

    private HttpResponse<String> post(int port, String path, String body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private String metrics() throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")).GET().build(),
            HttpResponse.BodyHandlers.ofString()).body();
    }

    @Test
    void autoWithOneIoThreadRunsTheStageOnTheLoopAndServesRequestsExplainReloadAndMetrics() throws Exception {
        gw = Gateway.start(GatewayConfig.parse(yaml("io_threads: 1", a.url(), b.url())));
        assertTrue(gw.router().runsOnEventLoop(), "auto with io_threads: 1 -> io");
        for (int i = 0; i < 10; i++) {
            HttpResponse<String> r = post(gw.port(), "/v1/chat/completions", CHAT);
            assertEquals(200, r.statusCode(), r.body());
        }
        assertEquals(5, a.requests.get());
        assertEquals(5, b.requests.get());

        HttpResponse<String> explain = post(gw.adminPort(), "/admin/v1/explain", CHAT);
        assertEquals(200, explain.statusCode(), explain.body());
        assertTrue(explain.body().contains("\"endpoint\" : \"" + a.url()) || explain.body().contains("\"endpoint\" : \"" + b.url()),
            explain.body());

        gw.reload(GatewayConfig.parse(yaml("io_threads: 1", b.url()))); // the swap is asked from this (foreign) thread
        for (int i = 0; i < 4; i++) {
            assertEquals(200, post(gw.port(), "/v1/chat/completions", CHAT).statusCode());
        }
        assertEquals(5, a.requests.get(), "the reloaded rule routes to b only");
        assertEquals(9, b.requests.get());

        String m = metrics();
        for (String family : new String[] {"kvgate_router_ring_full_total 0", "kvgate_router_inbox_full_total 0",
            "kvgate_router_ring_free 4096.0", "kvgate_router_errors_total 0", "kvgate_stage_latency_seconds_count{stage=\"decide\"}"}) {
            assertTrue(m.contains(family), family + " in\n" + m);
        }
    }

    @Test
    void autoWithTwoIoThreadsOrThreadDedicatedKeepsARoutingThreadOfItsOwn() throws Exception {
        gw = Gateway.start(GatewayConfig.parse(yaml("io_threads: 2", a.url())));
        assertFalse(gw.router().runsOnEventLoop(), "auto with two I/O threads -> dedicated");
        assertEquals(200, post(gw.port(), "/v1/chat/completions", CHAT).statusCode());
        gw.close(100);
        gw = Gateway.start(GatewayConfig.parse(yaml("io_threads: 1\nrouter: {thread: dedicated}", a.url())));
        assertFalse(gw.router().runsOnEventLoop());
        assertEquals(200, post(gw.port(), "/v1/chat/completions", CHAT).statusCode());
        assertEquals(2, a.requests.get());
    }
}
