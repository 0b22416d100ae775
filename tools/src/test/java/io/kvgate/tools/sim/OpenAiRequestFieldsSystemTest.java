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
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The request fields vLLM and SGLang disagree on (issue #13; review rows 5, 9, 11, 13, 14, 16, 35 in
 * docs/openai-contract.md): the same request goes through a vLLM rule and an SGLang rule of one gateway, each over its
 * engine's simulator (which answers as that engine does, {@code EngineDivergenceTest}), and the client sees the same
 * status, {@code type}, {@code code} and {@code param} from both; where the gateway edits the request, the simulator's
 * record of what it received shows each engine got the request in its own dialect.
 */
@Tag("system")
@Timeout(60)
class OpenAiRequestFieldsSystemTest {
    static EngineSimulator vllm;
    static EngineSimulator sglang;
    static Gateway gw;
    /** Client model names of each rule pair: plain, speculative: true, max_logit_bias: 0 (aliases of the engines' names). */
    static final String[] PLAIN = {"mv", "ms"};
    static final String[] SPECULATIVE = {"spec-v", "spec-s"};
    static final String[] NO_BIAS = {"nobias-v", "nobias-s"};
    /** Rules with the model's tokenizer (so the gateway knows its vocabulary). */
    static final String[] TOKENIZED = {"tok-v", "tok-s"};

