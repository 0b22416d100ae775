package io.kvgate.index.prompt;

/**
 * One prompt as the engine will see it.
 *
 * @param text the rendered text, or {@code null} for a prompt given as token ids
 * @param tokenIds the token ids the engine will compute KV for (owned by the caller; do not mutate shared instances)
 */
public record RenderedPrompt(String text, int[] tokenIds) {
}
