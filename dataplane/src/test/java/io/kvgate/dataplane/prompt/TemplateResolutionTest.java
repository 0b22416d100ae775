package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.control.config.ChatTemplateFile;
import io.kvgate.control.config.RuleConfig.Engine;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.prompt.PromptPipeline.TemplateSource;
import io.kvgate.index.tokenize.HfTokenizer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The chat template each engine renders with (issue #13 item 6): vLLM's four-level chain (the --chat-template
 * file, the processor's template unless the request has tools, the tokenizer's, no bundled fallbacks), SGLang's
 * (the .jinja file as it loads it, else the processor's replacing the tokenizer's, else the tokenizer's), and the
 * chat_template_kwargs the template in use does not declare.
 */
class TemplateResolutionTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOOL = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]";

    @TempDir
    Path dir;

    private HfTokenizer tokenizer(Object chatTemplate, boolean processor) throws Exception {
        Path qwen = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize().resolve("deploy/models/qwen3");
        if (!Files.exists(dir.resolve("tokenizer.json.gz"))) {
            Files.copy(qwen.resolve("tokenizer.json.gz"), dir.resolve("tokenizer.json.gz"));
        }
        ObjectNode cfg = (ObjectNode) JSON.readTree(qwen.resolve("tokenizer_config.json").toFile());
        cfg.set("chat_template", JSON.valueToTree(chatTemplate));
        Files.writeString(dir.resolve("tokenizer_config.json"), JSON.writeValueAsString(cfg));
        if (processor) {
            Files.writeString(dir.resolve("preprocessor_config.json"), "{\"processor_class\":\"Qwen2VLProcessor\"}");
            Files.writeString(dir.resolve("chat_template.json"), "{\"chat_template\":\"P:{{ messages[0].content }}\"}");
        }
        return HfTokenizer.load(dir);
    }

    private static JsonNode body(boolean tools) throws Exception {
        return JSON.readTree("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
            + (tools ? ",\"tools\":" + TOOL : "") + "}");
    }

    private static final List<Map<String, String>> NAMED = List.of(
        Map.of("name", "default", "template", "D:{{ messages[0].content }}"),
        Map.of("name", "tool_use", "template", "T:{{ messages[0].content }}{{ enable_thinking }}"));

    @Test
    void vllmProcessorTemplateComesBeforeTheTokenizersUnlessTheRequestHasTools() throws Exception {
        PromptPipeline p = PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), null, tokenizer(NAMED, true));
        assertEquals("P:hi", p.renderChatText(body(false)));
        assertEquals(TemplateSource.PROCESSOR, p.templateFor(false).source());
        assertEquals("T:hi", p.renderChatText(body(true)), "tools skip the processor: the tokenizer's tool_use");
        assertEquals(TemplateSource.TOKENIZER, p.templateFor(true).source());
    }

    @Test
    void sglangProcessorTemplateReplacesTheTokenizersForEveryRequest() throws Exception {
        PromptPipeline p = PromptPipeline.resolve(EngineProfiles.of(Engine.SGLANG).templates(), null, tokenizer(NAMED, true));
        assertEquals("P:hi", p.renderChatText(body(false)));
        assertEquals("P:hi", p.renderChatText(body(true)));
        assertSame(p.templateFor(false), p.templateFor(true), "one template, compiled once");
    }

    @Test
    void withoutProcessorBothEnginesUseTheTokenizersWithTheToolUseSwitch() throws Exception {
        for (Engine e : new Engine[] {Engine.VLLM, Engine.SGLANG, Engine.TRTLLM}) {
            PromptPipeline p = PromptPipeline.resolve(EngineProfiles.of(e).templates(), null, tokenizer(NAMED, false));
            assertEquals("D:hi", p.renderChatText(body(false)), e.name());
            assertEquals("T:hi", p.renderChatText(body(true)), e.name());
        }
    }

    @Test
    void theRulesChatTemplateComesFirstAndSglangLoadsItItsWay() throws Exception {
        String file = "\n\nF:{{ messages[0].content }}\\nX\n";
        ChatTemplateFile f = new ChatTemplateFile("/x/t.jinja", file);
        PromptPipeline vllm = PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), f, tokenizer(NAMED, true));
        assertEquals("\n\nF:hi\\nX", vllm.renderChatText(body(false)), "vLLM: as read");
        assertEquals("\n\nF:hi\\nX", vllm.renderChatText(body(true)), "for requests with tools too");
        assertEquals(TemplateSource.CHAT_TEMPLATE, vllm.templateFor(true).source());
        assertEquals(ChatTemplateFile.sha256(file), vllm.templateFor(false).sha256(), "the digest of the text in use");
        PromptPipeline sglang = PromptPipeline.resolve(EngineProfiles.of(Engine.SGLANG).templates(), f, tokenizer(NAMED, true));
        assertEquals("F:hi\nX", sglang.renderChatText(body(false)), "SGLang strips newlines at both ends, \\n becomes a newline");
        assertEquals(ChatTemplateFile.sha256("F:{{ messages[0].content }}\nX"), sglang.templateFor(false).sha256());
        assertEquals("F:{{ messages[0].content }}\nX", EngineProfiles.of(Engine.SGLANG).templates().chatTemplateFile().apply(file));
        assertEquals("", EngineProfiles.of(Engine.SGLANG).templates().chatTemplateFile().apply("\n\n"));
    }

    @Test
    void aModelWithoutTemplateHasNoneEvenUnderVllm() throws Exception {
        PromptPipeline p = PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), null, tokenizer(null, false));
        assertNull(p.templateFor(false), "vLLM's bundled fallbacks (4th level) are not reproduced");
        assertTrue(p.hasTokenizer());
        org.junit.jupiter.api.Assertions.assertThrows(io.kvgate.index.prompt.PromptException.class,
            () -> p.renderChatText(body(false)));
        assertEquals(List.of(), p.undeclaredKwargs(List.of("anything"), false), "no template to judge by");
    }

    @Test
    void undeclaredKwargsAreThoseTheTemplateInUseNeverReads() throws Exception {
        PromptPipeline p = PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), null, tokenizer(NAMED, false));
        List<String> keys = List.of("enable_thinking", "enable_thinkin", "add_generation_prompt", "enable_thinkin");
        assertEquals(List.of("enable_thinking", "enable_thinkin"), p.undeclaredKwargs(keys, false),
            "the default template reads neither; add_generation_prompt is apply_chat_template's own parameter");
        assertEquals(List.of("enable_thinkin"), p.undeclaredKwargs(keys, true), "tool_use reads enable_thinking");
    }

    @Test
    void pipelinesAreTheSameOnlyForTheSameTokenizerAndTexts() throws Exception {
        HfTokenizer t = tokenizer(NAMED, false);
        ChatTemplateFile a = new ChatTemplateFile("/t.jinja", "A{{ messages }}");
        assertEquals(PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), a, t), PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), a, t));
        assertFalse(PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), a, t).equals(
            PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), new ChatTemplateFile("/t.jinja", "B{{ messages }}"), t)), "the file changed");
        assertFalse(PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), a, t).equals(PromptPipeline.resolve(EngineProfiles.of(Engine.VLLM).templates(), a, HfTokenizer.load(dir))),
            "another tokenizer instance (its directory was re-read)");
    }
}
