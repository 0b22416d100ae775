package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.ContextCheck;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Each engine's side of the OpenAI-contract divergences (shared/reviews/openai-contract-2026-12-01.md), with the
 * exact status and body each engine answers, so gateway tests can run the same request over both dialects.
 * Row numbers refer to the review's divergence table.
 */
@Timeout(60)
@Tag("system")
class EngineDivergenceTest {
    static EngineSimulator vllm;
    static EngineSimulator vllmReject;
    static EngineSimulator sglang;

    @BeforeAll
    static void start() {
        vllm = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).contextLen(64));
        vllmReject = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).contextLen(64)
            .vllmContextCheck(ContextCheck.REJECT));
        sglang = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).contextLen(64));
    }

    @AfterAll
    static void stop() {
        vllm.close();
        vllmReject.close();
        sglang.close();
    }

    static String words(int n) {
        return "w ".repeat(n - 1) + "w";
    }

    static String completion(int promptWords, String extra) {
        return "{\"model\":\"m\",\"prompt\":\"" + words(promptWords) + "\"" + (extra.isEmpty() ? "" : "," + extra) + "}";
    }

    // #1: prompt fits, prompt + max_tokens does not
    @Test
    void row1MaxTokensOverflowClampedByVllmRefusedBySglang() throws Exception {
        JsonNode clamped = json(post(vllm, "/v1/completions", completion(10, "\"max_tokens\":100")));
        assertEquals("length", clamped.at("/choices/0/finish_reason").asText());
        assertEquals(54, clamped.at("/usage/completion_tokens").asInt(), "clamped to 64 - 10");

        HttpResponse<String> s = post(sglang, "/v1/completions", completion(10, "\"max_tokens\":100"));
        assertEquals(400, s.statusCode());
        assertEquals("{\"object\":\"error\",\"message\":\"Requested token count exceeds the model's maximum context "
            + "length of 64 tokens. You requested a total of 110 tokens: 10 tokens from the input messages and 100 "
            + "tokens for the completion. Please reduce the number of tokens in the input messages or the completion "
            + "to fit within the limit.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}", s.body());

        HttpResponse<String> r = post(vllmReject, "/v1/completions", completion(10, "\"max_tokens\":100"));
        assertEquals(400, r.statusCode());
        assertEquals("{\"error\":{\"message\":\"'max_tokens' or 'max_completion_tokens' is too large: 100. This model's "
            + "maximum context length is 64 tokens and your request has 10 input tokens (100 > 64 - 10).\","
            + "\"type\":\"BadRequestError\",\"param\":\"max_tokens\",\"code\":400}}", r.body());
    }

    // #1 at the boundary: prompt + max_tokens = context
    @Test
    void row1SglangRefusesTheLastTokenOfTheContextVllmServesIt() throws Exception {
        JsonNode v = json(post(vllm, "/v1/completions", completion(10, "\"max_tokens\":54")));
        assertEquals(54, v.at("/usage/completion_tokens").asInt(), "10 + 54 = 64 fits vLLM");
        HttpResponse<String> s = post(sglang, "/v1/completions", completion(10, "\"max_tokens\":54"));
        assertEquals(400, s.statusCode(), "SGLang refuses input + max_new_tokens >= context_len");
        assertTrue(json(s).get("message").asText().startsWith("Requested token count exceeds the model's maximum context"
            + " length of 64 tokens. You requested a total of 64 tokens"), s.body());
        assertEquals(53, json(post(sglang, "/v1/completions", completion(10, "\"max_tokens\":53")))
            .at("/usage/completion_tokens").asInt());
    }

    // #2: the prompt alone does not fit
    @Test
    void row2PromptLongerThanContext() throws Exception {
        assertEquals("{\"error\":{\"message\":\"Input length (70) exceeds model's maximum context length (64).\","
            + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}",
            post(vllm, "/v1/completions", completion(70, "")).body());
        HttpResponse<String> full = post(vllm, "/v1/completions", completion(64, ""));
        assertEquals(400, full.statusCode(), "a prompt that fills the context leaves max_tokens 0");
        assertEquals("max_tokens must be at least 1, got 0.", json(full).at("/error/message").asText());
        assertEquals("{\"error\":{\"message\":\"This model's maximum context length is 64 tokens. However, your request "
            + "has 64 input tokens. Please reduce the length of the input messages.\",\"type\":\"BadRequestError\","
            + "\"param\":\"input_tokens\",\"code\":400}}", post(vllmReject, "/v1/completions", completion(64, "")).body());
        assertEquals("{\"object\":\"error\",\"message\":\"The input (64 tokens) is longer than the model's context length "
            + "(64 tokens).\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}",
            post(sglang, "/v1/completions", completion(64, "")).body());
    }

    // #3/#5: n > 1 with greedy, and where "greedy" starts per engine
    @Test
    void row5TemperatureFloorsDecideWhatIsGreedy() throws Exception {
        // vLLM raises (0, 0.01) to 0.01: not greedy, so n=2 is fine and the choices differ
        JsonNode v = json(post(vllm, "/v1/completions", completion(3, "\"n\":2,\"temperature\":0.000005,\"max_tokens\":8")));
        assertNotEquals(v.at("/choices/0/text"), v.at("/choices/1/text"));
        HttpResponse<String> zero = post(vllm, "/v1/completions", completion(3, "\"n\":2,\"temperature\":0"));
        assertEquals("{\"error\":{\"message\":\"n must be 1 when using greedy sampling, got 2.\",\"type\":"
            + "\"BadRequestError\",\"param\":\"n\",\"code\":400}}", zero.body());
        // SGLang: below 1e-6 is greedy (n identical choices), 5e-6 is sampled
        JsonNode g = json(post(sglang, "/v1/completions", completion(3, "\"n\":2,\"temperature\":0.0000005,\"max_tokens\":8")));
        assertEquals(g.at("/choices/0/text"), g.at("/choices/1/text"));
        JsonNode s = json(post(sglang, "/v1/completions", completion(3, "\"n\":2,\"temperature\":0.000005,\"max_tokens\":8")));
        assertNotEquals(s.at("/choices/0/text"), s.at("/choices/1/text"));
    }

    // #9: suffix is ignored by vLLM (its docstring says so) and is not a field of SGLang's: both answer 200
    @Test
    void row9SuffixIsIgnoredByBoth() throws Exception {
        for (EngineSimulator sim : new EngineSimulator[] {vllm, sglang}) {
            HttpResponse<String> r = post(sim, "/v1/completions", completion(3, "\"suffix\":\"XYZ\",\"max_tokens\":4"));
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(json(post(sim, "/v1/completions", completion(3, "\"max_tokens\":4"))).at("/choices/0/text"),
                json(r).at("/choices/0/text"), "no text inserted, the answer is the one without suffix");
        }
    }

    // #11: the same switch under two names; each engine reads only its own, and names the stop in its own field
    @Test
    void row11EachEngineKeepsTheStopStringOnlyUnderItsOwnName() throws Exception {
        for (EngineSimulator sim : new EngineSimulator[] {vllm, sglang}) {
            String text = json(post(sim, "/v1/completions", completion(3, "\"max_tokens\":12"))).at("/choices/0/text").asText();
            String stop = " " + text.split(" ")[3];
            int at = text.indexOf(stop);
            String stopJson = "\"max_tokens\":12,\"stop\":[\"" + stop + "\"]";
            boolean isVllm = sim == vllm;
            String own = isVllm ? "include_stop_str_in_output" : "no_stop_trim";
            String other = isVllm ? "no_stop_trim" : "include_stop_str_in_output";
            JsonNode kept = json(post(sim, "/v1/completions", completion(3, stopJson + ",\"" + own + "\":true")));
            assertEquals(text.substring(0, at + stop.length()), kept.at("/choices/0/text").asText(), own);
            JsonNode ignored = json(post(sim, "/v1/completions", completion(3, stopJson + ",\"" + other + "\":true")));
            assertEquals(text.substring(0, at), ignored.at("/choices/0/text").asText(), other + " is not this engine's");
            assertEquals(stop, kept.at(isVllm ? "/choices/0/stop_reason" : "/choices/0/matched_stop").asText());
            assertTrue(kept.at(isVllm ? "/choices/0/matched_stop" : "/choices/0/stop_reason").isMissingNode());
        }
    }

    // #16: vLLM refuses a json_schema response_format without its json_schema; SGLang's doc is silent (no check)
    @Test
    void row16ResponseFormatWithoutJsonSchema() throws Exception {
        String rf = "\"response_format\":{\"type\":\"json_schema\"},\"max_tokens\":2";
        assertEquals("{\"error\":{\"message\":\"When response_format type is 'json_schema', the 'json_schema' field must"
            + " be provided.\",\"type\":\"BadRequestError\",\"param\":\"response_format\",\"code\":400}}",
            post(vllm, "/v1/chat/completions", chat("m", "hi", rf)).body());
        assertEquals(200, post(sglang, "/v1/chat/completions", chat("m", "hi", rf)).statusCode());
        assertEquals(200, post(vllm, "/v1/chat/completions", chat("m", "hi",
            "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}},\"max_tokens\":2")).statusCode());
    }

    // #6
    @Test
    void row6TopLogprobsWithoutLogprobs() throws Exception {
        assertEquals(200, post(vllm, "/v1/chat/completions", chat("m", "hi", "\"top_logprobs\":0,\"max_tokens\":1"))
            .statusCode(), "vLLM only refuses -1 or a positive count without logprobs");
        // a request-model validator: vLLM's RequestValidationError handler types it "Bad Request"
        assertEquals("{\"error\":{\"message\":\"Value error, when using `top_logprobs`, `logprobs` must be set to true.\","
            + "\"type\":\"Bad Request\",\"param\":\"top_logprobs\",\"code\":400}}",
            post(vllm, "/v1/chat/completions", chat("m", "hi", "\"top_logprobs\":-1")).body());
        assertEquals("Value error, `top_logprobs` must be a positive value or -1.", json(post(vllm, "/v1/chat/completions",
            chat("m", "hi", "\"top_logprobs\":-2,\"logprobs\":true"))).at("/error/message").asText());
        assertEquals(200, post(sglang, "/v1/chat/completions", chat("m", "hi", "\"top_logprobs\":3,\"max_tokens\":1"))
            .statusCode());
    }

    // #22
    @Test
    void row22StreamOptionsWithoutStream() throws Exception {
        assertEquals("{\"error\":{\"message\":\"Value error, Stream options can only be defined when `stream=True`.\","
            + "\"type\":\"Bad Request\",\"param\":\"stream_options\",\"code\":400}}", post(vllm, "/v1/chat/completions",
            chat("m", "hi", "\"stream_options\":{\"include_usage\":true}")).body());
        assertEquals(200, post(sglang, "/v1/chat/completions",
            chat("m", "hi", "\"stream_options\":{\"include_usage\":true},\"max_tokens\":1")).statusCode());
    }

    @Test
    void maxTokensZeroOrNegative() throws Exception {
        // vLLM: SamplingParams refuses < 1
        assertEquals("max_tokens must be at least 1, got 0.",
            json(post(vllm, "/v1/completions", completion(3, "\"max_tokens\":0"))).at("/error/message").asText());
        // SGLang chat: 0 is accepted (nothing generated), negative is refused
        JsonNode none = json(post(sglang, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":0")));
        assertEquals(0, none.at("/usage/completion_tokens").asInt());
        assertEquals("", none.at("/choices/0/message/content").asText());
        assertEquals("length", none.at("/choices/0/finish_reason").asText());
        assertEquals("{\"object\":\"error\",\"message\":\"max_new_tokens must be at least 0, got -1.\",\"type\":"
            + "\"BadRequestError\",\"param\":null,\"code\":400}",
            post(sglang, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":-1")).body());
        // SGLang completions: the request model's validator, through SGLang's RequestValidationError handler
        HttpResponse<String> c = post(sglang, "/v1/completions", completion(3, "\"max_tokens\":0"));
        assertEquals(400, c.statusCode());
        assertEquals("Bad Request", json(c).get("type").asText());
        assertEquals("max_tokens must be positive", json(c).get("message").asText());
    }

    // #21
    @Test
    void row21RetrieveModel() throws Exception {
        HttpResponse<String> v = get(vllm, "/v1/models/m");
        assertEquals(404, v.statusCode(), "vLLM mounts no retrieve route");
        assertEquals("{\"detail\":\"Not Found\"}", v.body());
        HttpResponse<String> s = get(sglang, "/v1/models/m");
        assertEquals(200, s.statusCode());
        assertEquals("m", json(s).get("id").asText());
        assertEquals(64, json(s).get("max_model_len").asInt());
        HttpResponse<String> missing = get(sglang, "/v1/models/org%2Fother");
        assertEquals(404, missing.statusCode());
        assertEquals("{\"error\":{\"message\":\"The model 'org/other' does not exist\",\"type\":\"invalid_request_error\","
            + "\"param\":\"model\",\"code\":\"model_not_found\"}}", missing.body());
    }

    // #1 discovery: where a gateway learns the context length
    @Test
    void contextLengthDiscoveryRoutes() throws Exception {
        assertEquals(64, json(get(vllm, "/v1/models")).at("/data/0/max_model_len").asInt());
        assertEquals(64, json(get(sglang, "/v1/models")).at("/data/0/max_model_len").asInt());
        assertEquals(64, json(get(sglang, "/get_server_info")).get("context_length").asInt());
        assertEquals(404, get(vllm, "/get_server_info").statusCode());
    }

    @Test
    void configuredContextLengthIsWhatEveryDiscoveryRouteStates() throws Exception {
        try (EngineSimulator v = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).contextLen(32768));
             EngineSimulator s = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).contextLen(2048))) {
            assertEquals(32768, json(get(v, "/v1/models")).at("/data/0/max_model_len").asInt());
            assertEquals(2048, json(get(s, "/v1/models")).at("/data/0/max_model_len").asInt());
            assertEquals(2048, json(get(s, "/get_server_info")).get("context_length").asInt());
        }
    }

    // #26: FastAPI's own shapes for routes and methods the app does not mount
    @Test
    void row26FastApiDetailShapes() throws Exception {
        for (EngineSimulator sim : new EngineSimulator[] {vllm, sglang}) {
            HttpResponse<String> r = get(sim, "/v1/chat/completions");
            assertEquals(405, r.statusCode());
            assertEquals("{\"detail\":\"Method Not Allowed\"}", r.body());
            assertEquals("{\"detail\":\"Not Found\"}", get(sim, "/v2/nothing").body());
        }
    }

    // #24: the engine's own in-stream error frame once the 200 is on the wire
    @Test
    void row24InStreamErrorFramesPerEngine() throws Exception {
        String body = chat("m", "hi", "\"stream\":true,\"max_tokens\":5");
        vllm.injectFaults("{\"error_after_chunks\":1}");
        String v = post(vllm, "/v1/chat/completions", body).body();
        assertTrue(v.endsWith("data: {\"error\":{\"message\":\"simulated engine failure mid-stream\",\"type\":"
            + "\"InternalServerError\",\"param\":null,\"code\":500}}\n\ndata: [DONE]\n\n"), v);
        sglang.injectFaults("{\"error_after_chunks\":1}");
        HttpResponse<String> s = post(sglang, "/v1/chat/completions", body);
        assertEquals(200, s.statusCode(), "the status is frozen once the stream started");
        assertTrue(s.body().endsWith("data: {\"error\":{\"object\":\"error\",\"message\":\"simulated engine failure "
            + "mid-stream\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}\n\ndata: [DONE]\n\n"), s.body());
    }

    @Test
    void streamEndingWithoutDoneIsAFault() throws Exception {
        String body = chat("m", "hi", "\"stream\":true,\"max_tokens\":3");
        vllm.injectFaults("{\"end_without_done\":1}");
        String cut = post(vllm, "/v1/chat/completions", body).body();
        assertFalse(cut.contains("[DONE]"), cut);
        assertTrue(cut.contains("\"finish_reason\":\"length\""), "the stream itself completed: " + cut);
        assertTrue(post(vllm, "/v1/chat/completions", body).body().endsWith("data: [DONE]\n\n"), "one stream only");
    }

    @Test
    void vllmServesAMissingModelFieldAsTheBaseModel() throws Exception {
        HttpResponse<String> r = post(vllm, "/v1/completions", "{\"prompt\":\"hi\",\"max_tokens\":1}");
        assertEquals(200, r.statusCode());
        assertEquals("m", json(r).get("model").asText());
    }

    static HttpResponse<String> getWithMethod(EngineSimulator sim, String path, String method) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + path))
            .timeout(Duration.ofSeconds(20)).method(method, HttpRequest.BodyPublishers.noBody()).build(),
            HttpResponse.BodyHandlers.ofString());
    }
}
