package io.kvgate.index.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Live-vLLM ground truth (fixtures/kv_chat_template_parity.json, kv_special_token_parity.json): rendered text and token
 * ids of Qwen2.5-7B-Instruct chats (its template in fixtures/templates/qwen2_5.jinja, vocabulary = the in-repo Qwen3
 * tokenizer) and a completions prompt starting with special-token text, through our renderer + the real tokenizer.
 */
class KvParityTest {
    private static String qwen25Template() throws IOException {
        try (InputStream in = KvParityTest.class.getResourceAsStream("/fixtures/templates/qwen2_5.jinja")) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void qwen25ChatCasesRenderAndTokenizeLikeVllm() throws Exception {
        JsonNode fx = TestSupport.fixture("kv_chat_template_parity.json");
        PromptRenderer r = new PromptRenderer(TestSupport.tokenizer("qwen3"), qwen25Template(), null, "<|im_end|>");
        int n = 0;
        for (Map.Entry<String, JsonNode> e : fx.get("cases").properties()) {
            ObjectNode body = TestSupport.JSON.createObjectNode();
            body.set("messages", e.getValue().get("messages"));
            RenderedPrompt p = r.renderChat(body);
            assertEquals(e.getValue().get("rendered_exact").asText(), p.text(), e.getKey());
            int[] expected = TestSupport.JSON.convertValue(e.getValue().get("templated_ids"), int[].class);
            assertArrayEquals(expected, p.tokenIds(), e.getKey());
            n++;
        }
        assertEquals(3, n);
    }

    @Test
    void completionPromptWithSpecialTokenTextTokenizesLikeVllm() throws Exception {
        JsonNode fx = TestSupport.fixture("kv_special_token_parity.json");
        PromptRenderer r = new PromptRenderer(TestSupport.tokenizer("qwen3"), null, null, null);
        ObjectNode body = TestSupport.JSON.createObjectNode();
        body.put("prompt", fx.get("prompt").asText());
        List<RenderedPrompt> out = r.renderCompletion(body);
        assertEquals(1, out.size());
        assertEquals(fx.get("prompt").asText(), out.get(0).text());
        assertArrayEquals(TestSupport.JSON.convertValue(fx.get("vllm_authoritative_ids"), int[].class), out.get(0).tokenIds());
    }

    @Test
    void llamaChatStartsWithOneBos() throws Exception {
        JsonNode cfg = TestSupport.tokenizerConfig("llama3_1");
        PromptRenderer r = new PromptRenderer(TestSupport.tokenizer("llama3_1"), cfg.get("chat_template").asText(),
                cfg.get("bos_token").asText(), cfg.get("eos_token").asText());
        RenderedPrompt p = r.renderChat(TestSupport.JSON.readTree("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"));
        assertEquals("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                + "<|start_header_id|>assistant<|end_header_id|>\n\n", p.text());
        assertEquals(128000, p.tokenIds()[0]);
        assertEquals(128006, p.tokenIds()[1]);
        // completions add BOS themselves; token-id prompts pass through untouched
        List<RenderedPrompt> c = r.renderCompletion(TestSupport.JSON.readTree("{\"prompt\":[\"hi\",\"there\"]}"));
        assertEquals(128000, c.get(0).tokenIds()[0]);
        assertEquals(2, c.size());
        List<RenderedPrompt> ids = r.renderCompletion(TestSupport.JSON.readTree("{\"prompt\":[[1,2,3],[4]]}"));
        assertNull(ids.get(0).text());
        assertArrayEquals(new int[] {1, 2, 3}, ids.get(0).tokenIds());
        assertArrayEquals(new int[] {4}, ids.get(1).tokenIds());
    }
}
