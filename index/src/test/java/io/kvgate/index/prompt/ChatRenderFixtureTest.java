package io.kvgate.index.prompt;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.tokenize.Tokenizer;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Whole chat requests (OpenAI bodies with array content, string tool-call arguments, tools without descriptions,
 * reasoning, chat_template_kwargs, continue_final_message) rendered through {@link PromptRenderer} equal the reference
 * that mirrors vLLM's preprocessing + transformers' apply_chat_template (fixtures/chat_render_cases.json).
 */
class ChatRenderFixtureTest {
    private static final Tokenizer NO_TOKENIZER = (text, add) -> {
        throw new AssertionError("text-only test");
    };

    @TestFactory
    List<DynamicTest> chatRequestsRenderLikeVllm() {
        Map<String, PromptRenderer> renderers = new HashMap<>();
        for (String m : List.of("qwen3", "llama3_1")) {
            JsonNode cfg = TestSupport.tokenizerConfig(m);
            renderers.put(m, new PromptRenderer(NO_TOKENIZER, cfg.get("chat_template").asText(),
                    cfg.path("bos_token").isTextual() ? cfg.get("bos_token").asText() : null,
                    cfg.path("eos_token").isTextual() ? cfg.get("eos_token").asText() : null));
        }
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode c : TestSupport.fixture("chat_render_cases.json").get("cases")) {
            tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> {
                PromptRenderer r = renderers.get(c.get("model").asText());
                if (c.has("error")) {
                    assertThrows(PromptException.class, () -> r.renderChatText(c.get("body")), c.get("message").asText());
                } else {
                    assertEquals(c.get("output").asText(), r.renderChatText(c.get("body")));
                }
            }));
        }
        return tests;
    }
}
