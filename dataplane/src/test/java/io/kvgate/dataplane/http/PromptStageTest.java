package io.kvgate.dataplane.http;

import io.kvgate.dataplane.request.RoutingInputs;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.prompt.PromptPipeline;
import io.kvgate.index.block.BlockIndexConfig;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The prompt stage through the front door with the real Qwen3 tokenizer: {@code max_prompt_tokens} (token-id prompts
 * counted while streaming, text and chat prompts bounded while tokenizing), the tokens handed to routing capped at
 * the index's lookup depth.
 */
class PromptStageTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private FrontDoorHarness h;

    private static Path modelDir() {
        Path d = Path.of("").toAbsolutePath();
        while (d != null && !Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        return d.resolve("deploy/models/qwen3");
    }

    @BeforeEach
    void setUp() throws Exception {
        h = new FrontDoorHarness("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            limits:
              max_body_bytes: 8388608
            rules:
              - name: prefix
                models: [q]
                policy: chwbl
                tokenizer: %s
                max_prompt_tokens: 64
                endpoints:
                  - url: http://127.0.0.1:1
              - name: plain
                models: [p]
                max_prompt_tokens: 8
                endpoints:
                  - url: http://127.0.0.1:2
              - name: wide
                models: [w]
                policy: chwbl
                tokenizer: %s
                block_size: 1
                endpoints:
                  - url: http://127.0.0.1:3
              - name: notok
                models: [nt]
                engine: llamacpp
                policy: chwbl
                chwbl: {prefix_chars: 16}
                endpoints:
                  - url: http://127.0.0.1:4
              - name: kvnotok
                models: [kn]
                policy: kv_exact
                endpoints:
                  - url: http://127.0.0.1:5
            """.formatted(modelDir(), modelDir()));
    }

    @AfterEach
    void tearDown() {
        h.close();
    }

    private String send(String path, String body) {
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

    private static String chat(String model, String content) {
        return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]}";
    }

    @Test
    void aChatPromptWithinTheLimitIsTokenizedForRouting() {
        assertEquals("", send("/v1/chat/completions", chat("q", "Where is parcel 9?")));
        int[] tokens = h.started.get(0).inputs().promptTokens();
        assertNotNull(tokens);
        assertTrue(tokens.length > 5 && tokens.length <= 64, "tokens " + tokens.length);
    }

    @Test
    void h4_aChatPromptOverMaxPromptTokensIsRefusedAsContextLengthExceeded() throws Exception {
        JsonNode e = error(send("/v1/chat/completions", chat("q", "word ".repeat(200))));
        assertEquals("context_length_exceeded", e.get("code").asText());
        assertEquals("messages", e.get("param").asText());
        assertTrue(e.get("message").asText().contains("at most 64 prompt tokens (max_prompt_tokens)"), e.toString());
        assertEquals(0, h.started.size());
        assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"context_length_exceeded\"} 1"));
    }

    @Test
    void aTextCompletionsPromptOverTheLimitIsRefused() throws Exception {
        JsonNode e = error(send("/v1/completions", "{\"model\":\"q\",\"prompt\":\"" + "x y ".repeat(100) + "\"}"));
        assertEquals("prompt", e.get("param").asText());
        assertEquals("context_length_exceeded", e.get("code").asText());
    }

    @Test
    void h4_tokenIdPromptsOverTheLimitAreRefusedOnEveryRuleWithoutParsing() throws Exception {
        StringBuilder ids = new StringBuilder("[");
        for (int i = 0; i < 9; i++) {
            ids.append(i == 0 ? "" : ",").append(i);
        }
        ids.append(']');
        // The plain round-robin rule never tokenizes, yet token-id prompts are counted while the body streams in.
        JsonNode e = error(send("/v1/completions", "{\"model\":\"p\",\"prompt\":" + ids + "}"));
        assertTrue(e.get("message").asText().contains("The prompt has 9 tokens; rule 'plain' accepts at most 8"), e.toString());
        error(send("/v1/completions", "{\"model\":\"p\",\"prompt\":[[1]," + ids + "]}"));
        assertEquals("", send("/v1/completions", "{\"model\":\"p\",\"prompt\":[[1,2,3,4,5,6,7,8],[1]]}"));
        assertEquals(1, h.started.size());
    }

    @Test
    void aTextPromptOnAPlainRuleIsNotTokenizedByTheGateway() {
        assertEquals("", send("/v1/completions", "{\"model\":\"p\",\"prompt\":\"" + "x y ".repeat(100) + "\"}"));
        assertNull(h.started.get(0).inputs().promptTokens());
    }

    @Test
    void h4_routingGetsAtMostTheIndexLookupDepthOfTokens() {
        // block_size 1: the index looks at most 8192 blocks deep, so routing gets at most 8192 tokens.
        StringBuilder ids = new StringBuilder("[");
        int n = BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS + 1000;
        for (int i = 0; i < n; i++) {
            ids.append(i == 0 ? "" : ",").append(i % 1000);
        }
        ids.append(']');
        assertEquals("", send("/v1/completions", "{\"model\":\"w\",\"prompt\":" + ids + "}"));
        int[] tokens = h.started.get(0).inputs().promptTokens();
        assertEquals(BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS, tokens.length);
        assertEquals(999, tokens[999]);
    }

    @Test
    void m1_anOverLongPromptIsRefusedBeforeItIsTokenized() throws Exception {
        // 2 Mi letters in one word: tokenizing it costs ~0.6 s and ~100 MB of scratch (M1). The rendered length
        // alone proves it is over 64 tokens, so it is refused before the tokenizer runs: the I/O thread allocates
        // the JSON tree and the rendering (a few times the body), never the tokenizer's ~50 B per byte.
        PromptPipeline p = PromptPipeline.forModelDir(modelDir().toString());
        String text = "a".repeat(2 << 20);
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        p.chatTokens("warm", 64);
        long before = mx.getCurrentThreadAllocatedBytes();
        assertTrue(p.chatTokens(text, 64) == PromptPipeline.TOO_LONG);
        long allocated = mx.getCurrentThreadAllocatedBytes() - before;
        assertTrue(allocated < (1 << 20), "refusing allocated " + allocated + " B");
        JsonNode e = error(send("/v1/chat/completions", chat("q", text)));
        assertEquals("context_length_exceeded", e.get("code").asText());
    }

    @Test
    void renderRoutesShowTheTokensUnderTheSameBound() throws Exception {
        String ok = send("/kvgate/v1/chat/completions/render", chat("q", "Where is parcel 9?"));
        assertTrue(ok.startsWith("HTTP/1.1 200 "), ok);
        JsonNode r = JSON.readTree(ok.substring(ok.indexOf("\r\n\r\n") + 4));
        assertTrue(r.get("prompt").asText().contains("Where is parcel 9?"), r.toString());
        assertTrue(r.get("prompt_token_ids").size() > 5);
        JsonNode e = error(send("/kvgate/v1/chat/completions/render", chat("q", "word ".repeat(200))));
        assertEquals("context_length_exceeded", e.get("code").asText());
        String batch = send("/kvgate/v1/completions/render", "{\"model\":\"q\",\"prompt\":[\"a b\",\"c d\",\"e f\"]}");
        assertEquals(3, JSON.readTree(batch.substring(batch.indexOf("\r\n\r\n") + 4)).get("prompts").size(), batch);
        error(send("/kvgate/v1/completions/render", "{\"model\":\"q\",\"prompt\":[\"a b\",\"" + "x y ".repeat(100) + "\"]}"));
        assertEquals(0, h.started.size());
    }

    @Test
    void chwblWithoutATokenizerKeysOnTheFirstPrefixCharsOfTheText() {
        assertEquals("", send("/v1/chat/completions", chat("nt", "Where is parcel 9? Tell me now.")));
        var in = h.started.get(0).inputs();
        assertNull(in.promptTokens());
        assertEquals(RoutingInputs.textPrefixKey("Where is parcel 9? Tell me now.\u001e", 16), in.textPrefixKey());
        assertEquals("", send("/v1/chat/completions", chat("nt", "Where is parcel 9? Something else entirely")));
        assertEquals(in.textPrefixKey(), h.started.get(1).inputs().textPrefixKey(), "same first 16 characters, same key");
        assertEquals("", send("/v1/completions", "{\"model\":\"nt\",\"prompt\":\"Once upon a time there was\"}"));
        assertEquals(RoutingInputs.textPrefixKey("Once upon a time", 16), h.started.get(2).inputs().textPrefixKey());
        assertEquals("", send("/v1/completions", "{\"model\":\"nt\",\"prompt\":[1,2,3]}"));
        assertEquals(RoutingInputs.NO_TEXT_KEY, h.started.get(3).inputs().textPrefixKey(), "token ids route on tokens");
        assertNotNull(h.started.get(3).inputs().promptTokens());
    }

    /** The body stage keeps the longest prefix_chars of the table (here the default 1024 of 'prefix'), no more. */
    @Test
    void theBodyStageKeepsTheTablesLongestPrefixChars() {
        String content = "0123456789".repeat(150);
        assertEquals("", send("/v1/chat/completions", chat("nt", content)));
        var f = h.started.get(0).fields();
        assertEquals(io.kvgate.control.config.RuleConfig.DEFAULT_PREFIX_CHARS, f.textPrefixLimit);
        assertEquals(content.substring(0, io.kvgate.control.config.RuleConfig.DEFAULT_PREFIX_CHARS), f.textPrefix.toString());
        assertEquals(RoutingInputs.textPrefixKey(content, 16), h.started.get(0).inputs().textPrefixKey());
    }

    @Test
    void onlyChwblKeysOnTextAndARuleWithATokenizerKeysOnTokens() {
        assertEquals("", send("/v1/chat/completions", chat("kn", "Where is parcel 9?")));
        assertEquals(RoutingInputs.NO_TEXT_KEY, h.started.get(0).inputs().textPrefixKey(), "kv_exact needs tokens");
        assertEquals("", send("/v1/chat/completions", chat("q", "Where is parcel 9?")));
        assertEquals(RoutingInputs.NO_TEXT_KEY, h.started.get(1).inputs().textPrefixKey());
        assertNotNull(h.started.get(1).inputs().promptTokens());
    }
}
