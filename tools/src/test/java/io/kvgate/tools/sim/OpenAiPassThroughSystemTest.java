package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
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
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The rows of docs/openai-contract.md whose answer is "passes through" (issue #13; review rows 4, 7, 8, 10, 12, 15,
 * 25, 28, 30, 31, 34), proven the way every other row is: the same request through a vLLM rule and an SGLang rule
 * of one gateway, each over its engine's simulator, and the client sees the same status, {@code type}, {@code code}
 * and {@code param} — and, for a 200, the shape the row claims. Where the row says the engines receive the field
 * unchanged, the simulators' record of what each engine read is checked too ({@code recent} in {@code /sim/stats}),
 * so a gateway that dropped or rewrote the field would fail here.
 */
@Tag("system")
@Timeout(60)
class OpenAiPassThroughSystemTest {
    static EngineSimulator vllm;
    static EngineSimulator sglang;
    /** The same engines with the model's real tokenizer and template, behind rules that tokenize (rows 31, 34). */
    static EngineSimulator vllmTok;
    static EngineSimulator sglangTok;
    static Gateway gw;
    static final String VLLM_MODEL = "pv";
    static final String SGLANG_MODEL = "ps";
    static final String VLLM_TOK_MODEL = "qv";
    static final String SGLANG_TOK_MODEL = "qs";
    static final String TOOLS = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
        + "\"Weather of a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
        + "\"required\":[\"city\"]}}}]";

