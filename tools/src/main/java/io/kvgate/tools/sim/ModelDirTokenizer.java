package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.prompt.PromptException;
import io.kvgate.index.prompt.PromptRenderer;
import io.kvgate.index.tokenize.HfTokenizer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;

/**
 * {@code --model-dir}: the model's real HF tokenizer and Jinja chat template, so prompt token ids (usage, block
 * keys, KV event {@code token_ids}) are the ones vLLM computes: chat is rendered by the checkpoint's
 * {@code chat_template} and tokenized with {@code add_special_tokens=False}; completions text with
 * {@code add_special_tokens=True}; token-id prompts are used as given. Thread-safe (the tokenizer and renderer
 * are).
 */
final class ModelDirTokenizer implements PromptTokenizer {
    private final HfTokenizer tokenizer;
    private final PromptRenderer renderer;

    ModelDirTokenizer(Path modelDir) {
        try {
            this.tokenizer = HfTokenizer.load(modelDir);
        } catch (IOException e) {
            throw new UncheckedIOException("model-dir=" + modelDir + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
        this.renderer = new PromptRenderer(tokenizer::encode, tokenizer.config().chatTemplate(),
            tokenizer.config().bosToken(), tokenizer.config().eosToken());
    }

    @Override
    public int[] encodeChat(JsonNode request) {
        try {
            return renderer.renderChat(request).tokenIds();
        } catch (PromptException e) {
            throw SimError.badRequest(e.getMessage(), e.param());
        }
    }

    @Override
    public int[] encodeText(String prompt) {
        return tokenizer.encode(prompt, true);
    }
}
