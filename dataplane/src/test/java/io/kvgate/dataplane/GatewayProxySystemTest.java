package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import io.netty.channel.uring.IoUring;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The real gateway on loopback in front of fake engines: routing, relaying and every failure path of the front door. */
@Timeout(60)
@Tag("system")
class GatewayProxySystemTest {
    private static final String CHAT = GatewayFixture.CHAT;
    @RegisterExtension
    final GatewayFixture fx = new GatewayFixture();

    private void startGateway(String policy, String... urls) throws Exception {
        String yaml = """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            limits:
              max_body_bytes: 65536
              request_read_timeout_ms: 1000
            upstream:
              first_byte_timeout_ms: 1500
              connect_timeout_ms: 500
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: %s
                endpoints:
            %s""".formatted(policy, GatewayFixture.endpoints(urls));
        fx.start(yaml);
    }

    private HttpResponse<String> post(String path, String body) throws Exception {
        return fx.post(path, body);
    }

    @Test
    void proxiesJsonAndBalancesRoundRobin() throws Exception {
        startGateway("round_robin", fx.a().url(), fx.b().url());
        // The configuration names no transport: the default is io_uring wherever the kernel offers it (it costs
        // ~10% less CPU per request than epoll, perf/results/transport-2026-12-04.md), epoll where it does not.
        assertEquals(IoUring.isAvailable() ? "io_uring" : "epoll", fx.gateway().transportName());
        for (int i = 0; i < 10; i++) {
            HttpResponse<String> r = post("/v1/chat/completions", CHAT);
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(r.body().contains("\"content\":\"hello\""));
            assertNotNull(r.headers().firstValue("x-request-id").orElse(null));
        }
        assertEquals(5, fx.a().requests.get());
        assertEquals(5, fx.b().requests.get());
        assertEquals(CHAT, fx.a().bodies.get(0), "the body reaches the engine byte for byte");
    }