    @BeforeAll
    static void start() throws Exception {
        vllm = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model("mv"));
        sglang = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model("ms"));
        java.nio.file.Path qwen3 = java.nio.file.Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath()
            .normalize().resolve("deploy/models/qwen3");
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 5000}
            health: {interval_ms: 500, timeout_ms: 5000}
            rules:
              - name: on-vllm
                models: [mv]
                engine: vllm
                endpoints: [{url: "%1$s"}]
              - name: on-sglang
                models: [ms]
                engine: sglang
                endpoints: [{url: "%2$s"}]
              - name: spec-vllm
                models: [{name: spec-v, served_as: mv}]
                engine: vllm
                speculative: true
                endpoints: [{url: "%1$s"}]
              - name: spec-sglang
                models: [{name: spec-s, served_as: ms}]
                engine: sglang
                speculative: true
                endpoints: [{url: "%2$s"}]
              - name: nobias-vllm
                models: [{name: nobias-v, served_as: mv}]
                engine: vllm
                max_logit_bias: 0
                endpoints: [{url: "%1$s"}]
              - name: nobias-sglang
                models: [{name: nobias-s, served_as: ms}]
                engine: sglang
                max_logit_bias: 0
                endpoints: [{url: "%2$s"}]
              - name: tok-vllm
                models: [{name: tok-v, served_as: mv}]
                engine: vllm
                tokenizer: %3$s
                endpoints: [{url: "%1$s"}]
              - name: tok-sglang
                models: [{name: tok-s, served_as: ms}]
                engine: sglang
                tokenizer: %3$s
                endpoints: [{url: "%2$s"}]
            """.formatted(vllm.baseUrl(), sglang.baseUrl(), qwen3)));
    }

    @AfterAll
    static void stop() {
        if (gw != null) {
            gw.close(100);
        }
        vllm.close();
        sglang.close();
    }

    static HttpResponse<String> send(String path, String body) throws Exception {
        HttpRequest r = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        return SimHttp.CLIENT.send(r, HttpResponse.BodyHandlers.ofString());
    }

    /** What a client sees of an error answer: status and the error object's type, code and param. */
    record Seen(int status, String type, String code, String param) {
        static Seen of(HttpResponse<String> r) throws Exception {
            JsonNode e = SimHttp.MAPPER.readTree(r.body()).path("error");
            return new Seen(r.statusCode(), text(e.get("type")), text(e.get("code")), text(e.get("param")));
        }

        private static String text(JsonNode n) {
            return n == null || n.isNull() ? null : n.asText();
        }
    }

    /** {@code body} (its {@code %MODEL%} replaced) through the vLLM rule, then the SGLang rule, of {@code models}. */
    static List<HttpResponse<String>> both(String[] models, String path, String body) throws Exception {
        List<HttpResponse<String>> out = new ArrayList<>();
        for (String model : models) {
            out.add(send(path, body.replace("%MODEL%", model)));
        }
        return out;
    }

    /**
     * Asserts both rules answer {@code body} with the same error (status, type, code, param and message, rule names
     * aside), that no
     * engine saw it, and returns it.
     */
    static Seen sameErrorFromBoth(String[] models, String path, String body) throws Exception {
        long before = generations();
        List<HttpResponse<String>> r = both(models, path, body);
        Seen v = Seen.of(r.get(0));
        assertEquals(v, Seen.of(r.get(1)), "vLLM rule: " + r.get(0).body() + "\nSGLang rule: " + r.get(1).body());
        // the same words, but for the rule they name ('spec-vllm' / 'spec-sglang')
        assertEquals(message(r.get(0)).replace("-vllm'", "-RULE'"), message(r.get(1)).replace("-sglang'", "-RULE'"));
        assertFalse(message(r.get(0)).isEmpty());
        assertEquals(before, generations(), "refused by the gateway: no engine saw it");
        return v;
    }

    static String message(HttpResponse<String> r) throws Exception {
        return SimHttp.MAPPER.readTree(r.body()).at("/error/message").asText();
    }

    /** Asserts both rules answer 200 and returns the answers, vLLM's first. */
    static List<JsonNode> okFromBoth(String[] models, String path, String body) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        for (HttpResponse<String> r : both(models, path, body)) {
            assertEquals(200, r.statusCode(), r.body());
            out.add(SimHttp.MAPPER.readTree(r.body()));
        }
        return out;
    }

    static long generations() {
        return vllm.stats().get("chat_requests") + vllm.stats().get("completion_requests")
            + sglang.stats().get("chat_requests") + sglang.stats().get("completion_requests");
    }


    static String chat(String extra) {
        return "{\"model\":\"%MODEL%\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4" + extra + "}";
    }

    static String completion(String extra) {
        return "{\"model\":\"%MODEL%\",\"prompt\":\"w w w\",\"max_tokens\":4" + extra + "}";
    }

    static double counter(String series) {
        for (String line : gw.metrics().render().split("\n")) {
            if (line.startsWith(series + " ")) {
                return Double.parseDouble(line.substring(series.length()).strip());
            }
        }
        return 0;
    }

    // review row 5
    @Test
    void aTemperatureBelowTheFloorSamplesOnBothAsVllmRaisesIt() throws Exception {
        List<JsonNode> r = okFromBoth(PLAIN, "/v1/completions", completion(",\"n\":2,\"temperature\":0.000005"));
        for (JsonNode a : r) {
            assertEquals(2, a.path("choices").size(), a.toString());
            assertNotEquals(a.at("/choices/0/text"), a.at("/choices/1/text"), "sampled at 0.01, not greedy: " + a);
        }
        // vLLM raises it itself; SGLang (which would treat anything below 1e-6 as greedy, and sample at 5e-6 as sent)
        // is sent vLLM's 0.01
        assertEquals(0.000005, SimRecords.lastRequest(vllm).path("temperature").asDouble());
        assertEquals(0.01, SimRecords.lastRequest(vllm).path("effective_temperature").asDouble());
        assertEquals(0.01, SimRecords.lastRequest(sglang).path("temperature").asDouble());
        assertEquals(2, SimRecords.lastRequest(sglang).path("n").asInt());
        // at the floor and above, and an exact 0 (greedy on both), the temperature is the client's
        okFromBoth(PLAIN, "/v1/completions", completion(",\"temperature\":0.7"));
        assertEquals(0.7, SimRecords.lastRequest(sglang).path("temperature").asDouble());
        okFromBoth(PLAIN, "/v1/chat/completions", chat(",\"temperature\":0"));
        assertEquals(0.0, SimRecords.lastRequest(sglang).path("temperature").asDouble());
        assertTrue(SimRecords.lastRequest(sglang).path("temperature").isIntegralNumber(), "the client's bytes");
    }

    // review row 9
    @Test
    void aSuffixIsTheSame400FromBoth() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "unsupported_parameter", "suffix"),
            sameErrorFromBoth(PLAIN, "/v1/completions", completion(",\"suffix\":\"XYZ\"")));
        okFromBoth(PLAIN, "/v1/completions", completion(",\"suffix\":\"\""));
        okFromBoth(PLAIN, "/v1/completions", completion(",\"suffix\":null"));
    }

    // review row 11
    @Test
    void eitherSpellingKeepsTheStopStringOnBoth() throws Exception {
        for (String spelling : new String[] {"include_stop_str_in_output", "no_stop_trim"}) {
            for (int rule = 0; rule < 2; rule++) {
                String model = PLAIN[rule];
                EngineSimulator sim = rule == 0 ? vllm : sglang;
                String prompt = "{\"model\":\"" + model + "\",\"prompt\":\"q\",\"max_tokens\":12";
                String text = SimHttp.MAPPER.readTree(send("/v1/completions", prompt + "}").body()).at("/choices/0/text").asText();
                String stop = " " + text.split(" ")[3];
                int at = text.indexOf(stop);
                String stopped = prompt + ",\"stop\":[\"" + stop + "\"]";
                JsonNode trimmed = SimHttp.MAPPER.readTree(send("/v1/completions", stopped + "}").body());
                assertEquals(text.substring(0, at), trimmed.at("/choices/0/text").asText(), "trimmed by default: " + model);
                HttpResponse<String> kept = send("/v1/completions", stopped + ",\"" + spelling + "\":true}");
                assertEquals(200, kept.statusCode(), kept.body());
                assertEquals(text.substring(0, at + stop.length()),
                    SimHttp.MAPPER.readTree(kept.body()).at("/choices/0/text").asText(), spelling + " on " + model);
                assertTrue(SimRecords.lastRequest(sim).path("keep_stop").asBoolean(), "the engine read its own spelling");
                assertEquals("stop", SimHttp.MAPPER.readTree(kept.body()).at("/choices/0/finish_reason").asText());
            }
        }
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "no_stop_trim"), sameErrorFromBoth(PLAIN,
            "/v1/chat/completions", chat(",\"include_stop_str_in_output\":true,\"no_stop_trim\":false")));
    }

    // review row 13
    @Test
    void logitBiasHasOneShapeAndTheRulesBound() throws Exception {
        Seen shape = new Seen(400, "invalid_request_error", "invalid_value", "logit_bias");
        assertEquals(shape, sameErrorFromBoth(PLAIN, "/v1/chat/completions", chat(",\"logit_bias\":{\"hello\":1}")));
        assertEquals(new Seen(400, "invalid_request_error", "decimal_above_max_value", "logit_bias"),
            sameErrorFromBoth(PLAIN, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":101}")));
        assertEquals(new Seen(400, "invalid_request_error", "invalid_type", "logit_bias"),
            sameErrorFromBoth(PLAIN, "/v1/completions", completion(",\"logit_bias\":[5]")));
        StringBuilder many = new StringBuilder(",\"logit_bias\":{");
        for (int i = 0; i < 301; i++) {
            many.append(i == 0 ? "" : ",").append('"').append(i).append("\":1");
        }
        assertEquals(shape, sameErrorFromBoth(PLAIN, "/v1/chat/completions", chat(many.append('}').toString())),
            "OpenAI's cap of 300 (max_logit_bias' default)");
        // within the bound: both engines get it as sent
        double accepted = counter("kvgate_logit_bias_requests_total{outcome=\"accepted\",rule=\"on-sglang\"}");
        okFromBoth(PLAIN, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":-100,\"7\":2.5}"));
        assertEquals(-100, SimRecords.lastRequest(vllm).at("/logit_bias/5").asInt());
        assertEquals(2.5, SimRecords.lastRequest(sglang).at("/logit_bias/7").asDouble());
        assertEquals(accepted + 1, counter("kvgate_logit_bias_requests_total{outcome=\"accepted\",rule=\"on-sglang\"}"));
        // max_logit_bias: 0 refuses the field on both; an empty map biases nothing and passes
        double refused = counter("kvgate_logit_bias_requests_total{outcome=\"refused\",rule=\"nobias-sglang\"}");
        assertEquals(new Seen(400, "invalid_request_error", "unsupported_parameter", "logit_bias"),
            sameErrorFromBoth(NO_BIAS, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":1}")));
        assertEquals(refused + 1, counter("kvgate_logit_bias_requests_total{outcome=\"refused\",rule=\"nobias-sglang\"}"));
        assertEquals(1, counter("kvgate_logit_bias_requests_total{outcome=\"refused\",rule=\"nobias-vllm\"}"));
        okFromBoth(NO_BIAS, "/v1/chat/completions", chat(",\"logit_bias\":{}"));
        assertTrue(SimRecords.lastRequest(vllm).path("logit_bias").isObject(), "vLLM gets the client's {}");
        assertTrue(SimRecords.lastRequest(sglang).path("logit_bias").isNull(), "SGLang gets null: no dense bias matrix for nothing");
    }

    // review row 13: where the rule has the tokenizer, a token id outside its vocabulary is OpenAI's 400 (vLLM refuses
    // it in its own words, SGLang would index its bias matrix out of bounds)
    @Test
    void aTokenIdBeyondTheVocabularyIsTheSame400WhereTheRuleHasTheTokenizer() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "logit_bias"),
            sameErrorFromBoth(TOKENIZED, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":1,\"10000000\":-100}")));
        String m = message(send("/v1/chat/completions", chat(",\"logit_bias\":{\"10000000\":-100}").replace("%MODEL%", "tok-s")));
        assertTrue(m.matches("Invalid key in 'logit_bias': 10000000\\. Maximum value is 1[0-9]{5}\\."), m);
        okFromBoth(TOKENIZED, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":1,\"151000\":-100}"));
        okFromBoth(PLAIN, "/v1/chat/completions", chat(",\"logit_bias\":{\"10000000\":-100}"));
    }

    // review row 14
    @Test
    void aSpeculativeRuleRefusesLogitBiasAndMinPOnBoth() throws Exception {
        assertEquals(new Seen(400, "invalid_request_error", "unsupported_parameter", "logit_bias"),
            sameErrorFromBoth(SPECULATIVE, "/v1/chat/completions", chat(",\"logit_bias\":{\"5\":1}")));
        assertEquals(new Seen(400, "invalid_request_error", "unsupported_parameter", "min_p"),
            sameErrorFromBoth(SPECULATIVE, "/v1/completions", completion(",\"min_p\":0.1")));
        assertEquals(1, counter("kvgate_logit_bias_requests_total{outcome=\"refused\",rule=\"spec-vllm\"}"));
        // what filters nothing passes, and the same fields pass on the rules that are not speculative
        okFromBoth(SPECULATIVE, "/v1/chat/completions", chat(",\"min_p\":0,\"logit_bias\":null"));
        okFromBoth(PLAIN, "/v1/completions", completion(",\"min_p\":0.1"));
    }

    // review row 16
    @Test
    void responseFormatShapeErrorsAreTheSame400FromBoth() throws Exception {
        String path = "/v1/chat/completions";
        assertEquals(new Seen(400, "invalid_request_error", "missing_required_parameter", "response_format.json_schema"),
            sameErrorFromBoth(PLAIN, path, chat(",\"response_format\":{\"type\":\"json_schema\"}")));
        assertEquals("When response_format type is 'json_schema', the 'json_schema' field must be provided.",
            message(send(path, chat(",\"response_format\":{\"type\":\"json_schema\"}").replace("%MODEL%", "ms"))),
            "vLLM's words, from the SGLang rule too");
        assertEquals(new Seen(400, "invalid_request_error", "missing_required_parameter", "response_format.json_schema.name"),
            sameErrorFromBoth(PLAIN, path, chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}")));
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "response_format.type"),
            sameErrorFromBoth(PLAIN, path, chat(",\"response_format\":{\"type\":\"yaml\"}")));
        assertEquals(new Seen(400, "invalid_request_error", "invalid_type", "response_format"),
            sameErrorFromBoth(PLAIN, "/v1/completions", completion(",\"response_format\":\"json_object\"")));
        okFromBoth(PLAIN, path, chat(",\"response_format\":{\"type\":\"json_object\"}"));
        okFromBoth(PLAIN, path, chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
            + "\"schema\":{\"type\":\"object\"}}}"));
    }

    // review row 35
    @Test
    void continueFinalMessageWithAGenerationPromptIsTheSame400FromBoth() throws Exception {
        String path = "/v1/chat/completions";
        String both = chat(",\"add_generation_prompt\":true,\"continue_final_message\":true");
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "continue_final_message"),
            sameErrorFromBoth(PLAIN, path, both));
        assertEquals("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
            message(send(path, both.replace("%MODEL%", "ms"))));
        assertEquals(new Seen(400, "invalid_request_error", "invalid_value", "continue_final_message"),
            sameErrorFromBoth(PLAIN, path, chat(",\"continue_final_message\":true")), "add_generation_prompt defaults to true");
        okFromBoth(PLAIN, path, "{\"model\":\"%MODEL%\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
            + "{\"role\":\"assistant\",\"content\":\"Hello\"}],\"max_tokens\":4,\"add_generation_prompt\":false,"
            + "\"continue_final_message\":true}");
    }
}
