package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Turns a request's prompt into the token ids the engine would prefill. Two implementations: {@link WordTokenizer}
 * (no model directory: a documented deterministic scheme) and the real tokenizer + chat template when
 * {@code --model-dir} is given. Implementations must be thread-safe or confined to the engine loop.
 */
interface PromptTokenizer {
    /** Chat: render {@code messages} (plus tools etc. from the request) and tokenize like the engine does. */
    int[] encodeChat(JsonNode request);

    /** Completions: tokenize a text prompt ({@code add_special_tokens=True} in vLLM). */
    int[] encodeText(String prompt);
}
