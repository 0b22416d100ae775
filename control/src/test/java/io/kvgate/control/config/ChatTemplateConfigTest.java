package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code rules[].chat_template}: the engines' --chat-template file, read with the configuration (issue #13 item 6). */
class ChatTemplateConfigTest {
    @TempDir
    Path dir;

    private String config(String engine, String template, boolean tokenizer) {
        return "rules:\n  - name: r\n    engine: " + engine + "\n    models: [m]\n"
            + (tokenizer ? "    tokenizer: .\n" : "") + "    chat_template: " + template
            + "\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    private String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml, dir, n -> null));
        return String.join("\n", e.problems());
    }

    @Test
    void theFileIsReadRelativeToTheConfigAndShownByPath() throws Exception {
        Files.writeString(dir.resolve("t.jinja"), "T:{{ messages[0].content }}");
        RuleConfig r = GatewayConfig.parse(config("vllm", "t.jinja", true), dir, n -> null).rules().get(0);
        assertEquals(dir.resolve("t.jinja").toString(), r.chatTemplate().path());
        assertEquals("T:{{ messages[0].content }}", r.chatTemplate().source());
        assertEquals(64, r.chatTemplate().sha256().length());
        @SuppressWarnings("unchecked")
        Map<String, Object> tree = ((List<Map<String, Object>>) ConfigTree.toTree(
            GatewayConfig.parse(config("vllm", "t.jinja", true), dir, n -> null), false).get("rules")).get(0);
        assertEquals(dir.resolve("t.jinja").toString(), tree.get("chat_template"));
    }

    @Test
    void aChangedFileIsAChangedRuleUnderTheSamePath() throws Exception {
        Path f = dir.resolve("t.jinja");
        Files.writeString(f, "A{{ messages }}");
        GatewayConfig before = GatewayConfig.parse(config("sglang", "t.jinja", true), dir, n -> null);
        Files.writeString(f, "B{{ messages }}");
        GatewayConfig after = GatewayConfig.parse(config("sglang", "t.jinja", true), dir, n -> null);
        assertNotEquals(before, after, "a reload must rebuild the rule's prompt pipeline");
        List<String> diff = ConfigTree.diff(before, after);
        assertEquals(1, diff.size(), diff.toString());
        assertTrue(diff.get(0).startsWith("rules[name=r].chat_template.sha256: " + before.rules().get(0).chatTemplate().sha256()
            + " -> " + after.rules().get(0).chatTemplate().sha256()), diff.toString());
    }

    @Test
    void badValuesNameTheKeyTheValueAndTheRule() throws Exception {
        String p = problems(config("vllm", "missing.jinja", true));
        assertTrue(p.contains("rules (name=r).chat_template: value 'missing.jinja' cannot be read (NoSuchFileException"), p);
        Files.writeString(dir.resolve("t.json"), "{}");
        p = problems(config("sglang", "t.json", true));
        assertTrue(p.contains("rules[0] (name=r).chat_template: value 't.json' must end in '.jinja' on engine 'sglang'"), p);
        Files.writeString(dir.resolve("t.jinja"), "x");
        p = problems(config("vllm", "t.jinja", false));
        assertTrue(p.contains("rules[0] (name=r).chat_template: value 't.jinja' needs 'tokenizer' on the same rule"), p);
        p = problems(config("trtllm", "t.jinja", true));
        assertTrue(p.contains("rules[0] (name=r).chat_template: value 't.jinja' is only supported on engines 'vllm' and 'sglang'"), p);
        Files.write(dir.resolve("latin1.jinja"), new byte[] {'a', (byte) 0xE9});
        p = problems(config("vllm", "latin1.jinja", true));
        assertTrue(p.contains("rules (name=r).chat_template: value 'latin1.jinja' is not UTF-8 text"), p);
    }
}
