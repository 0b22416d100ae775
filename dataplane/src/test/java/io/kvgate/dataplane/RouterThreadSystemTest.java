package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code router.thread} on the real gateway: {@code auto} runs the routing stage on the one I/O event loop when
 * {@code io_threads: 1} and keeps a dedicated routing thread otherwise; in io mode requests are routed and proxied,
 * the admin explain route (a publish from the admin thread) is decided on the loop, a reload's swap (admin thread) is
 * applied by the loop, and the router's metrics are the dedicated mode's.
 */
@Timeout(60)
@Tag("system")
class RouterThreadSystemTest {
    private static final String CHAT = GatewayFixture.CHAT;
    @RegisterExtension
    final GatewayFixture fx = new GatewayFixture();

    private static String yaml(String top, String... urls) {
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
            %s""".formatted(top, GatewayFixture.endpoints(urls));
    }

    private String metrics() throws Exception {
        return fx.get("/metrics").body();
    }

    @Test
    void autoWithOneIoThreadRunsTheStageOnTheLoopAndServesRequestsExplainReloadAndMetrics() throws Exception {
        fx.start(yaml("io_threads: 1", fx.a().url(), fx.b().url()));
        assertTrue(fx.gateway().router().runsOnEventLoop(), "auto with io_threads: 1 -> io");
        for (int i = 0; i < 10; i++) {
            HttpResponse<String> r = fx.post("/v1/chat/completions", CHAT);
            assertEquals(200, r.statusCode(), r.body());
        }
        assertEquals(5, fx.a().requests.get());
        assertEquals(5, fx.b().requests.get());

        HttpResponse<String> explain = fx.post(fx.adminUri("/admin/v1/explain"), CHAT);
        assertEquals(200, explain.statusCode(), explain.body());
        assertTrue(explain.body().contains("\"endpoint\" : \"" + fx.a().url()) || explain.body().contains("\"endpoint\" : \"" + fx.b().url()),
            explain.body());

        fx.gateway().reload(GatewayConfig.parse(yaml("io_threads: 1", fx.b().url()))); // the swap is asked from this (foreign) thread
        for (int i = 0; i < 4; i++) {
            assertEquals(200, fx.post("/v1/chat/completions", CHAT).statusCode());
        }
        assertEquals(5, fx.a().requests.get(), "the reloaded rule routes to b only");
        assertEquals(9, fx.b().requests.get());

        String m = metrics();
        for (String family : new String[] {"kvgate_router_ring_full_total 0", "kvgate_router_inbox_full_total 0",
            "kvgate_router_ring_free 4096.0", "kvgate_router_errors_total 0", "kvgate_stage_latency_seconds_count{stage=\"decide\"}"}) {
            assertTrue(m.contains(family), family + " in\n" + m);
        }
    }

    @Test
    void autoWithTwoIoThreadsOrThreadDedicatedKeepsARoutingThreadOfItsOwn() throws Exception {
        fx.start(yaml("io_threads: 2", fx.a().url()));
        assertFalse(fx.gateway().router().runsOnEventLoop(), "auto with two I/O threads -> dedicated");
        assertEquals(200, fx.post("/v1/chat/completions", CHAT).statusCode());
        fx.start(yaml("io_threads: 1\nrouter: {thread: dedicated}", fx.a().url()));
        assertFalse(fx.gateway().router().runsOnEventLoop());
        assertEquals(200, fx.post("/v1/chat/completions", CHAT).statusCode());
        assertEquals(2, fx.a().requests.get());
    }
}
