package io.kvgate.index.tokenize;

/**
 * Text to token ids, exactly as the model's HF tokenizer does it.
 *
 * <p>Threading contract: implementations must be thread-safe; {@code encode} is called concurrently from request threads.
 */
public interface Tokenizer {
    /**
     * @param text the text to encode; special-token text (e.g. {@code <|im_end|>}) becomes its single id
     * @param addSpecialTokens whether to add the tokenizer's BOS/EOS post-processing (false for rendered chat prompts)
     */
    int[] encode(CharSequence text, boolean addSpecialTokens);
}
