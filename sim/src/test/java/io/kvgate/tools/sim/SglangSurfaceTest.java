package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** SGLang dialect: what it accepts that vLLM refuses, and what it refuses that vLLM clamps (§1). */
@Timeout(60)
@Tag("system")
class SglangSurfaceTest {
    static EngineSimulator sim;

    @BeforeAll
    static void start() {
        sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).contextLen(64));
    }

    @AfterAll
    static void stop() {
        sim.close();
    }

    @Test
    void unknownModelAcceptedAndEchoed() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("some-other-model", "hi", "\"max_tokens\":2"));
        assertEquals(200, r.statusCode());
        assertEquals("some-other-model", json(r).get("model").asText());
    }

    @Test
    void contextOverflowIs400NamingBothCounts() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"a b c d\",\"max_tokens\":100}");
        assertEquals(400, r.statusCode());
        JsonNode b = json(r);
        assertEquals("error", b.get("object").asText(), "SGLang answers the flat shape");
        String msg = b.get("message").asText();
        assertTrue(msg.contains("4 tokens from the input messages"), msg);
        assertTrue(msg.contains("100 tokens for the completion"), msg);
        assertTrue(msg.contains("maximum context length of 64 tokens"), msg);
    }

    @Test
    void streamOptionsWithoutStreamAccepted() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"max_tokens\":2,\"stream_options\":{\"include_usage\":true}"));
        assertEquals(200, r.statusCode());
        assertEquals("chat.completion", json(r).get("object").asText());
    }

    @Test
    void greedyNGivesIdenticalChoices() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"n\":3,\"temperature\":0,\"max_tokens\":5"));
        assertEquals(200, r.statusCode());
        JsonNode c = json(r).get("choices");
        assertEquals(3, c.size());
        assertEquals(c.get(0).at("/message/content"), c.get(2).at("/message/content"));
        assertEquals(2, c.get(2).get("index").asInt());
        assertEquals(15, json(r).at("/usage/completion_tokens").asInt());
    }

    @Test
    void maxCompletionTokensOrMaxTokens() throws Exception {
        HttpResponse<String> r = post(sim, "/v1/chat/completions",
            chat("m", "hi", "\"max_tokens\":7,\"max_completion_tokens\":3"));
        assertEquals(3, json(r).at("/usage/completion_tokens").asInt());
    }

    @Test
    void topLogprobsWithoutLogprobsAccepted() throws Exception {
        assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "hi", "\"top_logprobs\":2,\"max_tokens\":1"))
            .statusCode());
    }

    @Test
    void routesLikeSglang() throws Exception {
        assertEquals(404, get(sim, "/metrics").statusCode(), "metrics only with --enable-metrics");
        HttpResponse<String> emb = post(sim, "/v1/embeddings", "{\"model\":\"m\",\"input\":\"x\"}");
        assertEquals(400, emb.statusCode());
        assertTrue(json(emb).get("message").asText().contains("--is-embedding"));
        assertEquals("sglang", json(get(sim, "/v1/models")).at("/data/0/owned_by").asText());
        try (EngineSimulator withMetrics = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).enableMetrics(true))) {
            HttpResponse<String> m = get(withMetrics, "/metrics");
            assertEquals(200, m.statusCode());
            assertTrue(m.body().contains("sglang:num_running_reqs"));
        }
    }

    @Test
    void serverInfoTellsPageSizeAndHealthGenerate() throws Exception {
        JsonNode info = json(get(sim, "/get_server_info"));
        assertEquals(1, info.get("page_size").asInt(), "SGLang default page size");
        assertEquals(64, info.get("context_length").asInt());
        assertEquals(200, get(sim, "/health_generate").statusCode());
    }

    @Test
    void naturalLengthAnswerStopsAtTheContextEnd() throws Exception {
        // 60 prompt tokens in a 64-token context, no max_tokens: at most 4 tokens, finish "length"
        JsonNode b = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"" + "w ".repeat(59) + "w\"}"));
        assertEquals(60, b.at("/usage/prompt_tokens").asInt());
        assertEquals(4, b.at("/usage/completion_tokens").asInt());
        assertEquals("length", b.at("/choices/0/finish_reason").asText());
    }

    @Test
    void stopTrimmedOrKeptWithNoStopTrim() throws Exception {
        String text = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"q\",\"max_tokens\":12}"))
            .at("/choices/0/text").asText();
        String[] words = text.split(" ");
        String stop = " " + words[3];
        int at = text.indexOf(stop);
        JsonNode trimmed = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"q\",\"max_tokens\":12,"
            + "\"stop\":\"" + stop + "\"}"));
        assertEquals(text.substring(0, at), trimmed.at("/choices/0/text").asText());
        assertEquals("stop", trimmed.at("/choices/0/finish_reason").asText());
        assertEquals(stop, trimmed.at("/choices/0/matched_stop").asText());
        JsonNode kept = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"q\",\"max_tokens\":12,"
            + "\"stop\":[\"" + stop + "\"],\"no_stop_trim\":true}"));
        assertEquals(text.substring(0, at + stop.length()), kept.at("/choices/0/text").asText());
    }
}
