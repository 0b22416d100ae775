package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.tokenize.ChatTemplates;
import io.kvgate.index.tokenize.HfTokenizer;
import io.kvgate.index.tokenize.TokenizerConfig;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * {@code --model-dir}: the model's real HF tokenizer and Jinja chat template, so prompt token ids (usage, block
 * keys, KV event {@code token_ids}) are the ones the engine computes: chat is rendered by the checkpoint's template
 * and tokenized with {@code add_special_tokens=False}; completions text with {@code add_special_tokens=True};
 * token-id prompts are used as given.
 *
 * <p>Template choice per request, as the engines resolve it:
 * <ul>
 *   <li>vLLM ({@code resolve_chat_template}): the server's {@code --chat-template} file as read; else, unless the
 *       request has {@code tools}, the processor's template (only a checkpoint whose AutoProcessor finds a processor
 *       class has one: {@code chat_template.json}, or its template files — so adding tools can switch the
 *       template); else the tokenizer's, through transformers' {@code apply_chat_template(tools=...)}, which picks
 *       a named {@code tool_use} template for a request with tools.</li>
 *   <li>SGLang ({@code TemplateManager}): the {@code --chat-template} {@code .jinja} file, loaded as SGLang does
 *       (newlines stripped at both ends, literal backslash-n turned into newlines), for every request; else the
 *       processor's template, which replaces the tokenizer's ({@code _resolve_hf_chat_template}); else the
 *       tokenizer's, with the same {@code tool_use} switch.</li>
 * </ul>
 * Thread-safe (the tokenizer and renderers are).
 */
final class ModelDirTokenizer implements PromptTokenizer {
    private final HfTokenizer tokenizer;
    /** The renderer for a request without tools, and the one for a request with tools (maybe the same). */
    private final PromptRenderer plainRenderer;
    private final PromptRenderer toolsRenderer;

    ModelDirTokenizer(Path modelDir, Dialect dialect) {
        this(modelDir, dialect, null);
    }

    /** @param chatTemplate the engine's {@code --chat-template} file, or null */
    ModelDirTokenizer(Path modelDir, Dialect dialect, Path chatTemplate) {
        try {
            this.tokenizer = HfTokenizer.load(modelDir);
        } catch (IOException e) {
            throw new UncheckedIOException("model-dir=" + modelDir + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
        TokenizerConfig tc = tokenizer.config();
        String flag = chatTemplate == null ? null : read(chatTemplate);
        ChatTemplates processor = tokenizer.processorTemplates();
        ChatTemplates tok = tc.templates();
        String plain;
        String tools;
        if (flag != null) {
            plain = tools = dialect == Dialect.SGLANG ? sglangLoaded(flag) : flag;
        } else if (dialect == Dialect.SGLANG && processor != null && (processor.defaultTemplate() != null || !processor.named().isEmpty())) {
            plain = processor.select(false); // the processor's template replaces the tokenizer's
            tools = processor.select(true);
        } else {
            tools = tok == null ? null : tok.select(true);
            String processorPlain = dialect == Dialect.VLLM && processor != null ? processor.select(false) : null;
            plain = processorPlain != null ? processorPlain : tok == null ? null : tok.select(false);
        }
        this.plainRenderer = renderer(plain);
        this.toolsRenderer = java.util.Objects.equals(plain, tools) ? plainRenderer : renderer(tools);
    }

    private PromptRenderer renderer(String template) {
        TokenizerConfig tc = tokenizer.config();
        return new PromptRenderer(tokenizer::encode, template, tc.bosToken(), tc.eosToken());
    }

    private static String read(Path f) {
        try {
            return Files.readString(f);
        } catch (IOException e) {
            throw new UncheckedIOException("chat-template: cannot read " + f + ": " + e.getMessage(), e);
        }
    }

    /** SGLang's {@code _load_jinja_template}: {@code "".join(f.readlines()).strip("\n").replace("\\n", "\n")}. */
    static String sglangLoaded(String file) {
        String t = file;
        while (t.startsWith("\n")) {
            t = t.substring(1);
        }
        while (t.endsWith("\n")) {
            t = t.substring(0, t.length() - 1);
        }
        return t.replace("\\n", "\n");
    }

    /** Which template renders this request (see the class comment). */
    PromptRenderer rendererFor(JsonNode request) {
        JsonNode tools = request.get("tools");
        return tools != null && !tools.isNull() ? toolsRenderer : plainRenderer;
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
