package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.ChatTemplateFile;
import io.kvgate.index.prompt.PromptRenderer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The X-Kvgate-Warning value: names the keys (escaped, bounded), the template in use, what each engine does. */
class TemplateWarningsTest {
    private static final String TEXT = "{{ messages }}";
    private static final PromptPipeline.Template T = new PromptPipeline.Template(PromptPipeline.TemplateSource.TOKENIZER,
        TEXT, ChatTemplateFile.sha256(TEXT), new PromptRenderer((s, special) -> new int[0], TEXT, null, null));

    @Test
    void oneKey() {
        assertEquals("chat_template_kwargs 'enable_thinkin' is not declared by the chat template in use (tokenizer, sha256 "
            + T.sha256().substring(0, 12) + "): vLLM drops it, SGLang passes it to the template, which ignores it",
            TemplateWarnings.header(List.of("enable_thinkin"), T));
    }

    @Test
    void keysAreEscapedToAsciiAndBounded() {
        List<String> keys = new ArrayList<>(List.of("a'b", "é\r\n" + "x".repeat(100)));
        for (int i = 0; i < 10; i++) {
            keys.add("k" + i);
        }
        String h = TemplateWarnings.header(keys, T);
        assertTrue(h.startsWith("chat_template_kwargs 'a\\u0027b', '\\u00e9\\u000d\\u000a" + "x".repeat(61) + "...', 'k0'"), h);
        assertTrue(h.contains("'k5' and 4 more are not declared"), h);
        assertTrue(h.chars().allMatch(c -> c >= 0x20 && c < 0x7f), "a header value is printable ASCII: " + h);
        assertTrue(h.endsWith("vLLM drops them, SGLang passes them to the template, which ignores them"), h);
    }
}