    @BeforeAll
    static void start() throws Exception {
        Path qwen3 = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/models/qwen3");
        // Both engines launched with Qwen3's tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser
        // hermes), so a request with tools is served by both (without one vLLM refuses tool_choice "auto": row 18).
        vllm = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model(VLLM_MODEL).toolCallParser("hermes"));
        sglang = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model(SGLANG_MODEL).toolCallParser("qwen25"));
        vllmTok = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model(VLLM_TOK_MODEL).modelDir(qwen3).toolCallParser("hermes"));
        sglangTok = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model(SGLANG_TOK_MODEL).modelDir(qwen3).toolCallParser("qwen25"));
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 5000}
            health: {interval_ms: 500, timeout_ms: 5000}
            rules:
              - name: pass-vllm
                models: [%s]
                engine: vllm
                endpoints: [{url: "%s"}]
              - name: pass-sglang
                models: [%s]
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
            """.formatted(VLLM_MODEL, vllm.baseUrl(), SGLANG_MODEL, sglang.baseUrl(), VLLM_TOK_MODEL, qwen3,
            vllmTok.baseUrl(), SGLANG_TOK_MODEL, qwen3, sglangTok.baseUrl())));
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
    }

    static HttpResponse<String> send(String method, String path, String body) throws Exception {
        return SimRecords.send(gw.port(), method, path, body);
    }

    /** {@code body} (with {@code %MODEL%} replaced) through the rule of each model; vLLM's answer first. */
    static List<HttpResponse<String>> both(String vllmModel, String sglangModel, String path, String body) throws Exception {
        List<HttpResponse<String>> out = new ArrayList<>();
        for (String model : new String[] {vllmModel, sglangModel}) {
            out.add(send("POST", path, body.replace("%MODEL%", model)));
        }
        return out;
    }

    static List<HttpResponse<String>> both(String path, String body) throws Exception {
        return both(VLLM_MODEL, SGLANG_MODEL, path, body);
    }

    /** Both answers are 200 JSON of the route's object; returns them parsed, vLLM's first. */
    static List<JsonNode> bothOk(List<HttpResponse<String>> r, String object) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (HttpResponse<String> one : r) {
            assertEquals(200, one.statusCode(), one.body());
            JsonNode b = SimHttp.MAPPER.readTree(one.body());
            assertEquals(object, b.path("object").asText(), one.body());
            assertTrue(b.path("choices").isArray() && b.path("choices").size() == 1, one.body());
            assertTrue(b.path("usage").path("completion_tokens").isInt(), one.body());
            out.add(b);
        }
        return out;
    }

    /** What a client sees of an error answer. */
    record Seen(int status, String type, String code, String param) {
        static Seen of(HttpResponse<String> r) throws Exception {
            JsonNode e = SimHttp.MAPPER.readTree(r.body()).path("error");
            assertFalse(e.path("message").asText().isEmpty(), r.body());
            return new Seen(r.statusCode(), text(e.get("type")), text(e.get("code")), text(e.get("param")));
        }

        private static String text(JsonNode n) {
            return n == null || n.isNull() ? null : n.asText();
        }
    }

    static Seen sameErrorFromBoth(List<HttpResponse<String>> r) throws Exception {
        Seen v = Seen.of(r.get(0));
        assertEquals(v, Seen.of(r.get(1)), "vLLM rule: " + r.get(0).body() + "\nSGLang rule: " + r.get(1).body());
        return v;
    }

    /** The last request each engine received, as its simulator read it; vLLM's first. */
    static List<JsonNode> received(EngineSimulator v, EngineSimulator s) {
        return List.of(SimRecords.lastRequest(v), SimRecords.lastRequest(s));
    }

    static List<JsonNode> received() {
        return received(vllm, sglang);
    }


    static String chat(String extra) {
        return "{\"model\":\"%MODEL%\",\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}]" + extra + "}";
    }

    static String completion(String extra) {
        return "{\"model\":\"%MODEL%\",\"prompt\":\"once upon a time\"" + extra + "}";
    }

    static String content(JsonNode answer) {
        JsonNode c = answer.at("/choices/0");
        return c.has("message") ? c.path("message").path("content").asText() : c.path("text").asText();
    }

    static long engineRequests(EngineSimulator sim) {
        return sim.stats().get("chat_requests") + sim.stats().get("completion_requests");
    }

    /** The {@code data:} events of an SSE body, in order, {@code [DONE]} included as the text {@code [DONE]}. */
    static List<String> sseData(String body) {
        List<String> out = new ArrayList<>();
        for (String part : body.split("\n\n")) {
            assertTrue(part.startsWith("data: "), "every event is one data line: " + body);
            out.add(part.substring(6));
        }
        return out;
    }

    // review row 4: temperature 0 — vLLM's greedy path, SGLang's rewrite to temperature 1 / top_k 1: greedy in both
    @Test
    void temperatureZeroReachesBothAsIsAndIsGreedyInBoth() throws Exception {
        for (String path : new String[] {"/v1/chat/completions", "/v1/completions"}) {
            String body = path.contains("chat") ? chat(",\"temperature\":0,\"max_tokens\":6") : completion(",\"temperature\":0,\"max_tokens\":6");
            String object = path.contains("chat") ? "chat.completion" : "text_completion";
            List<JsonNode> first = bothOk(both(path, body), object);
            for (JsonNode got : received()) {
                assertEquals(0, got.at("/received/temperature").asDouble(), got.toString());
                assertTrue(got.at("/received/temperature").isIntegralNumber(), "the client's bytes, not a rewritten 0.0: " + got);
                assertTrue(got.get("greedy").asBoolean(), "greedy on the engine: " + got);
            }
            List<JsonNode> again = bothOk(both(path, body), object);
            for (int e = 0; e < 2; e++) {
                assertEquals(content(first.get(e)), content(again.get(e)), "greedy: the same answer twice");
                assertEquals(6, first.get(e).at("/usage/completion_tokens").asInt());
            }
        }
    }

    // review row 7: both engines read `max_completion_tokens or max_tokens`
    @Test
    void maxCompletionTokensWinsOverMaxTokensOnBoth() throws Exception {
        List<JsonNode> a = bothOk(both("/v1/chat/completions", chat(",\"max_tokens\":9,\"max_completion_tokens\":3")),
            "chat.completion");
        for (JsonNode one : a) {
            assertEquals(3, one.at("/usage/completion_tokens").asInt(), one.toString());
            assertEquals("length", one.at("/choices/0/finish_reason").asText());
        }
        for (JsonNode got : received()) {
            assertEquals("max_completion_tokens", got.get("max_tokens_field").asText(), got.toString());
            assertEquals(9, got.at("/received/max_tokens").asInt(), "both fields reach the engine: " + got);
            assertEquals(3, got.at("/received/max_completion_tokens").asInt());
        }
        // max_tokens alone is the budget of both
        for (JsonNode one : bothOk(both("/v1/chat/completions", chat(",\"max_tokens\":4")), "chat.completion")) {
            assertEquals(4, one.at("/usage/completion_tokens").asInt(), one.toString());
        }
    }

    // review row 8: `user` is ignored by both engines; the gateway reads it as a session key and forwards it
    @Test
    void userReachesBothEnginesUnchanged() throws Exception {
        bothOk(both("/v1/chat/completions", chat(",\"user\":\"tenant-42/alice\",\"max_tokens\":2")), "chat.completion");
        for (JsonNode got : received()) {
            assertEquals("tenant-42/alice", got.at("/received/user").asText(), got.toString());
        }
        bothOk(both("/v1/completions", completion(",\"user\":\"bob\",\"max_tokens\":2")), "text_completion");
        for (JsonNode got : received()) {
            assertEquals("bob", got.at("/received/user").asText(), got.toString());
        }
    }

    // review row 10: `seed` is a hint to both (vLLM turns -1 into None)
    @Test
    void seedReachesBothAndMinusOneIsAcceptedByBoth() throws Exception {
        String body = completion(",\"seed\":1234,\"temperature\":0.8,\"max_tokens\":5");
        List<JsonNode> first = bothOk(both("/v1/completions", body), "text_completion");
        for (JsonNode got : received()) {
            assertEquals(1234, got.at("/received/seed").asLong(), got.toString());
            assertEquals(1234, got.get("seed").asLong(), "the engine seeded with it: " + got);
        }
        List<JsonNode> again = bothOk(both("/v1/completions", body), "text_completion");
        for (int e = 0; e < 2; e++) {
            assertEquals(content(first.get(e)), content(again.get(e)), "the same seed, the same text (on this simulator)");
        }
        bothOk(both("/v1/chat/completions", chat(",\"seed\":-1,\"max_tokens\":2")), "chat.completion");
        for (JsonNode got : received()) {
            assertEquals(-1, got.at("/received/seed").asLong(), got.toString());
        }
    }

    // review row 12: each engine's extension fields (extra_body) are forwarded byte for byte to both; each engine
    // reads its own set and ignores the other's (pydantic extra="allow" in vLLM, unknown keys ignored by SGLang). The
    // stop-string switches are row 11's: respelled for the rule's engine (OpenAiRequestFieldsSystemTest).
    @Test
    void extensionFieldsOfEitherEngineReachBothUnchanged() throws Exception {
        String vllmSet = ",\"top_k\":5,\"repetition_penalty\":1.1,\"ignore_eos\":false";
        String sglangSet = ",\"min_new_tokens\":1,\"stop_regex\":\"\\\\d{9}\",\"custom_params\":{\"k\":[1,2]}";
        List<HttpResponse<String>> r = both("/v1/chat/completions", chat(vllmSet + sglangSet + ",\"max_tokens\":3"));
        bothOk(r, "chat.completion");
        JsonNode sent = SimHttp.MAPPER.readTree(chat(vllmSet + sglangSet));
        for (JsonNode got : received()) {
            for (String f : List.of("top_k", "repetition_penalty", "ignore_eos", "min_new_tokens", "stop_regex",
                "custom_params")) {
                assertFalse(sent.path(f).isMissingNode(), f);
                assertEquals(sent.get(f), got.at("/received/" + f), f + ": " + got);
            }
        }
    }

    // review row 15: parallel_tool_calls: false (vLLM truncates after generation, SGLang assembles accordingly)
    @Test
    void parallelToolCallsFalseReachesBothAndBothAnswer() throws Exception {
        List<JsonNode> a = bothOk(both("/v1/chat/completions", chat(TOOLS + ",\"parallel_tool_calls\":false,\"max_tokens\":4")),
            "chat.completion");
        for (JsonNode got : received()) {
            assertFalse(got.at("/received/parallel_tool_calls").asBoolean(true), got.toString());
            assertEquals("auto", got.get("tool_choice").asText(), "tools without tool_choice: auto on both: " + got);
        }
        for (JsonNode one : a) {
            assertEquals("assistant", one.at("/choices/0/message/role").asText(), one.toString());
            JsonNode calls = one.at("/choices/0/message/tool_calls");
            // Residual (stated in the row): with no call made vLLM answers "tool_calls": [], SGLang null.
            assertTrue(calls.isMissingNode() || calls.isNull() || calls.isArray() && calls.isEmpty(), one.toString());
        }
    }

    // review row 25: `[DONE]` is relayed: every stream from both ends with exactly one data: [DONE], last
    @Test
    void doneIsRelayedOnceAndLastFromBoth() throws Exception {
        for (String path : new String[] {"/v1/chat/completions", "/v1/completions"}) {
            for (String extra : new String[] {",\"stream\":true,\"max_tokens\":3",
                ",\"stream\":true,\"max_tokens\":3,\"stream_options\":{\"include_usage\":true}"}) {
                List<HttpResponse<String>> r = both(path, path.contains("chat") ? chat(extra) : completion(extra));
                List<Integer> choiceEvents = new ArrayList<>();
                for (HttpResponse<String> one : r) {
                    assertEquals(200, one.statusCode(), one.body());
                    assertTrue(one.headers().firstValue("content-type").orElse("").startsWith("text/event-stream"));
                    List<String> data = sseData(one.body());
                    assertEquals("[DONE]", data.get(data.size() - 1), one.body());
                    assertEquals(1, data.stream().filter("[DONE]"::equals).count(), one.body());
                    int choices = 0;
                    for (String d : data.subList(0, data.size() - 1)) {
                        JsonNode e = SimHttp.MAPPER.readTree(d);
                        assertFalse(e.has("error"), one.body());
                        choices += e.path("choices").size();
                    }
                    choiceEvents.add(choices);
                }
                assertEquals(choiceEvents.get(0), choiceEvents.get(1), "the same number of choice events: " + r.get(0).body()
                    + "\n" + r.get(1).body());
            }
        }
    }

    // review row 28: /v1/embeddings on a generation server (vLLM 404, SGLang 400): the gateway's own 404 for both
    @Test
    void embeddingsIsTheGatewaysOwn404ForBoth() throws Exception {
        long sglangBefore = sglang.stats().get("embeddings_requests");
        List<HttpResponse<String>> r = both("/v1/embeddings", "{\"model\":\"%MODEL%\",\"input\":\"hello\"}");
        assertEquals(new Seen(404, "invalid_request_error", null, null), sameErrorFromBoth(r));
        assertEquals(r.get(0).body(), r.get(1).body(), "word for word");
        assertTrue(r.get(0).body().contains("POST /v1/embeddings"), r.get(0).body());
        assertEquals(sglangBefore, sglang.stats().get("embeddings_requests"), "no engine saw it");
    }

    // review row 30: /metrics (vLLM always, SGLang only with --enable-metrics): clients get the gateway's own page
    @Test
    void metricsIsTheGatewaysOwnPageForEitherEngine() throws Exception {
        bothOk(both("/v1/completions", completion(",\"max_tokens\":2")), "text_completion");
        HttpResponse<String> m = send("GET", "/metrics", null);
        assertEquals(200, m.statusCode());
        assertTrue(m.headers().firstValue("content-type").orElse("").startsWith("text/plain"));
        for (String rule : new String[] {"pass-vllm", "pass-sglang"}) {
            assertTrue(m.body().lines().anyMatch(l -> l.startsWith("kvgate_requests_total{") && l.contains("rule=\"" + rule + "\"")),
                rule + ": " + m.body());
        }
        for (String line : m.body().split("\n")) {
            assertFalse(line.startsWith("vllm:") || line.startsWith("sglang:"), "no engine series relayed: " + line);
        }
    }

    // review row 31, issue #36 item 9: the gateway's render routes live under /kvgate/v1 and answer for both rules
    @Test
    void renderRoutesAreTheGatewaysForBoth() throws Exception {
        long before = engineRequests(vllmTok) + engineRequests(sglangTok);
        for (String path : new String[] {"/kvgate/v1/chat/completions/render", "/kvgate/v1/completions/render"}) {
            String body = path.contains("/chat/") ? chat("") : completion("");
            List<HttpResponse<String>> r = both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, path, body);
            List<JsonNode> out = new ArrayList<>();
            for (HttpResponse<String> one : r) {
                assertEquals(200, one.statusCode(), one.body());
                JsonNode b = SimHttp.MAPPER.readTree(one.body());
                assertTrue(b.path("prompt").isTextual() && b.path("prompt_token_ids").isArray()
                    && b.path("block_keys").isArray(), one.body());
                out.add(b);
            }
            assertEquals(out.get(0).get("prompt"), out.get(1).get("prompt"), "one template, one rendering");
            assertEquals(out.get(0).get("prompt_token_ids"), out.get(1).get("prompt_token_ids"));
        }
        // a rule without a tokenizer cannot render: the same 400 from both
        for (String path : new String[] {"/kvgate/v1/chat/completions/render", "/kvgate/v1/completions/render"}) {
            List<HttpResponse<String>> r = both(path, path.contains("/chat/") ? chat("") : completion(""));
            assertEquals(400, sameErrorFromBoth(r).status(), r.get(0).body());
        }
        assertEquals(before, engineRequests(vllmTok) + engineRequests(sglangTok), "no engine generated");
    }

    /**
     * Issue #36 item 9: vLLM serves {@code /v1/chat/completions/render} and {@code /v1/completions/render} itself (a
     * GenerateRequest: {@code token_ids}, {@code sampling_params}, ...), so on a vLLM rule those paths reach the engine;
     * on the SGLang rule (whose engine serves none) they stay aliases of the gateway's render.
     */
    @Test
    void theEnginesOwnRenderPathsAreForwardedOnVllmRulesAndAliasesElsewhere() throws Exception {
        HttpResponse<String> engine = send("POST", "/v1/chat/completions/render", chat("").replace("%MODEL%", VLLM_TOK_MODEL));
        assertEquals(200, engine.statusCode(), engine.body());
        JsonNode vllmRender = SimHttp.MAPPER.readTree(engine.body());
        assertTrue(vllmRender.path("token_ids").isArray() && vllmRender.has("sampling_params")
            && !vllmRender.has("block_keys"), "vLLM's own shape: " + engine.body());
        HttpResponse<String> ours = send("POST", "/kvgate/v1/chat/completions/render", chat("").replace("%MODEL%", VLLM_TOK_MODEL));
        assertEquals(200, ours.statusCode(), ours.body());
        assertEquals(SimHttp.MAPPER.readTree(ours.body()).get("prompt_token_ids"), vllmRender.get("token_ids"),
            "the engine renders the prompt the gateway renders");
        HttpResponse<String> batch = send("POST", "/v1/completions/render", completion("").replace("%MODEL%", VLLM_TOK_MODEL));
        assertEquals(200, batch.statusCode(), batch.body());
        assertTrue(SimHttp.MAPPER.readTree(batch.body()).isArray(), "vLLM's completions render is a list: " + batch.body());
        HttpResponse<String> alias = send("POST", "/v1/chat/completions/render", chat("").replace("%MODEL%", SGLANG_TOK_MODEL));
        assertEquals(200, alias.statusCode(), alias.body());
        assertTrue(SimHttp.MAPPER.readTree(alias.body()).path("block_keys").isArray(), "the gateway's render: " + alias.body());
    }

    // review row 34: text the template inserts (Qwen3's tools block: a system turn the client never sent)
    @Test
    void templateInsertedTextIsRenderedByTheRealTemplateForBoth() throws Exception {
        String withTools = chat(TOOLS);
        String plain = chat("");
        Map<String, JsonNode> renders = new java.util.HashMap<>();
        for (String model : new String[] {VLLM_TOK_MODEL, SGLANG_TOK_MODEL}) {
            for (String[] b : new String[][] {{"tools", withTools}, {"plain", plain}}) {
                HttpResponse<String> r = send("POST", "/kvgate/v1/chat/completions/render", b[1].replace("%MODEL%", model));
                assertEquals(200, r.statusCode(), r.body());
                renders.put(model + "/" + b[0], SimHttp.MAPPER.readTree(r.body()));
            }
        }
        String prompt = renders.get(VLLM_TOK_MODEL + "/tools").path("prompt").asText();
        assertTrue(prompt.startsWith("<|im_start|>system\n# Tools\n\nYou may call one or more functions"), prompt);
        assertTrue(prompt.contains("\"name\": \"get_weather\""), "the tool, as tojson renders it: " + prompt);
        assertEquals(prompt, renders.get(SGLANG_TOK_MODEL + "/tools").path("prompt").asText());
        assertFalse(renders.get(VLLM_TOK_MODEL + "/plain").path("prompt").asText().contains("# Tools"));
        assertNotEquals(renders.get(VLLM_TOK_MODEL + "/plain").path("block_keys"),
            renders.get(VLLM_TOK_MODEL + "/tools").path("block_keys"), "tools change the cache key, as on the engine");
        // The engines render the same text: they count the prompt the gateway rendered, token for token.
        List<HttpResponse<String>> gen = both(VLLM_TOK_MODEL, SGLANG_TOK_MODEL, "/v1/chat/completions",
            chat(TOOLS + ",\"max_tokens\":2"));
        bothOk(gen, "chat.completion");
        int ids = renders.get(VLLM_TOK_MODEL + "/tools").path("prompt_token_ids").size();
        for (JsonNode got : received(vllmTok, sglangTok)) {
            assertEquals(ids, got.get("prompt_tokens").asInt(), got.toString());
        }
        for (HttpResponse<String> one : gen) {
            assertEquals(ids, SimHttp.MAPPER.readTree(one.body()).at("/usage/prompt_tokens").asInt(), one.body());
        }
    }
}
