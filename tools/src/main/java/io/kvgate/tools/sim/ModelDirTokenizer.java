package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.tokenize.HfTokenizer;
import io.kvgate.index.tokenize.TokenizerConfig;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * {@code --model-dir}: the model's real HF tokenizer and Jinja chat template, so prompt token ids (usage, block
 * keys, KV event {@code token_ids}) are the ones the engine computes: chat is rendered by the checkpoint's template
 * and tokenized with {@code add_special_tokens=False}; completions text with {@code add_special_tokens=True};
 * token-id prompts are used as given.
 *
 * <p>Template choice per request, as the engines resolve it:
 * <ul>
 *   <li>both engines render through transformers' {@code apply_chat_template(tools=...)}: when the request has
 *       {@code tools} and {@code tokenizer_config.json} holds a list of named templates with a {@code tool_use}
 *       entry, that one is used, else the {@code default} entry;</li>
 *   <li>vLLM only: a processor template ({@code chat_template.json} in the model directory) comes before the
 *       tokenizer's, but is skipped when the request has {@code tools} (vllm resolve_hf_chat_template, 2nd
 *       priority "unless tool calling is enabled") — so adding tools can switch the template file.</li>
 * </ul>
 * Thread-safe (the tokenizer and renderers are).
 */
final class ModelDirTokenizer implements PromptTokenizer {
    private final HfTokenizer tokenizer;
    private final PromptRenderer defaultRenderer;
    /** The tokenizer's named {@code tool_use} template, or null. */
    private final PromptRenderer toolUseRenderer;
    /** vLLM: the processor's template (used only without tools), or null. */
    private final PromptRenderer processorRenderer;

    ModelDirTokenizer(Path modelDir, Dialect dialect) {
        try {
            this.tokenizer = HfTokenizer.load(modelDir);
        } catch (IOException e) {
            throw new UncheckedIOException("model-dir=" + modelDir + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
        TokenizerConfig tc = tokenizer.config();
        this.defaultRenderer = renderer(tc.chatTemplate());
        String toolUse = namedTemplate(tc.raw().get("chat_template"), "tool_use");
        this.toolUseRenderer = toolUse == null ? null : renderer(toolUse);
        String processor = dialect == Dialect.VLLM ? processorTemplate(modelDir) : null;
        this.processorRenderer = processor == null ? null : renderer(processor);
    }

    private PromptRenderer renderer(String template) {
        TokenizerConfig tc = tokenizer.config();
        return new PromptRenderer(tokenizer::encode, template, tc.bosToken(), tc.eosToken());
    }

    private static String namedTemplate(Object chatTemplate, String name) {
        if (chatTemplate instanceof List<?> list) {
            for (Object o : list) {
                if (o instanceof Map<?, ?> m && name.equals(m.get("name")) && m.get("template") instanceof String t) {
                    return t;
                }
            }
        }
        return null;
    }

    /** {@code chat_template.json} ({"chat_template": "..."}), what AutoProcessor loads; null when absent. */
    private static String processorTemplate(Path modelDir) {
        Path f = modelDir.resolve("chat_template.json");
        if (!Files.isRegularFile(f)) {
            return null;
        }
        try {
            JsonNode n = SimReplies.MAPPER.readTree(f.toFile());
            JsonNode t = n.get("chat_template");
            if (t == null || !t.isTextual()) {
                throw new IllegalArgumentException("model-dir: " + f + ": needs a string \"chat_template\"");
            }
            return t.asText();
        } catch (IOException e) {
            throw new UncheckedIOException("model-dir: cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    /** Which template renders this request (see the class comment). */
    PromptRenderer rendererFor(JsonNode request) {
        JsonNode tools = request.get("tools");
        boolean hasTools = tools != null && !tools.isNull();
        if (!hasTools && processorRenderer != null) {
            return processorRenderer;
        }
        if (hasTools && toolUseRenderer != null) {
            return toolUseRenderer;
        }
        return defaultRenderer;
    }

    @Override
    public int[] encodeChat(JsonNode request) {
        try {
            return rendererFor(request).renderChat(request).tokenIds();
        } catch (PromptException e) {
            throw SimError.badRequest(e.getMessage(), e.param());
        }
    }

    /** The rendered prompt text (tests). */
    String renderChatText(JsonNode request) {
        try {
            return rendererFor(request).renderChatText(request);
        } catch (PromptException e) {
            throw SimError.badRequest(e.getMessage(), e.param());
        }
    }

    @Override
    public int[] encodeText(String prompt) {
        return tokenizer.encode(prompt, true);
    }
}
