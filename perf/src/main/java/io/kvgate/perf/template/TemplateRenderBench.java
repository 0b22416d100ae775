package io.kvgate.perf.template;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.index.prompt.JsonValues;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.template.JinjaTemplate;
import io.kvgate.index.template.TemplateException;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Chat-template render cost for a 20-message conversation (system + alternating user/assistant, ~150 chars each) with
 * the real Qwen3 and Llama 3.1 templates, against a hand-written ChatML StringBuilder (the floor: what a fixed,
 * non-Jinja renderer costs for the same bytes) in the same run. {@code qwen3FromJson} adds the request-to-context
 * conversion PromptRenderer does on the request path.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(2)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class TemplateRenderBench {
    private static final ObjectMapper JSON = new ObjectMapper();

    private JinjaTemplate qwen3;
    private JinjaTemplate llama;
    private Map<String, Object> qwenCtx;
    private Map<String, Object> llamaCtx;
    private JsonNode body;
    private PromptRenderer renderer;
    private List<Object> messages;

    @Setup
    public void setup() throws IOException, TemplateException {
        Path root = Path.of(System.getProperty("kvgate.home", "."));
        JsonNode qcfg = JSON.readTree(root.resolve("deploy/models/qwen3/tokenizer_config.json").toFile());
        JsonNode lcfg = JSON.readTree(root.resolve("deploy/models/llama3_1/tokenizer_config.json").toFile());
        qwen3 = JinjaTemplate.compile(qcfg.get("chat_template").asText());
        llama = JinjaTemplate.compile(lcfg.get("chat_template").asText());
        ObjectNode b = JSON.createObjectNode();
        ArrayNode msgs = b.putArray("messages");
        msgs.addObject().put("role", "system").put("content", "You are a helpful assistant. Answer concisely and cite sources.");
        for (int i = 0; i < 19; i++) {
            msgs.addObject().put("role", i % 2 == 0 ? "user" : "assistant").put("content",
                    "Turn " + i + ": the KV cache of a prefix is reused when the next request shares the same tokens; "
                            + "routing by prefix keeps that reuse high.");
        }
        b.putObject("chat_template_kwargs").put("enable_thinking", false);
        body = b;
        @SuppressWarnings("unchecked")
        List<Object> m = (List<Object>) JsonValues.toJava(msgs);
        messages = m;
        qwenCtx = new HashMap<>();
        qwenCtx.put("messages", messages);
        qwenCtx.put("tools", null);
        qwenCtx.put("add_generation_prompt", true);
        qwenCtx.put("enable_thinking", false);
        qwenCtx.put("eos_token", "<|im_end|>");
        llamaCtx = new HashMap<>();
        llamaCtx.put("messages", messages);
        llamaCtx.put("add_generation_prompt", true);
        llamaCtx.put("bos_token", "<|begin_of_text|>");
        renderer = new PromptRenderer((text, add) -> new int[0], qcfg.get("chat_template").asText(), null, "<|im_end|>");
        String viaTemplate = qwen3Render();
        if (!viaTemplate.equals(handWrittenChatMl())) {
            throw new IllegalStateException("baseline does not produce the template's bytes");
        }
    }

    @Benchmark
    public String qwen3Render() throws TemplateException {
        return qwen3.render(qwenCtx);
    }

    @Benchmark
    public String llama31Render() throws TemplateException {
        return llama.render(llamaCtx);
    }

    @Benchmark
    public String qwen3FromJson() throws PromptException {
        return renderer.renderChatText(body);
    }

    /** Baseline: the same Qwen3 output produced by fixed code (no template interpretation). */
    @Benchmark
    public String handWrittenChatMl() {
        StringBuilder sb = new StringBuilder(4096);
        for (Object o : messages) {
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) o;
            sb.append("<|im_start|>").append(m.get("role")).append('\n').append(m.get("content")).append("<|im_end|>\n");
        }
        sb.append("<|im_start|>assistant\n<think>\n\n</think>\n\n");
        return sb.toString();
    }
}
