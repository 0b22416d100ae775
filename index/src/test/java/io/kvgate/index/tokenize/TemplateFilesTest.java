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

    /**
     * The processor's template (vLLM's 2nd priority, SGLang's override): only a directory whose AutoProcessor
     * resolves a processor class has one; its legacy chat_template.json comes first, then the template files, then
     * processor_config.json's own key.
     */
    @Test
    void aProcessorTemplateNeedsAProcessorClass(@TempDir Path dir) throws Exception {
        modelDir(dir, "{\"chat_template\":\"cfg\"}");
        Files.writeString(dir.resolve("chat_template.json"), "{\"chat_template\":\"legacy-processor\"}");
        assertNull(HfTokenizer.load(dir).processorTemplates(), "a text model resolves to its tokenizer: no processor");
        Files.writeString(dir.resolve("preprocessor_config.json"), "{\"processor_class\":\"Qwen2VLProcessor\"}");
        HfTokenizer t = HfTokenizer.load(dir);
        assertEquals("legacy-processor", t.processorTemplates().select(false));
        assertEquals("legacy-processor", t.processorTemplates().select(true));
        assertEquals("cfg", t.config().chatTemplate(), "the tokenizer never reads chat_template.json");
    }

    @Test
    void processorTemplateFilesAndConfigKeyInTransformersOrder(@TempDir Path dir) throws Exception {
        modelDir(dir, "{\"chat_template\":\"cfg\",\"processor_class\":\"LlavaProcessor\"}");
        Files.writeString(dir.resolve("processor_config.json"), "{\"chat_template\":\"from-processor-config\"}");
        assertEquals("from-processor-config", HfTokenizer.load(dir).processorTemplates().select(false));
        Files.writeString(dir.resolve("chat_template.jinja"), "file-default");
        Files.createDirectory(dir.resolve("additional_chat_templates"));
        Files.writeString(dir.resolve("additional_chat_templates/tool_use.jinja"), "file-tools");
        ChatTemplates p = HfTokenizer.load(dir).processorTemplates();
        assertEquals("file-default", p.select(false));
        assertEquals("file-tools", p.select(true));
        Files.writeString(dir.resolve("chat_template.json"), "{\"chat_template\":\"legacy\"}");
        java.io.IOException e = org.junit.jupiter.api.Assertions.assertThrows(java.io.IOException.class, () -> HfTokenizer.load(dir));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("conflicting files"), e.getMessage());
    }

    @Test
    void namedTemplatesSelectLikeGetChatTemplate() {
        ChatTemplates named = new ChatTemplates("d", java.util.Map.of("default", "d", "tool_use", "t"));
        assertEquals("t", named.select(true));
        assertEquals("d", named.select(false));
        ChatTemplates noTools = new ChatTemplates("d", java.util.Map.of("default", "d", "rag", "r"));
        assertEquals("d", noTools.select(true), "no tool_use: the default serves requests with tools");
        assertNull(new ChatTemplates(null, java.util.Map.of("rag", "r")).select(false), "no default: none to use");
        assertEquals("s", new ChatTemplates("s", null).select(true));
    }
}
