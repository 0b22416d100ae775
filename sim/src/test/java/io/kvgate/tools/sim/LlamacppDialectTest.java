package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code --dialect llamacpp}: llama-server's slot prompt cache, loading-time 503, {@code /slots}, error shapes. */
@Timeout(60)
@Tag("system")
class LlamacppDialectTest {
    static int cached(EngineSimulator sim, String prompt, String extra) throws Exception {
        HttpResponse<String> r = post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + prompt
            + ",\"max_tokens\":1" + extra + "}");
        assertEquals(200, r.statusCode(), r.body());
        return json(r).at("/usage/prompt_tokens_details/cached_tokens").asInt();
    }

    @Test
    void slotsKeepTheirLastPromptAndRequestsGoToTheMostSimilarSlot() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(2))) {
            String a = MetricsTest.tokens(100, 20);
            String b = MetricsTest.tokens(5000, 20);
            assertEquals(0, cached(sim, a, ""));
            assertEquals(19, cached(sim, a, ""), "same slot, whole prefix but the last token reused");
            assertEquals(0, cached(sim, b, ""), "an unrelated prompt takes the other (least recently used) slot");
            assertEquals(19, cached(sim, a, ""), "slot 0 still holds prompt a");
            String aLonger = MetricsTest.tokens(100, 30);
            assertEquals(20, cached(sim, aLonger, ""), "more than half of the prompt matches: that slot is chosen");
            assertEquals(0, cached(sim, a, ",\"cache_prompt\":false"), "cache_prompt false recomputes");

            JsonNode slots = json(get(sim, "/slots"));
            assertEquals(2, slots.size());
            assertEquals(4096, slots.get(0).get("n_ctx").asInt(), "n_ctx 8192 split over 2 slots");
            JsonNode props = json(get(sim, "/props"));
            assertEquals(4096, props.at("/default_generation_settings/n_ctx").asInt(), "/props states one slot's context");
            assertEquals(2, props.get("total_slots").asInt());
            assertEquals(false, slots.get(0).get("is_processing").asBoolean());
            // id_slot pins: slot 1 holds b, so a pinned there reuses nothing and replaces b
            assertEquals(0, cached(sim, a, ",\"id_slot\":1"));
            assertEquals(19, cached(sim, a, ",\"id_slot\":1"));
            assertEquals(20, json(get(sim, "/slots")).get(1).get("n_prompt_tokens").asInt());
            // An id past the last slot wraps (get_slot_by_id: id % slot count): 7 is slot 1, which holds a.
            assertEquals(19, cached(sim, a, ",\"id_slot\":7"));
            HttpResponse<String> bad = post(sim, "/v1/completions", "{\"prompt\":\"x\",\"id_slot\":-2}");
            assertEquals(400, bad.statusCode());
            assertEquals("invalid_request_error", json(bad).at("/error/type").asText());
        }
    }

    @Test
    void loadingAnswers503UntilTheModelIsLoaded() throws Exception {
        // Loading lasts 5 s so the three checks below fall inside it on a loaded machine too (at 400 ms the third came
        // after loading had ended when eight builds shared two cores); the loop after them waits for the end.
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).loadMs(5_000))) {
            HttpResponse<String> h = get(sim, "/health");
            assertEquals(503, h.statusCode());
            assertEquals("{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}", h.body());
            assertEquals(503, post(sim, "/v1/chat/completions", chat("m", "hi", "")).statusCode());
            assertEquals(503, get(sim, "/props").statusCode(), "no context to state while loading");
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (get(sim, "/health").statusCode() == 503 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            HttpResponse<String> up = get(sim, "/health");
            assertEquals(200, up.statusCode());
            assertEquals("{\"status\":\"ok\"}", up.body());
            assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":1")).statusCode());
            assertEquals(200, get(sim, "/props").statusCode());
        }
    }

    @Test
    void errorsInLlamaServersShape() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(2)
            .contextLen(64))) {
            HttpResponse<String> big = post(sim, "/v1/completions", "{\"prompt\":" + MetricsTest.tokens(1, 40) + "}");
            assertEquals(400, big.statusCode());
            assertEquals("{\"error\":{\"code\":400,\"message\":\"request (40 tokens) exceeds the available context size "
                + "(32 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":40,"
                + "\"n_ctx\":32}}", big.body());
            // n > 1 takes a child slot per extra choice (params_from_json_cmpl: n_cmpl = n, at most the slot count).
            JsonNode two = json(post(sim, "/v1/chat/completions", chat("m", "hi", "\"n\":2,\"max_tokens\":2")));
            assertEquals(2, two.get("choices").size(), two.toString());
            assertEquals("{\"error\":{\"code\":400,\"message\":\"n_cmpl cannot be greater than the number of slots, please"
                + " increase -np\",\"type\":\"invalid_request_error\"}}",
                post(sim, "/v1/chat/completions", chat("m", "hi", "\"n\":3")).body());
            JsonNode clipped = json(post(sim, "/v1/completions", "{\"prompt\":" + MetricsTest.tokens(1, 30)
                + ",\"max_tokens\":100}"));
            assertEquals(2, clipped.at("/usage/completion_tokens").asInt(), "stops at the slot's context end");
            assertEquals("length", clipped.at("/choices/0/finish_reason").asText());
            sim.injectFaults("{\"error_after_chunks\":1}");
            String s = post(sim, "/v1/chat/completions", chat("m", "hi", "\"stream\":true,\"max_tokens\":5")).body();
            assertTrue(s.endsWith("data: {\"error\":{\"code\":500,\"message\":\"simulated engine failure mid-stream\","
                + "\"type\":\"server_error\"}}\n\n"), s);
        }
    }

    @Test
    void busySlotsShowInSlotsAndMetrics() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(1).itlMs(40)
            .enableMetrics(true))) {
            CompletableFuture<HttpResponse<String>> slow = MetricsTest.slowCompletion(sim, MetricsTest.tokens(1, 8), -1);
            CompletableFuture<HttpResponse<String>> queued = MetricsTest.slowCompletion(sim, MetricsTest.tokens(50, 8), -1);
            String busy = MetricsTest.awaitMetric(sim, "llamacpp:requests_deferred", "1.0", false);
            assertTrue(busy.contains("\nllamacpp:requests_processing 1.0\n"), busy);
            HttpResponse<String> none = get(sim, "/slots?fail_on_no_slot=1");
            assertEquals(503, none.statusCode());
            assertEquals("unavailable_error", json(none).at("/error/type").asText());
            assertEquals(true, json(get(sim, "/slots")).get(0).get("is_processing").asBoolean());
            assertEquals(200, slow.get().statusCode());
            assertEquals(200, queued.get().statusCode());
        }
    }

    @Test
    void configurationRefusesWhatLlamaServerDoesNotHave() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SimHttp.fast(Dialect.LLAMACPP)
            .kvEvents("tcp://127.0.0.1:5557").role(SimulatorConfig.Role.PREFILL).validate());
        assertTrue(e.getMessage().contains("llama.cpp publishes no KV events"), e.getMessage());
        assertTrue(e.getMessage().contains("no prefill/decode disaggregation"), e.getMessage());
    }
}