    /** L3: the client keeps its id on the response; the engine gets a gateway-unique one, so two clients never collide. */
    @Test
    void l3_clientRequestIdOnResponseEngineGetsUniqueIds() throws Exception {
        startGateway("round_robin", fx.a().url());
        for (int i = 0; i < 2; i++) {
            HttpResponse<String> r = fx.http().send(HttpRequest.newBuilder(fx.uri("/v1/chat/completions"))
                .header("Content-Type", "application/json").header("X-Request-Id", "my-id-123")
                .POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals("my-id-123", r.headers().firstValue("x-request-id").orElseThrow());
        }
        assertEquals(2, fx.a().requestIds.size());
        assertNotEquals("my-id-123", fx.a().requestIds.get(0));
        assertNotEquals(fx.a().requestIds.get(0), fx.a().requestIds.get(1), "same client id, distinct engine ids");
    }

    @Test
    void relaysSse() throws Exception {
        startGateway("least_outstanding", fx.a().url());
        fx.a().mode = FakeEngine.Mode.SSE;
        HttpResponse<String> r = post("/v1/chat/completions", CHAT.replace("}]}", "}],\"stream\":true}"));
        assertEquals(200, r.statusCode());
        assertTrue(r.headers().firstValue("content-type").orElse("").startsWith("text/event-stream"));
        assertTrue(r.body().contains("\"t4\""));
        assertTrue(r.body().endsWith("data: [DONE]\n\n"));
    }

    /** Drain: at the deadline a live stream ends with an error frame and [DONE], never a silent cut. */
    @Test
    @Timeout(20)
    void drainDeadlineEndsALiveStreamWithAnErrorFrameAndDone() throws Exception {
        startGateway("round_robin", fx.a().url());
        fx.a().mode = FakeEngine.Mode.SSE_THEN_HANG;
        HttpResponse<java.util.stream.Stream<String>> r = fx.http().send(HttpRequest.newBuilder(
                fx.uri("/v1/chat/completions"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(),
            HttpResponse.BodyHandlers.ofLines());
        assertEquals(200, r.statusCode());
        java.util.Iterator<String> lines = r.body().iterator();
        assertTrue(lines.next().contains("\"t0\""), "the stream is live");
        fx.release().close(0); // the drain deadline is now
        StringBuilder rest = new StringBuilder();
        while (lines.hasNext()) {
            rest.append(lines.next()).append('\n');
        }
        String tail = rest.toString();
        assertTrue(tail.contains("\"code\":\"shutting_down\"") && tail.contains("data: [DONE]"), tail);
    }

    @Test
    void midStreamDeathBecomesErrorFrameThenDone() throws Exception {
        startGateway("round_robin", fx.a().url());
        fx.a().mode = FakeEngine.Mode.SSE_DIE_MIDWAY;
        HttpResponse<String> r = post("/v1/chat/completions", CHAT);
        assertEquals(200, r.statusCode());
        assertTrue(r.body().contains("\"t1\""), r.body());
        assertTrue(r.body().contains("\n\ndata: {\"error\":{"), r.body());
        assertTrue(r.body().endsWith("data: [DONE]\n\n"), r.body());
    }

    @Test
    void unknownModelIs404WithOpenAiError() throws Exception {
        startGateway("round_robin", fx.a().url());
        HttpResponse<String> r = post("/v1/chat/completions", CHAT.replace("qwen3", "nope"));
        assertEquals(404, r.statusCode());
        assertTrue(r.body().contains("\"message\":\"The model `nope` does not exist.\""), r.body());
        assertTrue(r.body().contains("\"param\":\"model\""));
        assertEquals(0, fx.a().requests.get());
    }

    @Test
    void badInputGetsClear4xx() throws Exception {
        startGateway("round_robin", fx.a().url());
        assertEquals(400, post("/v1/chat/completions", "{\"model\":\"qwen3\",\"messages\":[").statusCode());
        assertEquals(400, post("/v1/chat/completions", "[1,2]").statusCode());
        assertEquals(400, post("/v1/chat/completions", "{\"messages\":[]}").statusCode());
        assertEquals(400, post("/v1/completions", "{\"model\":\"qwen3\"}").statusCode());
        HttpResponse<String> ct = fx.http().send(HttpRequest.newBuilder(fx.uri("/v1/chat/completions"))
            .header("Content-Type", "text/plain").POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(415, ct.statusCode());
        HttpResponse<String> big = post("/v1/chat/completions", "{\"model\":\"qwen3\",\"messages\":[],\"x\":\"" + "a".repeat(70_000) + "\"}");
        assertEquals(413, big.statusCode());
        assertTrue(big.body().contains("\"error\""));
        assertEquals(0, fx.a().requests.get());
        // Still serving everyone else.
        assertEquals(200, post("/v1/chat/completions", CHAT).statusCode());
    }

    @Test
    void trickleClientTimesOutWith408() throws Exception {
        startGateway("round_robin", fx.a().url());
        try (Socket s = new Socket("127.0.0.1", fx.gateway().port())) {
            s.setSoTimeout(5000);
            OutputStream out = s.getOutputStream();
            out.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mo"
                .getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            String resp = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(resp.startsWith("HTTP/1.1 408"), resp);
            assertTrue(resp.contains("\"error\""));
        }
    }

    @Test
    void flatEngineErrorIsReemittedInOpenAiShape() throws Exception {
        startGateway("round_robin", fx.a().url());
        fx.a().mode = FakeEngine.Mode.FLAT_ERROR_400;
        HttpResponse<String> r = post("/v1/chat/completions", CHAT);
        assertEquals(400, r.statusCode());
        assertTrue(r.body().startsWith("{\"error\":{\"message\":\"n must be 1 when using greedy sampling\""), r.body());
    }

    @Test
    void connectFailureFailsOverTransparently() throws Exception {
        try (RefusedPort dead = TestPorts.refused()) {
            startGateway("round_robin", dead.url(), fx.a().url());
            for (int i = 0; i < 6; i++) {
                assertEquals(200, post("/v1/chat/completions", CHAT).statusCode());
            }
            assertEquals(6, fx.a().requests.get());
        }
    }

    @Test
    void allEndpointsDownIsFast503WithRetryAfter() throws Exception {
        try (RefusedPort dead = TestPorts.refused()) {
            startGateway("round_robin", dead.url());
            HttpResponse<String> r = post("/v1/chat/completions", CHAT);
            assertEquals(503, r.statusCode());
            assertTrue(r.headers().firstValue("retry-after").isPresent());
            assertTrue(r.body().contains("\"error\""));
        }
    }

    @Test
    void hangingEngineIs504() throws Exception {
        startGateway("round_robin", fx.a().url());
        fx.a().mode = FakeEngine.Mode.HANG;
        HttpResponse<String> r = post("/v1/chat/completions", CHAT);
        assertEquals(504, r.statusCode());
        assertTrue(r.body().contains("\"error\""));
    }

    @Test
    void modelsHealthAndMetrics() throws Exception {
        startGateway("round_robin", fx.a().url());
        HttpResponse<String> m = fx.get("/v1/models");
        assertTrue(m.body().contains("\"id\":\"qwen3\""));
        assertEquals(200, fx.get("/health").statusCode());
        post("/v1/chat/completions", CHAT);
        String metrics = fx.get("/metrics").body();
        assertTrue(metrics.contains("kvgate_requests_total{model=\"qwen3\",rule=\"chat\",status=\"200\"} 1"), metrics);
        assertTrue(metrics.contains("kvgate_open_connections"));
    }
}
