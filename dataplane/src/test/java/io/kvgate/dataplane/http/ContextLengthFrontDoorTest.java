package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code max_model_len} + {@code on_context_overflow} through the front door with the real Qwen3 tokenizer (issue #13
 * item 1): the 400 is answered before any exchange starts, a clamp reaches the exchange as an edited body, and what
 * the gateway cannot count goes to the engine unchanged.
 */
class ContextLengthFrontDoorTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static FrontDoorHarness h;
    private static PromptPipeline qwen;

    private static Path modelDir() {
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        return d.resolve("deploy/models/qwen3");
    }

    @BeforeAll
    static void setUp() throws Exception {
        h = new FrontDoorHarness("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            rules:
              - name: tok
                models: [tok]
                tokenizer: %1$s
                max_model_len: 64
                endpoints:
                  - url: http://127.0.0.1:1
              - name: tokclamp
                models: [tokclamp]
                engine: sglang
                tokenizer: %1$s
                max_model_len: 64
                on_context_overflow: clamp
                endpoints:
                  - url: http://127.0.0.1:2
              - name: roomy
                models: [roomy]
                engine: sglang
                tokenizer: %1$s
                max_model_len: 4096
                on_context_overflow: clamp
                endpoints:
                  - url: http://127.0.0.1:7
              - name: kv
                models: [kv]
                policy: kv_exact
                tokenizer: %1$s
                max_model_len: 64
                endpoints:
                  - url: http://127.0.0.1:3
              - name: plain
                models: [plain]
                max_model_len: 32
                endpoints:
                  - url: http://127.0.0.1:4
              - name: sgplain
                models: [sgplain]
                engine: sglang
                max_model_len: 32
                endpoints:
                  - url: http://127.0.0.1:5
              - name: unknown
                models: [unknown]
                tokenizer: %1$s
                endpoints:
                  - url: http://127.0.0.1:6
            """.formatted(modelDir()));
        qwen = PromptPipeline.forModelDir(modelDir().toString());
    }

    @AfterAll
    static void tearDown() {
        h.close();
    }

    private static String send(String path, String body) {
        EmbeddedChannel ch = h.channel();
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ch.writeInbound(ascii("POST " + path + " HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + b.length + "\r\n\r\n"));
        ch.writeInbound(io.netty.buffer.Unpooled.wrappedBuffer(b));
        String out = output(ch);
        ch.finishAndReleaseAll();
        return out;
    }

    private static JsonNode error(String out) throws Exception {
        assertTrue(out.startsWith("HTTP/1.1 400 "), out);
        return JSON.readTree(out.substring(out.indexOf("\r\n\r\n") + 4)).get("error");
    }

    private static String chat(String model, String content, String extra) {
        return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]" + extra + "}";
    }

    /** The prompt's token count as the engine will see it (the model's template, then the tokenizer). */
    private static int chatTokens(String body) throws Exception {
        return qwen.chatTokens(qwen.renderChatText(JSON.readTree(body)), 1 << 20).length;
    }

    private static String lastBody() {
        return h.bodies.get(h.bodies.size() - 1);
    }

    @Test
    void anOverflowingChatIsOpenAis400BeforeAnyEngine() throws Exception {
        int before = h.started.size();
        String body = chat("tok", "Where is parcel 9?", ",\"max_tokens\":100,\"stream\":true");
        int prompt = chatTokens(body);
        JsonNode e = error(send("/v1/chat/completions", body));
        assertEquals("This model's maximum context length is 64 tokens. However, you requested " + (prompt + 100)
            + " tokens (" + prompt + " in the messages, 100 in the completion). Please reduce the length of the messages or"
            + " completion.", e.get("message").asText());
        assertEquals("invalid_request_error", e.get("type").asText());
        assertEquals("messages", e.get("param").asText());
        assertEquals("context_length_exceeded", e.get("code").asText());
        assertEquals(before, h.started.size(), "no exchange started");
        assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"context_length_exceeded\"}"));
    }

    @Test
    void maxCompletionTokensIsTheBudgetWhenBothAreGiven() throws Exception {
        String body = chat("tok", "hi", ",\"max_tokens\":5,\"max_completion_tokens\":200");
        JsonNode e = error(send("/v1/chat/completions", body));
        assertTrue(e.get("message").asText().contains(", 200 in the completion)"), e.toString());
        String fits = chat("tok", "hi", ",\"max_tokens\":500,\"max_completion_tokens\":5");
        assertTrue(send("/v1/chat/completions", fits).isEmpty(), "mct 5 fits; max_tokens 500 is not what the engines read");
        assertEquals(fits, lastBody(), "a request that fits goes unchanged");
    }

    @Test
    void clampLowersTheBudgetOnTheWayToTheEngine() throws Exception {
        String body = chat("tokclamp", "Where is parcel 9?", ",\"max_tokens\":4096,\"max_tokens\":4000");
        int prompt = chatTokens(body);
        assertEquals("", send("/v1/chat/completions", body));
        JsonNode sent = JSON.readTree(lastBody());
        // SGLang refuses prompt + max_new_tokens >= context: one token stays free.
        assertEquals(64 - prompt - 1, sent.get("max_tokens").asInt());
        assertEquals(lastBody(), body.replace("4096", Integer.toString(64 - prompt - 1))
            .replace("4000", Integer.toString(64 - prompt - 1)), "only the digits changed, duplicates included");
        assertTrue(h.metrics.render().contains("kvgate_context_clamped_total{rule=\"tokclamp\"}"));
    }

    @Test
    void aPromptWhoseLengthProvesItFitsGoesUnchangedAndOneNearTheEdgeIsStillCountedExactly() throws Exception {
        // 1,000 bytes of text and a 100-token budget in a 4,096-token context: at most ~1,030 ids, so it fits
        // whatever it tokenizes to (the stage does not tokenize it) and goes as sent.
        String fits = chat("roomy", "word ".repeat(200), ",\"max_tokens\":100");
        assertEquals("", send("/v1/chat/completions", fits));
        assertEquals(fits, lastBody(), "unchanged");
        // The same text with a budget the length bound cannot clear: counted exactly, and the budget lowered to the
        // exact room (SGLang: one token free), as without the shortcut.
        String near = chat("roomy", "word ".repeat(200), ",\"max_tokens\":3900");
        int prompt = chatTokens(near);
        assertTrue(prompt < 1000, "short words tokenize to fewer ids than bytes: " + prompt);
        assertEquals("", send("/v1/chat/completions", near));
        assertEquals(4096 - prompt - 1, JSON.readTree(lastBody()).get("max_tokens").asInt());
    }

    @Test
    void aPromptLongerThanTheContextIsRefusedUnderClampToo() throws Exception {
        JsonNode e = error(send("/v1/chat/completions", chat("tokclamp", "word ".repeat(80), "")));
        assertEquals("context_length_exceeded", e.get("code").asText());
        // The count stops at the context length: more proves the overflow.
        assertEquals("This model's maximum context length is 64 tokens. However, your messages resulted in more than 64"
            + " tokens. Please reduce the length of the messages.", e.get("message").asText());
    }

    @Test
    void aRoutingRuleCountsEveryPromptOfABatch() throws Exception {
        String longSecond = "{\"model\":\"kv\",\"prompt\":[\"hi\",\"" + "word ".repeat(70) + "\"],\"max_tokens\":2}";
        JsonNode e = error(send("/v1/completions", longSecond));
        assertEquals("prompt", e.get("param").asText());
        assertTrue(e.get("message").asText().contains("in the prompt, 2 in the completion)"), e.toString());
        assertEquals("", send("/v1/completions", "{\"model\":\"kv\",\"prompt\":[\"hi\",\"there\"],\"max_tokens\":2}"));
    }

    @Test
    void tokenIdPromptsAreCountedOnARuleWithoutATokenizer() throws Exception {
        JsonNode e = error(send("/v1/completions", "{\"model\":\"plain\",\"prompt\":" + ids(30) + ",\"max_tokens\":5}"));
        assertEquals("This model's maximum context length is 32 tokens. However, you requested 35 tokens (30 in the"
            + " prompt, 5 in the completion). Please reduce the length of the prompt or completion.", e.get("message").asText());
        assertEquals("prompt", e.get("param").asText());
        JsonNode batch = error(send("/v1/completions", "{\"model\":\"plain\",\"prompt\":[" + ids(3) + "," + ids(32) + "]}"));
        assertEquals("This model's maximum context length is 32 tokens. However, your prompt resulted in 32 tokens."
            + " Please reduce the length of the prompt.", batch.get("message").asText());
    }

    @Test
    void completionsWithoutABudgetAreServedAsVllmServesThem() throws Exception {
        // 10 ids + the default 16 fit: nothing is added.
        String fits = "{\"model\":\"sgplain\",\"prompt\":" + ids(10) + "}";
        assertEquals("", send("/v1/completions", fits));
        assertEquals(fits, lastBody());
        // 20 ids + the default 16 > 32: vLLM lowers the default to the room itself (the gateway writes it down)...
        assertEquals("", send("/v1/completions", "{\"model\":\"plain\",\"prompt\":" + ids(20) + "}"));
        assertEquals("{\"model\":\"plain\",\"prompt\":" + ids(20) + ",\"max_tokens\":12}", lastBody());
        // ...SGLang would refuse it, so it gets vLLM's budget (one token short of SGLang's limit) — under reject too:
        // the client asked for nothing.
        assertEquals("", send("/v1/completions", "{\"model\":\"sgplain\",\"prompt\":" + ids(20) + "}"));
        assertEquals("{\"model\":\"sgplain\",\"prompt\":" + ids(20) + ",\"max_tokens\":11}", lastBody());
    }

    @Test
    void whatTheGatewayCannotCountGoesToTheEngine() {
        String text = "{\"model\":\"plain\",\"prompt\":\"" + "word ".repeat(100) + "\",\"max_tokens\":1000}";
        assertEquals("", send("/v1/completions", text), "a text prompt on a rule without a tokenizer");
        assertEquals(text, lastBody());
        String unreadable = chat("tok", "hi", ",\"max_tokens\":1000.0");
        assertEquals("", send("/v1/chat/completions", unreadable), "a budget the gateway does not read as an integer");
        assertEquals(unreadable, lastBody());
        String noContext = chat("unknown", "hi", ",\"max_tokens\":100000");
        assertEquals("", send("/v1/chat/completions", noContext), "no context length known for the rule");
        assertFalse(h.metrics.render().contains("kvgate_context_clamped_total{rule=\"unknown\"}"));
    }

    private static String ids(int n) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < n; i++) {
            b.append(i == 0 ? "" : ",").append(100 + i);
        }
        return b.append(']').toString();
    }
}
