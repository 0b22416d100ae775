package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * One OpenAI contract in front of engines that disagree on it (issue #13; rows of
 * shared/reviews/openai-contract-2026-12-01.md, listed in docs/openai-contract.md): the same request goes through a
 * vLLM rule and an SGLang rule of one gateway, each over its engine's simulator (which answers as that engine does,
 * see {@code EngineDivergenceTest}), and the client must see the same status, {@code type}, {@code code} and
 * {@code param} from both.
 */
@Tag("system")
@Timeout(60)
class OpenAiContractSystemTest {
    static EngineSimulator vllm;
    static EngineSimulator sglang;
    /** The same engines with the model's real tokenizer and template, behind rules that tokenize (row 1 text prompts). */
    static EngineSimulator vllmTok;
    static EngineSimulator sglangTok;
    /** As the two above, behind rules with {@code on_context_overflow: clamp}. */
    static EngineSimulator vllmClamp;
    static EngineSimulator sglangClamp;
    static Gateway gw;
    /** The client's model name per rule: each simulator serves its own name (vLLM 404s any other). */
    static final String VLLM_MODEL = "mv";
    static final String SGLANG_MODEL = "ms";
    static final String VLLM_TOK_MODEL = "tv";
    static final String SGLANG_TOK_MODEL = "ts";
    static final String VLLM_CLAMP_MODEL = "cv";
    static final String SGLANG_CLAMP_MODEL = "cs";
    /** Client names served as each simulator's name (served_as): the engine must get its own name, the client this. */
    static final String VLLM_ALIAS = "gpt-4o-mini";
    static final String SGLANG_ALIAS = "gpt-4o";
    /** Client names of the greedy_n: reject rules (aliases of each simulator's model). */
    static final String VLLM_REJECT = "rv";
    static final String SGLANG_REJECT = "rs";
    /** Every rule's name: their context length (64, stated by the engines) is discovered, none is configured. */
    static final List<String> RULES = List.of("on-vllm", "on-sglang", "tok-vllm", "tok-sglang", "clamp-vllm", "clamp-sglang");

