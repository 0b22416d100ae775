package io.kvgate.index.tokenize;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The newer HF layout (issue #13 item 6): {@code chat_template.jinja} and {@code additional_chat_templates/*.jinja}
 * beside the tokenizer take priority over {@code tokenizer_config.json}'s {@code chat_template}, as transformers
 * loads them for the engines.
 */
class TemplateFilesTest {
    private static final String CONFIG_LIST = "{\"chat_template\":[{\"name\":\"default\",\"template\":\"cfg-default\"},"
        + "{\"name\":\"tool_use\",\"template\":\"cfg-tools\"}]}";

    private static Path modelDir(Path dir, String config) throws Exception {
        Files.copy(TokenizerTestSupport.modelDir("qwen3").resolve("tokenizer.json.gz"), dir.resolve("tokenizer.json.gz"));
        Files.writeString(dir.resolve("tokenizer_config.json"), config);
        return dir;
    }

    @Test
    void withoutTemplateFilesTheConfigDecides(@TempDir Path dir) throws Exception {
        TokenizerConfig c = HfTokenizer.load(modelDir(dir, CONFIG_LIST)).config();
        assertEquals("cfg-default", c.chatTemplate());
        assertEquals("cfg-tools", c.namedTemplate("tool_use"));
    }

    @Test
    void aLoneChatTemplateJinjaReplacesTheConfigsTemplates(@TempDir Path dir) throws Exception {
        Files.writeString(modelDir(dir, CONFIG_LIST).resolve("chat_template.jinja"), "file-default");
        TokenizerConfig c = HfTokenizer.load(dir).config();
        assertEquals("file-default", c.chatTemplate());
        assertNull(c.namedTemplate("tool_use"), "the config's named list is replaced, not merged");
    }

    @Test
    void additionalTemplatesBecomeNamedTemplates(@TempDir Path dir) throws Exception {
        modelDir(dir, "{\"chat_template\":\"cfg\"}");
        Files.writeString(dir.resolve("chat_template.jinja"), "file-default");
        Files.createDirectory(dir.resolve("additional_chat_templates"));
        Files.writeString(dir.resolve("additional_chat_templates/tool_use.jinja"), "file-tools");
        Files.writeString(dir.resolve("additional_chat_templates/notes.txt"), "not a template");
        TokenizerConfig c = HfTokenizer.load(dir).config();
        assertEquals("file-default", c.chatTemplate());
        assertEquals("file-tools", c.namedTemplate("tool_use"));
        assertNull(c.namedTemplate("notes"));
    }
}
