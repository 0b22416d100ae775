package io.kvgate.index.tokenize;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/** The vLLM-recorded fixtures (Qwen2.5 vocabulary == Qwen3's) must come out of our tokenizer id for id. */
class FixtureParityTest {
    private static Map<String, Object> fixture(String name) throws IOException {
        Path p = TokenizerTestSupport.repoRoot().resolve("index/src/test/resources/fixtures").resolve(name);
        try (InputStream in = Files.newInputStream(p)) {
            return JsonTree.object(JsonTree.parse(in), name);
        }
    }

    private static int[] ints(Object list) throws IOException {
        List<Object> l = JsonTree.array(list, "ids");
        return l.stream().mapToInt(o -> ((Number) o).intValue()).toArray();
    }

    @Test
    void chatTemplateFixtureRenderedPromptsEncodeToVllmIds() throws IOException {
        HfTokenizer qwen = TokenizerTestSupport.ours("qwen3");
        Map<String, Object> cases = JsonTree.object(fixture("kv_chat_template_parity.json").get("cases"), "cases");
        assertFalse(cases.isEmpty());
        for (Map.Entry<String, Object> e : cases.entrySet()) {
            Map<String, Object> c = JsonTree.object(e.getValue(), e.getKey());
            String rendered = JsonTree.string(c.get("rendered_exact"), "rendered_exact");
            int[] expected = ints(c.get("templated_ids"));
            assertArrayEquals(expected, qwen.encode(rendered, false), e.getKey());
            // Qwen's post-processor adds nothing, so /v1/completions (add_special_tokens=true) gives the same ids.
            assertArrayEquals(expected, qwen.encode(rendered, true), e.getKey() + " addSpecialTokens");
        }
    }

    @Test
    void specialTokenTextBecomesTheSingleSpecialId() throws IOException {
        HfTokenizer qwen = TokenizerTestSupport.ours("qwen3");
        Map<String, Object> f = fixture("kv_special_token_parity.json");
        String prompt = JsonTree.string(f.get("prompt"), "prompt");
        int[] expected = ints(f.get("vllm_authoritative_ids"));
        assertArrayEquals(expected, qwen.encode(prompt, false));
        assertArrayEquals(expected, qwen.encode(prompt, true));
        Map<String, Object> ids = JsonTree.object(f.get("special_token_ids"), "special_token_ids");
        for (Map.Entry<String, Object> e : ids.entrySet()) {
            assertEquals(((Number) e.getValue()).intValue(), qwen.tokenId(e.getKey()), e.getKey());
            assertArrayEquals(new int[] {((Number) e.getValue()).intValue()}, qwen.encode(e.getKey(), false));
        }
    }
}