    @BeforeAll
    static void start() throws Exception {
        Path qwen3 = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/models/qwen3");
        vllm = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model(VLLM_MODEL).contextLen(64));
        sglang = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model(SGLANG_MODEL).contextLen(64));
        vllmTok = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model(VLLM_TOK_MODEL).modelDir(qwen3).contextLen(64));
        sglangTok = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model(SGLANG_TOK_MODEL).modelDir(qwen3).contextLen(64));
        vllmClamp = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model(VLLM_CLAMP_MODEL).modelDir(qwen3).contextLen(64));
        sglangClamp = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model(SGLANG_CLAMP_MODEL).modelDir(qwen3).contextLen(64));
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 5000}
            health: {interval_ms: 500, timeout_ms: 5000}
            rules:
              - name: on-vllm
                models: [%s, {name: %s, served_as: %s}]
                engine: vllm
                endpoints: [{url: "%s"}]
              - name: on-sglang
                models: [%s, {name: %s, served_as: %s}]
                engine: sglang
                endpoints: [{url: "%s"}]
              - name: tok-vllm
                models: [%s]
                engine: vllm
                tokenizer: %s
                endpoints: [{url: "%s"}]
              - name: tok-sglang
                models: [%s]
                engine: sglang
                tokenizer: %s
                endpoints: [{url: "%s"}]
              - name: clamp-vllm
                models: [%s]
                engine: vllm
                tokenizer: %s
                on_context_overflow: clamp
                endpoints: [{url: "%s"}]
              - name: clamp-sglang
                models: [%s]
                engine: sglang
                tokenizer: %s
                on_context_overflow: clamp
                endpoints: [{url: "%s"}]
              - name: vllm-greedy-reject
                models: [{name: %s, served_as: %s}]
                engine: vllm
                greedy_n: reject
                endpoints: [{url: "%s"}]
              - name: sglang-greedy-reject
                models: [{name: %s, served_as: %s}]
                engine: sglang
                greedy_n: reject
                endpoints: [{url: "%s"}]
            """.formatted(VLLM_MODEL, VLLM_ALIAS, VLLM_MODEL, vllm.baseUrl(), SGLANG_MODEL, SGLANG_ALIAS, SGLANG_MODEL,
            sglang.baseUrl(), VLLM_TOK_MODEL, qwen3, vllmTok.baseUrl(),
            SGLANG_TOK_MODEL, qwen3, sglangTok.baseUrl(), VLLM_CLAMP_MODEL, qwen3, vllmClamp.baseUrl(),
            SGLANG_CLAMP_MODEL, qwen3, sglangClamp.baseUrl(), VLLM_REJECT, VLLM_MODEL, vllm.baseUrl(), SGLANG_REJECT,
            SGLANG_MODEL, sglang.baseUrl())));
        // The model probe reads each engine's max_model_len from GET /v1/models, every health interval (a round that
        // times out on a loaded machine is followed by the next).
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!RULES.stream().allMatch(r -> gw.metrics().render().contains("kvgate_rule_context_length{rule=\"" + r + "\"} 64"))) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("context lengths not discovered: " + gw.engineReadiness().waitingFor());
            }
            Thread.sleep(20);
        }
    }

    @AfterAll
    static void stop() {
        if (gw != null) {
            gw.close(100);
        }
        vllm.close();
        sglang.close();
        vllmTok.close();
        sglangTok.close();
        vllmClamp.close();
        sglangClamp.close();
    }

    static HttpResponse<String> send(String method, String path, String body) throws Exception {
        return SimRecords.send(gw.port(), method, path, body);
    }

    /** What a client sees of an error answer: status and the error object's type, code and param. */
    record Seen(int status, String type, String code, String param) {
        static Seen of(int status, JsonNode error) {
            return new Seen(status, text(error.get("type")), text(error.get("code")), text(error.get("param")));
        }

        private static String text(JsonNode n) {
            return n == null || n.isNull() ? null : n.asText();
        }
    }

    /** Sends {@code body} (with {@code %MODEL%} replaced) through both rules; returns what each client saw, vLLM first. */
    static List<HttpResponse<String>> both(String path, String body) throws Exception {
        return both(VLLM_MODEL, SGLANG_MODEL, path, body);
    }

    /** As {@link #both(String, String)} through the rules serving {@code vllmModel} and {@code sglangModel}. */
    static List<HttpResponse<String>> both(String vllmModel, String sglangModel, String path, String body) throws Exception {
        List<HttpResponse<String>> out = new ArrayList<>();
        for (String model : new String[] {vllmModel, sglangModel}) {
            out.add(send("POST", path, body.replace("%MODEL%", model)));
        }
        return out;
    }

    /** Asserts both engines' answers look the same to the client and returns that. */
    static Seen sameErrorFromBoth(String path, String body) throws Exception {
        return sameErrorFromBoth(both(path, body));
    }

    static Seen sameErrorFromBoth(List<HttpResponse<String>> r) throws Exception {
        Seen v = Seen.of(r.get(0).statusCode(), SimHttp.MAPPER.readTree(r.get(0).body()).path("error"));
        Seen s = Seen.of(r.get(1).statusCode(), SimHttp.MAPPER.readTree(r.get(1).body()).path("error"));
        assertEquals(v, s, "vLLM rule: " + r.get(0).body() + "\nSGLang rule: " + r.get(1).body());
        assertFalse(SimHttp.MAPPER.readTree(r.get(0).body()).path("error").path("message").asText().isEmpty());
        return v;
    }

    /** The {@code data:} payloads of an SSE body, as JSON ({@code [DONE]} left out; asserted to be the last). */
    static List<JsonNode> events(String sse) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        String[] parts = sse.split("\n\n");
        assertEquals("data: [DONE]", parts[parts.length - 1], sse);
        for (int i = 0; i < parts.length - 1; i++) {
            assertTrue(parts[i].startsWith("data: "), sse);
            out.add(SimHttp.MAPPER.readTree(parts[i].substring(6)));
        }
        return out;
    }


    /** (index, content delta or text, finish_reason) of each choice event of a stream, in order. */
    static List<String> choiceEvents(List<JsonNode> events) {
        List<String> out = new ArrayList<>();
        for (JsonNode e : events) {
            for (JsonNode c : e.path("choices")) {
                String piece = c.has("delta") ? c.path("delta").path("content").asText("") : c.path("text").asText("");
                out.add(c.path("index").asInt() + ":" + piece + ":" + c.path("finish_reason").asText("-"));
            }
        }
        return out;
    }

    static JsonNode usageChunkOnly(List<JsonNode> events) {
        List<JsonNode> usage = events.stream().filter(e -> e.path("choices").isArray() && e.path("choices").isEmpty()
            && e.path("usage").isObject()).toList();
        assertEquals(1, usage.size(), "exactly one usage chunk: " + events);
        return usage.get(0).get("usage");
    }

    static String chat(String extra) {
        return "{\"model\":\"%MODEL%\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]" + extra + "}";
    }

    static String completion(int promptWords, String extra) {
        return "{\"model\":\"%MODEL%\",\"prompt\":\"" + "w ".repeat(promptWords - 1) + "w\"" + extra + "}";
    }

    // review row 22
    @Test
    void streamOptionsWithoutStreamIsTheSame400() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "stream_options"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"stream_options\":{\"include_usage\":true}")));
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "stream_options"),
            sameErrorFromBoth("/v1/completions", completion(3, ",\"stream_options\":{\"include_usage\":true}")));
    }

    // review row 6
    @Test
    void topLogprobsWithoutLogprobsIsTheSame400() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "top_logprobs"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"top_logprobs\":3")));
    }

    // max_tokens <= 0: vLLM 400, SGLang chat an empty 200 (0) or its own 400 (-1)
    @Test
    void maxTokensBelowOneIsTheSame400() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "integer_below_min_value", "max_tokens"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"max_tokens\":0")));
        assertEquals(new Seen(400, "invalid_request_error", "integer_below_min_value", "max_tokens"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"max_tokens\":-1")));
        assertEquals(new Seen(400, "invalid_request_error", "integer_below_min_value", "max_completion_tokens"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"max_completion_tokens\":0")));
        assertEquals(new Seen(400, "invalid_request_error", "integer_below_min_value", "max_tokens"),
            sameErrorFromBoth("/v1/completions", completion(3, ",\"max_tokens\":0")));
    }

    // review row 2: the engines' own 400s in their own words, one code
    @Test
    void promptLongerThanTheContextIsContextLengthExceededFromBoth() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "context_length_exceeded", "prompt"),
            sameErrorFromBoth("/v1/completions", completion(70, "")));
        List<HttpResponse<String>> r = both("/v1/completions", completion(70, ""));
        assertEquals("Input length (70) exceeds model's maximum context length (64).",
            SimHttp.MAPPER.readTree(r.get(0).body()).at("/error/message").asText(), "the engine's message is kept");
        assertEquals("The input (70 tokens) is longer than the model's context length (64 tokens).",
            SimHttp.MAPPER.readTree(r.get(1).body()).at("/error/message").asText());
    }

    // review rows 19 and 26: unknown model
    @Test
    void unknownModelIsModelNotFound() throws Exception {
        HttpResponse<String> r = send("POST", "/v1/chat/completions", chat("").replace("%MODEL%", "gpt-nope"));
        assertEquals(new Seen(404, "invalid_request_error", "model_not_found", "model"),
            Seen.of(r.statusCode(), SimHttp.MAPPER.readTree(r.body()).path("error")));
    }

    // review row 21
    @Test
    void retrieveModelAnswersFromTheRules() throws Exception {
        for (String m : new String[] {VLLM_MODEL, SGLANG_MODEL}) {
            HttpResponse<String> r = send("GET", "/v1/models/" + m, null);
            assertEquals(200, r.statusCode(), r.body());
            JsonNode b = SimHttp.MAPPER.readTree(r.body());
            assertEquals(m, b.get("id").asText());
            assertEquals("model", b.get("object").asText());
        }
        HttpResponse<String> missing = send("GET", "/v1/models/org%2Fother", null);
        assertEquals(404, missing.statusCode());
        assertEquals("{\"error\":{\"message\":\"The model `org/other` does not exist.\",\"type\":\"invalid_request_error\","
            + "\"param\":\"model\",\"code\":\"model_not_found\"}}", missing.body());
        assertEquals(400, send("GET", "/v1/models/%C3%28", null).statusCode(), "not UTF-8");
    }

    // review row 26: an engine's error answer of each shape, the engine's status and message kept
    @Test
    void engineErrorsOfEitherShapeBecomeOneVocabulary() throws Exception {
        vllm.injectFaults("{\"fail_next\":1,\"status\":503,\"message\":\"engine overloaded\"}");
        sglang.injectFaults("{\"fail_next\":1,\"status\":503,\"message\":\"engine overloaded\"}");
        assertEquals(new Seen(503, "server_error", null, null), sameErrorFromBoth("/v1/chat/completions", chat("")));
        // a 400 both engines raise in their own shape and type name (here: a tool_choice without tools)
        assertEquals(new Seen(400, "invalid_request_error", null, "tool_choice"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"tool_choice\":\"required\"")));
    }

    // review row 24: an engine's in-stream error event
    @Test
    void inStreamEngineErrorIsReshapedAndCountedAsAStreamError() throws Exception {
        vllm.injectFaults("{\"error_after_chunks\":1}");
        sglang.injectFaults("{\"error_after_chunks\":1}");
        List<HttpResponse<String>> r = both("/v1/chat/completions", chat(",\"stream\":true,\"max_tokens\":5"));
        String want = "data: {\"error\":{\"message\":\"simulated engine failure mid-stream\",\"type\":\"server_error\","
            + "\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n";
        for (HttpResponse<String> s : r) {
            assertEquals(200, s.statusCode(), "the status is frozen once the stream started");
            assertTrue(s.body().endsWith(want), s.body());
        }
        String metrics = gw.metrics().render();
        assertTrue(metrics.contains("kvgate_requests_total{model=\"mv\",rule=\"on-vllm\",status=\"stream_error\"}"), metrics);
        assertTrue(metrics.contains("kvgate_requests_total{model=\"ms\",rule=\"on-sglang\",status=\"stream_error\"}"), metrics);
    }

    @Test
    void aStreamEndingWithoutDoneGetsAnErrorEventAndDone() throws Exception {
        vllm.injectFaults("{\"end_without_done\":1}");
        sglang.injectFaults("{\"end_without_done\":1}");
        for (HttpResponse<String> s : both("/v1/chat/completions", chat(",\"stream\":true,\"max_tokens\":3"))) {
            assertEquals(200, s.statusCode());
            assertTrue(s.body().contains("\"finish_reason\":\"length\""), s.body());
            assertTrue(s.body().endsWith("data: {\"error\":{\"message\":\"The engine ended the stream without [DONE]: the "
                + "answer may be incomplete.\",\"type\":\"server_error\",\"param\":null,\"code\":\"stream_truncated\"}}"
                + "\n\ndata: [DONE]\n\n"), s.body());
        }
        // a complete stream is relayed as the engine sent it
        for (HttpResponse<String> s : both("/v1/chat/completions", chat(",\"stream\":true,\"max_tokens\":3"))) {
            assertTrue(s.body().endsWith("data: [DONE]\n\n"), s.body());
            assertFalse(s.body().contains("\"error\""), s.body());
        }
    }

    static String tokenIds(int n) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < n; i++) {
            b.append(i == 0 ? "" : ",").append(100 + i);
        }
        return b.append(']').toString();
    }

    /** The engines' generations so far (every engine of this class): a request the gateway refused starts none. */
    static long generations() {
        return vllm.stats().get("generations_started") + sglang.stats().get("generations_started")
            + vllmTok.stats().get("generations_started") + sglangTok.stats().get("generations_started")
            + vllmClamp.stats().get("generations_started") + sglangClamp.stats().get("generations_started");
    }

    // review row 1, on_context_overflow: reject (the default): prompt fits, prompt + budget does not
    @Test
    void contextOverflowIsTheSame400FromBothBeforeAnyEngine() throws Exception {
        long before = generations();
        Seen chat = new Seen(400, "invalid_request_error", "context_length_exceeded", "messages");
        Seen completions = new Seen(400, "invalid_request_error", "context_length_exceeded", "prompt");
        // Rules with the model's tokenizer count chat and text prompts exactly as the engines do...
        List<HttpResponse<String>> r = both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, "/v1/chat/completions", chat(",\"max_tokens\":100"));
        assertEquals(chat, sameErrorFromBoth(r));
        String message = SimHttp.MAPPER.readTree(r.get(0).body()).at("/error/message").asText();
        assertTrue(message.matches("This model's maximum context length is 64 tokens\\. However, you requested \\d+ tokens "
            + "\\(\\d+ in the messages, 100 in the completion\\)\\. Please reduce the length of the messages or completion\\."),
            message);
        assertEquals(message, SimHttp.MAPPER.readTree(r.get(1).body()).at("/error/message").asText(), "one message too");
        assertEquals(chat, sameErrorFromBoth(both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, "/v1/chat/completions",
            chat(",\"max_tokens\":5,\"max_completion_tokens\":100"))), "max_completion_tokens is the budget both read");
        assertEquals(completions, sameErrorFromBoth(both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, "/v1/completions",
            completion(10, ",\"max_tokens\":100"))));
        assertEquals(completions, sameErrorFromBoth(both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, "/v1/completions",
            completion(70, ""))), "the prompt alone");
        // ...and token-id prompts are counted on every rule.
        List<HttpResponse<String>> ids = both("/v1/completions",
            "{\"model\":\"%MODEL%\",\"prompt\":" + tokenIds(10) + ",\"max_tokens\":100}");
        assertEquals(completions, sameErrorFromBoth(ids));
        assertEquals("This model's maximum context length is 64 tokens. However, you requested 110 tokens (10 in the prompt,"
            + " 100 in the completion). Please reduce the length of the prompt or completion.",
            SimHttp.MAPPER.readTree(ids.get(1).body()).at("/error/message").asText());
        assertEquals(before, generations(), "no engine saw any of them");
        // At the boundary both serve it: 10 + 54 = 64 (SGLang, which refuses that, gets one token less).
        for (HttpResponse<String> ok : both("/v1/completions", "{\"model\":\"%MODEL%\",\"prompt\":" + tokenIds(10)
            + ",\"max_tokens\":54}")) {
            assertEquals(200, ok.statusCode(), ok.body());
        }
    }

    // review row 1, on_context_overflow: clamp: the budget is lowered to what fits, as vLLM does on its own
    @Test
    void clampGivesBothA200CutAtTheContext() throws Exception {
        for (List<HttpResponse<String>> r : List.of(
            both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/chat/completions", chat(",\"max_tokens\":100")),
            both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/chat/completions", chat(",\"max_completion_tokens\":4096,\"stream\":false")),
            both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/completions", completion(10, ",\"max_tokens\":100")),
            both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/completions",
                "{\"model\":\"%MODEL%\",\"prompt\":" + tokenIds(10) + ",\"max_tokens\":100}"))) {
            for (HttpResponse<String> one : r) {
                assertEquals(200, one.statusCode(), one.body());
                JsonNode b = SimHttp.MAPPER.readTree(one.body());
                assertEquals("length", b.at("/choices/0/finish_reason").asText(), one.body());
                int prompt = b.at("/usage/prompt_tokens").asInt();
                int completion = b.at("/usage/completion_tokens").asInt();
                assertTrue(completion > 0 && prompt + completion <= 64, "within the context: " + one.body());
            }
            int vllmCompletion = SimHttp.MAPPER.readTree(r.get(0).body()).at("/usage/completion_tokens").asInt();
            int sglangCompletion = SimHttp.MAPPER.readTree(r.get(1).body()).at("/usage/completion_tokens").asInt();
            int prompt = SimHttp.MAPPER.readTree(r.get(0).body()).at("/usage/prompt_tokens").asInt();
            assertEquals(64 - prompt, vllmCompletion, "the clamped budget: context - prompt");
            assertEquals(vllmCompletion - 1, sglangCompletion, "SGLang keeps one token of the context free");
        }
        // A prompt that leaves no room is the same 400 under clamp too.
        assertEquals(new Seen(400, "invalid_request_error", "context_length_exceeded", "prompt"),
            sameErrorFromBoth(both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/completions",
                "{\"model\":\"%MODEL%\",\"prompt\":" + tokenIds(64) + "}")));
        assertTrue(gw.metrics().render().contains("kvgate_context_clamped_total{rule=\"clamp-sglang\"}"));
    }

    // review row 1 where the gateway cannot count: a text prompt on a rule without a tokenizer is the engine's to
    // judge, and the engines still differ — vLLM clamps, SGLang's 400 arrives in the vocabulary with the same code
    @Test
    void withoutATokenizerATextOverflowIsTheEnginesToJudge() throws Exception {
        List<HttpResponse<String>> overflow = both("/v1/completions", completion(10, ",\"max_tokens\":100"));
        assertEquals(200, overflow.get(0).statusCode(), "vLLM clamps");
        assertEquals(new Seen(400, "invalid_request_error", "context_length_exceeded", "prompt"),
            Seen.of(overflow.get(1).statusCode(), SimHttp.MAPPER.readTree(overflow.get(1).body()).path("error")),
            "SGLang's 400, in the vocabulary");
    }

    // review row 3: n > 1 at temperature 0 (vLLM 400s it, SGLang answers n identical choices)
    @Test
    void greedyNGetsTheSameChoicesIndicesAndUsageFromBoth() throws Exception {
        for (String path : new String[] {"/v1/completions", "/v1/chat/completions"}) {
            String body = path.contains("chat") ? chat(",\"n\":3,\"temperature\":0,\"max_tokens\":4")
                : completion(3, ",\"n\":3,\"temperature\":0,\"max_tokens\":4");
            List<HttpResponse<String>> r = both(path, body);
            JsonNode v = SimHttp.MAPPER.readTree(r.get(0).body());
            JsonNode s = SimHttp.MAPPER.readTree(r.get(1).body());
            assertEquals(200, r.get(0).statusCode(), r.get(0).body());
            assertEquals(200, r.get(1).statusCode(), r.get(1).body());
            assertEquals(1, SimRecords.lastRequest(vllm).get("n").asInt(), "vLLM is asked for one greedy choice");
            assertEquals(3, SimRecords.lastRequest(sglang).get("n").asInt(), "SGLang answers n itself");
            for (JsonNode a : List.of(v, s)) {
                assertEquals(3, a.get("choices").size(), a.toString());
                for (int i = 0; i < 3; i++) {
                    assertEquals(i, a.get("choices").get(i).get("index").asInt(), a.toString());
                    assertEquals(a.get("choices").get(0).path("text"), a.get("choices").get(i).path("text"));
                    assertEquals(a.get("choices").get(0).path("message").path("content"),
                        a.get("choices").get(i).path("message").path("content"), "greedy choices are identical");
                }
            }
            for (String k : new String[] {"prompt_tokens", "completion_tokens", "total_tokens"}) {
                assertEquals(s.at("/usage/" + k), v.at("/usage/" + k), k + ": " + v + "\n" + s);
            }
            assertEquals(12, v.at("/usage/completion_tokens").asInt(), "4 tokens × 3 choices");
        }
    }

    @Test
    void greedyNStreamsGetTheSameEventsAndUsageFromBoth() throws Exception {
        for (String path : new String[] {"/v1/completions", "/v1/chat/completions"}) {
            String extra = ",\"n\":2,\"temperature\":0,\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}";
            List<HttpResponse<String>> r = both(path, path.contains("chat") ? chat(extra) : completion(3, extra));
            List<JsonNode> v = events(r.get(0).body());
            List<JsonNode> s = events(r.get(1).body());
            assertEquals(choiceEvents(s), choiceEvents(v), "the same choice events, index by index, in order:\n"
                + r.get(0).body() + "\n" + r.get(1).body());
            assertTrue(choiceEvents(v).stream().anyMatch(e -> e.startsWith("1:")), "both indices stream");
            JsonNode vu = usageChunkOnly(v);
            JsonNode su = usageChunkOnly(s);
            for (String k : new String[] {"prompt_tokens", "completion_tokens", "total_tokens"}) {
                assertEquals(su.get(k), vu.get(k), k + ": " + vu + " vs " + su);
            }
            assertEquals(6, vu.get("completion_tokens").asInt());
        }
    }

    @Test
    void greedyNRejectIsTheSame400FromBoth() throws Exception {
        String want = "{\"error\":{\"message\":\"n must be 1 when using greedy sampling.\",\"type\":\"invalid_request_error\","
            + "\"param\":\"n\",\"code\":\"invalid_value\"}}";
        long before = generations(vllm) + generations(sglang);
        for (String path : new String[] {"/v1/completions", "/v1/chat/completions"}) {
            String body = path.contains("chat") ? chat(",\"n\":2,\"temperature\":0") : completion(3, ",\"n\":2,\"temperature\":0.0");
            for (HttpResponse<String> r : both(VLLM_REJECT, SGLANG_REJECT, path, body)) {
                assertEquals(400, r.statusCode(), r.body());
                assertEquals(want, r.body());
            }
        }
        assertEquals(before, generations(vllm) + generations(sglang), "no engine saw them");
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "n"),
            sameErrorFromBoth("/v1/chat/completions", chat(",\"n\":2,\"temperature\":0").replace("%MODEL%", VLLM_REJECT)));
        // not greedy, or one choice: accepted by the reject rules
        for (HttpResponse<String> r : both(VLLM_REJECT, SGLANG_REJECT, "/v1/completions",
            completion(3, ",\"n\":2,\"temperature\":0.7,\"max_tokens\":2"))) {
            assertEquals(200, r.statusCode(), r.body());
        }
    }

    // every body edit at once: a client-sent engine-internal member removed, the budget clamped in place, usage forced
    @Test
    void aClampedStreamWithEngineFieldsStillGetsForcedUsageSplicedCorrectly() throws Exception {
        List<HttpResponse<String>> r = both(VLLM_CLAMP_MODEL, SGLANG_CLAMP_MODEL, "/v1/chat/completions",
            chat(",\"kv_transfer_params\":{\"remote_host\":\"10.9.9.9\"},\"max_tokens\":1000,\"stream\":true"));
        for (HttpResponse<String> one : r) {
            assertEquals(200, one.statusCode(), one.body());
            List<JsonNode> ev = events(one.body());
            assertTrue(ev.stream().noneMatch(e -> e.path("usage").isObject()), "the forced usage chunk is removed: " + one.body());
            assertTrue(choiceEvents(ev).stream().anyMatch(e -> e.endsWith(":length")), "cut at the context: " + one.body());
        }
        assertTrue(SimRecords.lastRequest(vllmClamp).get("include_usage").asBoolean(), "the engine got the merged stream_options");
        assertTrue(SimRecords.lastRequest(sglangClamp).get("include_usage").asBoolean());
    }

    // item 4: model aliases (served_as)
    @Test
    void anAliasReachesTheEngineAsItsServedNameAndTheClientSeesItsOwnName() throws Exception {
        List<HttpResponse<String>> json = both(VLLM_ALIAS, SGLANG_ALIAS, "/v1/chat/completions", chat(",\"max_tokens\":3"));
        assertEquals(VLLM_ALIAS, SimHttp.MAPPER.readTree(json.get(0).body()).get("model").asText(), json.get(0).body());
        assertEquals(SGLANG_ALIAS, SimHttp.MAPPER.readTree(json.get(1).body()).get("model").asText(), json.get(1).body());
        assertEquals(VLLM_MODEL, SimRecords.lastRequest(vllm).get("model").asText(), "vLLM 404s any name it does not serve");
        assertEquals(SGLANG_MODEL, SimRecords.lastRequest(sglang).get("model").asText());
        List<HttpResponse<String>> streams = both(VLLM_ALIAS, SGLANG_ALIAS, "/v1/completions",
            completion(3, ",\"max_tokens\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}"));
        String[] names = {VLLM_ALIAS, SGLANG_ALIAS};
        for (int e = 0; e < 2; e++) {
            List<JsonNode> ev = events(streams.get(e).body());
            assertTrue(ev.size() >= 3, streams.get(e).body());
            for (JsonNode chunk : ev) {
                assertEquals(names[e], chunk.get("model").asText(), "every chunk: " + streams.get(e).body());
            }
        }
        HttpResponse<String> list = send("GET", "/v1/models", null);
        List<String> ids = new ArrayList<>();
        SimHttp.MAPPER.readTree(list.body()).get("data").forEach(m -> ids.add(m.get("id").asText()));
        assertTrue(ids.containsAll(List.of(VLLM_MODEL, VLLM_ALIAS, SGLANG_MODEL, SGLANG_ALIAS, VLLM_REJECT)), ids.toString());
        assertEquals(200, send("GET", "/v1/models/" + VLLM_ALIAS, null).statusCode());
        String series = "kvgate_requests_total{model=\"" + VLLM_ALIAS + "\",rule=\"on-vllm\",status=\"200\"}";
        long deadline = System.nanoTime() + 5_000_000_000L; // recorded just after the last bytes went out
        while (!gw.metrics().render().contains(series) && System.nanoTime() < deadline) {
            java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L);
        }
        assertTrue(gw.metrics().render().contains(series), "metrics label the client's name");
    }

    // review row 23 / item 5: forced include_usage, stripped unless asked; kvgate_tokens_total
    @Test
    void usageIsForcedForTokenMetricsAndReachesOnlyClientsThatAskedForIt() throws Exception {
        String before = gw.metrics().render();
        List<HttpResponse<String>> plain = both("/v1/chat/completions", chat(",\"max_tokens\":3,\"stream\":true"));
        for (HttpResponse<String> r : plain) {
            List<JsonNode> ev = events(r.body());
            assertTrue(ev.stream().noneMatch(e -> e.path("usage").isObject()), "no usage chunk: " + r.body());
            assertTrue(ev.stream().allMatch(e -> e.path("choices").size() > 0), r.body());
        }
        assertTrue(SimRecords.lastRequest(vllm).get("include_usage").asBoolean(), "the engines were asked for usage");
        assertTrue(SimRecords.lastRequest(sglang).get("include_usage").asBoolean());
        assertTrue(plain.get(1).body().contains("\"usage\":null"), "SGLang's own per-chunk nulls are its wire: kept");
        // vLLM's StreamOptions defaults include_usage to true once the object is present; OpenAI's does not
        for (HttpResponse<String> r : both("/v1/chat/completions", chat(",\"max_tokens\":3,\"stream\":true,\"stream_options\":{}"))) {
            assertTrue(events(r.body()).stream().noneMatch(e -> e.path("usage").isObject()), r.body());
        }
        List<HttpResponse<String>> asked = both("/v1/chat/completions", chat(",\"max_tokens\":3,\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true}"));
        JsonNode vu = usageChunkOnly(events(asked.get(0).body()));
        JsonNode su = usageChunkOnly(events(asked.get(1).body()));
        assertEquals(3, vu.get("completion_tokens").asInt());
        assertEquals(su.get("prompt_tokens"), vu.get("prompt_tokens"));
        for (String rule : new String[] {"on-vllm", "on-sglang"}) {
            String model = rule.equals("on-vllm") ? VLLM_MODEL : SGLANG_MODEL;
            String series = "kvgate_tokens_total{kind=\"completion\",model=\"" + model + "\",rule=\"" + rule + "\"} ";
            // The exchange records its metrics just after the last bytes went out: wait for that, bounded.
            long deadline = System.nanoTime() + 5_000_000_000L;
            String after = gw.metrics().render();
            while (counter(after, series) < counter(before, series) + 9 && System.nanoTime() < deadline) {
                java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L);
                after = gw.metrics().render();
            }
            assertTrue(counter(after, series) >= counter(before, series) + 9, "3 streams of 3 tokens each: " + series + after);
            String prompt = "kvgate_tokens_total{kind=\"prompt\",model=\"" + model + "\",rule=\"" + rule + "\"} ";
            assertTrue(counter(after, prompt) > counter(before, prompt), prompt);
            assertTrue(after.contains("kvgate_tokens_total{kind=\"cached\",model=\"" + model + "\",rule=\"" + rule + "\"} "));
        }
    }

    static long generations(EngineSimulator sim) {
        return sim.stats().get("chat_requests") + sim.stats().get("completion_requests");
    }

    private static double counter(String metrics, String series) {
        for (String line : metrics.split("\n")) {
            if (line.startsWith(series)) {
                return Double.parseDouble(line.substring(series.length()).strip());
            }
        }
        return 0;
    }
}
