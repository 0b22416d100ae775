package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The admin fault routes, the bounded admission queue, and /sim/stats accounting. */
@Timeout(60)
@Tag("system")
class FaultInjectionTest {

    @Test
    void failNextAnswersErrorsInDialectShapeThenRecovers() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG))) {
            HttpResponse<String> cmd = post(sim, "/sim/faults", "{\"fail_next\":2,\"status\":502,\"message\":\"boom\"}");
            assertEquals(200, cmd.statusCode());
            for (int i = 0; i < 2; i++) {
                HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m", "x", "\"max_tokens\":1"));
                assertEquals(502, r.statusCode());
                assertEquals("boom", json(r).get("message").asText());
            }
            assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "x", "\"max_tokens\":1")).statusCode());
            assertEquals(2, sim.stats().get("faults_failed"));
            assertEquals(3, json(get(sim, "/sim/stats")).at("/counters/chat_requests").asInt());
        }
    }

    @Test
    void dieAfterChunksTruncatesTheStream() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"die_after_chunks\":2,\"count\":1}");
            // The connection closes without the terminating chunk: the client sees an I/O error.
            assertThrows(IOException.class, () -> post(sim, "/v1/chat/completions",
                chat("m", "x", "\"max_tokens\":5,\"stream\":true")));
            assertEquals(1, sim.stats().get("faults_died_mid_stream"));
            HttpResponse<String> ok = post(sim, "/v1/chat/completions", chat("m", "x", "\"max_tokens\":5,\"stream\":true"));
            assertTrue(ok.body().endsWith("data: [DONE]\n\n"));
            assertEquals(0, json(get(sim, "/sim/stats")).get("running").asInt(), "slot released after the fault");
        }
    }

    @Test
    void errorAfterChunksSendsErrorFrameThenDone() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"error_after_chunks\":1}");
            HttpResponse<String> r = post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":5,\"stream\":true}");
            assertEquals(200, r.statusCode(), "status frozen once the stream started");
            String[] events = r.body().split("\n\n");
            assertEquals(3, events.length, r.body());
            assertTrue(events[1].startsWith("data: {\"error\":{"), events[1]);
            assertEquals("data: [DONE]", events[2]);
        }
    }

    @Test
    void hangNextNeverAnswers() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"hang_next\":1}");
            HttpRequest req = HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
                .timeout(Duration.ofMillis(1000))
                .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1}")).build();
            assertThrows(HttpTimeoutException.class, () -> SimHttp.CLIENT.send(req, HttpResponse.BodyHandlers.ofString()));
            awaitCounter(sim, "faults_hung", 1);
            assertEquals(200, post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1}").statusCode());
        }
    }

    @Test
    void refuseConnectionsUntilCleared() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"refuse_connections\":true}");
            HttpRequest req = HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/health")).timeout(Duration.ofSeconds(5))
                .GET().build();
            assertThrows(ConnectException.class,
                () -> java.net.http.HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString()));
            sim.injectFaults("{\"clear\":true}");
            assertEquals(200, java.net.http.HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString())
                .statusCode());
        }
    }

    @Test
    void unhealthyHealthIs503() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            sim.injectFaults("{\"unhealthy\":true}");
            assertEquals(503, get(sim, "/health").statusCode());
            assertEquals(400, post(sim, "/sim/faults", "{\"fail_next\":-1}").statusCode());
        }
    }

    @Test
    void boundedFifoQueueRejectsWith503() throws Exception {
        // One slot, one queue place; a long TTFT keeps the first request running (no timing is asserted).
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).maxConcurrency(1).queueDepth(1).ttftMs(60_000);
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            String body = "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":1}";
            CompletableFuture<HttpResponse<String>> first = SimHttp.CLIENT.sendAsync(HttpRequest.newBuilder(
                URI.create(sim.baseUrl() + "/v1/completions")).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
            awaitCounter(sim, "generations_started", 1);
            CompletableFuture<HttpResponse<String>> second = SimHttp.CLIENT.sendAsync(HttpRequest.newBuilder(
                URI.create(sim.baseUrl() + "/v1/completions")).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
            awaitCounter(sim, "queued", 1);
            HttpResponse<String> third = post(sim, "/v1/completions", body);
            assertEquals(503, third.statusCode());
            assertEquals("ServiceUnavailableError", json(third).at("/error/type").asText());
            assertEquals(1, sim.stats().get("rejected_queue_full"));
            first.cancel(true);
            second.cancel(true);
        }
    }

    static void awaitCounter(EngineSimulator sim, String name, long atLeast) throws InterruptedException {
        for (int i = 0; i < 1000 && sim.stats().get(name) < atLeast; i++) {
            Thread.sleep(5);
        }
        assertTrue(sim.stats().get(name) >= atLeast, name + " never reached " + atLeast);
    }
}
