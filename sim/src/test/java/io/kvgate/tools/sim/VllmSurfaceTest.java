package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** vLLM dialect: validation order, error texts and shapes, clamping, precedence (engine-contracts §1). */
@Timeout(60)
@Tag("system")
class VllmSurfaceTest {
    static EngineSimulator sim;
    static EngineSimulator flat;

    @BeforeAll
    static void start() {
        sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).contextLen(64));
        flat = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).errorShape(SimulatorConfig.ErrorShape.FLAT));
    }

    @AfterAll
    static void stop() {
        sim.close();
        flat.close();
    }

    @Test
    void unknownModelIs404InOpenAiShape() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("nope", "hi", ""));
        assertEquals(404, r.statusCode());
        assertEquals("{\"error\":{\"message\":\"The model `nope` does not exist.\",\"type\":\"NotFoundError\","
            + "\"param\":\"model\",\"code\":404}}", r.body());
        assertEquals("application/json", r.headers().firstValue("content-type").orElseThrow());
    }

    @Test
    void flatShapeOnOlderVllm() throws Exception {
        HttpResponse<String> r = post(flat, "/v1/completions", "{\"model\":\"x\",\"prompt\":\"hi\"}");
        assertEquals(404, r.statusCode());
        JsonNode b = json(r);
        assertEquals("error", b.get("object").asText());
        assertEquals("The model `x` does not exist.", b.get("message").asText());
        assertEquals(404, b.get("code").asInt());
        assertFalse(b.has("error"));
    }

    @Test
    void greedyWithNAbove1Is400() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m", "hi", "\"n\":2,\"temperature\":0"));
        assertEquals(400, r.statusCode());
        assertTrue(json(r).at("/error/message").asText().startsWith("n must be 1 when using greedy sampling"));
    }

    @Test
    void streamOptionsWithoutStreamIs400() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"stream_options\":{\"include_usage\":true}"));
        assertEquals(400, r.statusCode());
        assertEquals("Bad Request", json(r).at("/error/type").asText(), "vLLM's RequestValidationError handler");
    }

    @Test
    void topLogprobsWithoutLogprobsIs400() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m", "hi", "\"top_logprobs\":2"));
        assertEquals(400, r.statusCode());
        assertEquals("top_logprobs", json(r).at("/error/param").asText());
    }

    @Test
    void contextOverflowClampsSilently() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"a b c d\",\"max_tokens\":1000}");
        assertEquals(200, r.statusCode());
        JsonNode b = json(r);
        assertEquals("length", b.at("/choices/0/finish_reason").asText());
        assertEquals(4, b.at("/usage/prompt_tokens").asInt());
        assertEquals(60, b.at("/usage/completion_tokens").asInt(), "clamped to context 64 - prompt 4");
    }

    @Test
    void promptLongerThanContextIs400() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"" + "w ".repeat(70) + "\"}");
        assertEquals(400, r.statusCode());
        assertEquals("{\"error\":{\"message\":\"Input length (71) exceeds model's maximum context length (64).\","
            + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}", r.body());
    }

    @Test
    void maxCompletionTokensWins() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"max_tokens\":7,\"max_completion_tokens\":3"));
        assertEquals(3, json(r).at("/usage/completion_tokens").asInt());
        // `max_completion_tokens or max_tokens`: a 0 falls through to max_tokens
        assertEquals(7, json(post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"max_tokens\":7,\"max_completion_tokens\":0"))).at("/usage/completion_tokens").asInt());
        HttpResponse<String> bad = post(sim, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":0"));
        assertEquals(400, bad.statusCode());
        assertEquals("{\"error\":{\"message\":\"max_tokens must be at least 1, got 0.\",\"type\":\"BadRequestError\","
            + "\"param\":null,\"code\":400}}", bad.body());
        HttpResponse<String> negative = post(sim, "/v1/chat/completions", chat("m", "hi", "\"max_completion_tokens\":-3"));
        assertEquals("max_tokens must be at least 1, got -3.", json(negative).at("/error/message").asText());
    }

    @Test
    void malformedJsonIs400AndCounted() throws Exception {
        long before = sim.stats().get("malformed_json");
        HttpResponse<String> r = post(sim, "/v1/chat/completions", "{\"model\":");
        assertEquals(400, r.statusCode());
        assertTrue(json(r).at("/error/message").asText().startsWith("malformed JSON body"));
        assertEquals(before + 1, sim.stats().get("malformed_json"));
    }

    @Test
    void toolValidation() throws Exception {
        assertEquals("{\"error\":{\"message\":\"Value error, `tools` must not be an empty array.\",\"type\":\"Bad Request\","
            + "\"param\":\"tools\",\"code\":400}}", post(sim, "/v1/chat/completions", chat("m", "hi", "\"tools\":[]")).body());
        assertEquals(400, post(sim, "/v1/chat/completions", chat("m", "hi", "\"tool_choice\":\"auto\"")).statusCode());
        String tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],";
        assertEquals(400, post(sim, "/v1/chat/completions", chat("m", "hi",
            tools + "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}")).statusCode());
        assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "hi",
            tools + "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}")).statusCode());
    }

    @Test
    void routesLikeVllm() throws Exception {
        HttpResponse<String> models = get(sim, "/v1/models");
        assertEquals("m", json(models).at("/data/0/id").asText());
        assertEquals("vllm", json(models).at("/data/0/owned_by").asText());
        assertEquals(200, get(sim, "/health").statusCode());
        HttpResponse<String> metrics = get(sim, "/metrics");
        assertEquals(200, metrics.statusCode());
        assertTrue(metrics.body().contains("vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0.0\n"),
            metrics.body());
        HttpResponse<String> emb = post(sim, "/v1/embeddings", "{\"model\":\"m\",\"input\":\"x\"}");
        assertEquals(404, emb.statusCode());
        assertEquals("{\"detail\":\"Not Found\"}", emb.body());
    }

    @Test
    void echoesRequestIdAndUsesItAsBaseId() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":2"),
            "x-request-id", "abc-123");
        assertEquals("abc-123", r.headers().firstValue("x-request-id").orElseThrow());
        JsonNode b = json(r);
        assertEquals("chatcmpl-abc-123", b.get("id").asText());
        assertTrue(b.has("kv_transfer_params"));
        assertEquals(2, b.at("/usage/completion_tokens").asInt());
        assertEquals(0, b.at("/usage/prompt_tokens_details/cached_tokens").asInt());
        assertEquals(b.at("/usage/prompt_tokens").asInt() + 2, b.at("/usage/total_tokens").asInt());
    }
}
