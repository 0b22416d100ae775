package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code GET /ready} and {@code GET /ready/engines} over loopback: the fleet's answer waits until an endpoint lists the
 * model; the gateway's own answers 200 while no engine does (a balancer must keep it: it answers 503 itself) and 503
 * while draining.
 */
@Timeout(60)
@Tag("system")
class ReadySystemTest {
    private FakeEngine a;
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        if (a != null) {
            a.close();
        }
    }

    private HttpResponse<String> get(String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void readyWhenAnEndpointListsTheModelAndNotWhileDraining() throws Exception {
        a = new FakeEngine("a");
        a.servedModel = "some-other-model";
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health:
              interval_ms: 200
            rules:
              - name: chat
                models: [qwen3]
                endpoints:
                  - url: %s
            """.formatted(a.url())));
        awaitTrue(() -> gw.engineReadiness().waitingFor().toString().contains("lists [some-other-model]"), "the first /v1/models probe");
        HttpResponse<String> r = get("/ready/engines");
        assertEquals(503, r.statusCode(), r.body());
        assertTrue(r.body().contains("rule chat: no healthy endpoint lists model 'qwen3' in /v1/models"), r.body());
        r = get("/ready");
        assertEquals(200, r.statusCode(), "no engine serves the model, but the gateway is ready to answer that itself: " + r.body());
        assertEquals("{\"ready\":true,\"waiting_for\":[]}", r.body());
        assertEquals(200, get("/health").statusCode(), "liveness is not readiness");
        a.servedModel = "qwen3";
        awaitTrue(() -> gw.engineReadiness().ready(), "a probe that sees qwen3");
        r = get("/ready/engines");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals("{\"ready\":true,\"waiting_for\":[]}", r.body());
        assertEquals(200, http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/ready/engines"))
            .method("HEAD", HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.discarding()).statusCode(),
            "HEAD, as balancers probe");
        gw.drain(true);
        assertEquals(503, get("/ready").statusCode(), "a draining gateway refuses every new request, /ready too");
        assertEquals(java.util.List.of("the gateway is draining (undo: ctl undrain)"), gw.readiness().waitingFor());
        gw.drain(false);
        assertEquals(200, get("/ready").statusCode());
    }

    private static void awaitTrue(BooleanSupplier c, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!c.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting: " + what);
            }
            Thread.sleep(5);
        }
    }
}
