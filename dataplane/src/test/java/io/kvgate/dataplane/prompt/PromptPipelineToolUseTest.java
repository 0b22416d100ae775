package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Template resolution as transformers' {@code apply_chat_template} does it (issue #13 item 6): when
 * {@code tokenizer_config.json} holds named templates, a request with {@code tools} (present, not null — vLLM and
 * SGLang pass None otherwise) renders with {@code tool_use}, every other request with {@code default}.
 */
class PromptPipelineToolUseTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static PromptPipeline pipeline(Path dir, Object chatTemplate) throws Exception {
        Path qwen = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize().resolve("deploy/models/qwen3");
        Files.copy(qwen.resolve("tokenizer.json.gz"), dir.resolve("tokenizer.json.gz"));
        ObjectNode cfg = (ObjectNode) JSON.readTree(qwen.resolve("tokenizer_config.json").toFile());
        cfg.set("chat_template", JSON.valueToTree(chatTemplate));
        Files.writeString(dir.resolve("tokenizer_config.json"), JSON.writeValueAsString(cfg));
        return PromptPipeline.forModelDir(dir.toString());
    }

    private static JsonNode body(String tools) throws Exception {
        return JSON.readTree("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
            + (tools == null ? "" : ",\"tools\":" + tools) + "}");
    }

    private static final String TOOL = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{}}}]";

    @Test
    void toolsSelectTheNamedToolUseTemplate(@TempDir Path dir) throws Exception {
        PromptPipeline p = pipeline(dir, List.of(
            Map.of("name", "default", "template", "D:{{ messages[0].content }}"),
            Map.of("name", "tool_use", "template", "T{{ tools|length }}:{{ messages[0].content }}")));
        assertEquals("T1:hi", p.renderChatText(body(TOOL)));
        assertEquals("T0:hi", p.renderChatText(body("[]")), "an empty list is not None: tool_use still applies");
        assertEquals("D:hi", p.renderChatText(body(null)));
        assertEquals("D:hi", p.renderChatText(body("null")));
        int[] ids = p.render(true, body(TOOL)).tokenIds();
        assertEquals(p.encodeChat("T1:hi").length, ids.length, "the routed tokens come from the tool_use text");
    }

    @Test
    void aSingleTemplateServesRequestsWithAndWithoutTools(@TempDir Path dir) throws Exception {
        PromptPipeline p = pipeline(dir, "S:{{ messages[0].content }}");
        assertEquals("S:hi", p.renderChatText(body(TOOL)));
        assertEquals("S:hi", p.renderChatText(body(null)));
    }
}
