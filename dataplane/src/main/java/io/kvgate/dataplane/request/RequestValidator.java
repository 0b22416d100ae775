package io.kvgate.dataplane.request;

/**
 * The body stage's verdict on an OpenAI request body: a typed {@link Problem} (param, reason, message) or null.
 * Checks what the gateway itself relies on (one well-formed JSON object, {@code model}, {@code messages} or
 * {@code prompt}, {@code n}) and the field combinations vLLM and SGLang judge differently, so a client gets the same
 * OpenAI 400 whichever engine serves the rule ({@link #sameForEveryEngine}); the engine judges everything else.
 * Stateless.
 */
public final class RequestValidator {
    private RequestValidator() {}

    /**
     * @param extractor the parser the body was fed to (finished here)
     * @param chat      {@code /v1/chat/completions} shape (messages) rather than completions (prompt)
     */
    public static Problem validate(RequestFieldExtractor extractor, RequestFields f, boolean chat) {
        switch (extractor.finish()) {
            case EMPTY -> {
                return Problem.body("empty_body", "The request body is empty: send a JSON object.");
            }
            case NOT_OBJECT -> {
                return Problem.body("not_an_object", "The request body must be a JSON object.");
            }
            case MALFORMED -> {
                return Problem.body("malformed_json", "We could not parse the JSON body of your request: " + extractor.error());
            }
            default -> { }
        }
        if (f.modelNotString) {
            return Problem.field("model", "invalid_model", "'model' must be a string.");
        }
        if (f.model == null) {
            return Problem.field("model", "missing_model", "You must provide a model parameter.");
        }
        if (chat && !f.hasMessages) {
            return Problem.field("messages", "missing_messages", "'messages' is a required property.");
        }
        if (chat && f.messagesNotArray) {
            return Problem.field("messages", "invalid_messages", "'messages' must be an array of message objects.");
        }
        if (!chat && !f.hasPrompt) {
            return Problem.field("prompt", "missing_prompt", "'prompt' is a required property.");
        }
        if (f.nInvalid) {
            return Problem.field("n", "invalid_n", "'n' must be an integer.");
        }
        if (f.n < 1) {
            return Problem.field("n", "invalid_n", "'n' must be at least 1.");
        }
        return sameForEveryEngine(f, chat);
    }

    /**
     * OpenAI's 400s for requests vLLM and SGLang answer differently (issue #13 item 2; review rows 6, 22 and
     * {@code max_tokens} ≤ 0): vLLM refuses {@code stream_options} without {@code stream: true} and SGLang ignores
     * it; vLLM refuses {@code top_logprobs} without {@code logprobs: true} and SGLang accepts it; vLLM refuses
     * {@code max_tokens: 0} and SGLang's chat answers an empty 200. The gateway answers all of them as OpenAI does,
     * before any engine sees them.
     */
    static Problem sameForEveryEngine(RequestFields f, boolean chat) {
        if (f.hasStreamOptions && !f.stream) {
            return new Problem("stream_options", "stream_options_without_stream",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "invalid_value");
        }
        if (chat && f.hasTopLogprobs && !f.logprobsTrue) {
            return new Problem("top_logprobs", "top_logprobs_without_logprobs",
                "The 'top_logprobs' parameter is only allowed when 'logprobs' is enabled.", "invalid_value");
        }
        if (f.hasMaxTokens && f.maxTokens < 1) {
            return belowOne("max_tokens", f.maxTokens);
        }
        if (f.hasMaxCompletionTokens && f.maxCompletionTokens < 1) {
            return belowOne("max_completion_tokens", f.maxCompletionTokens);
        }
        return null;
    }

    private static Problem belowOne(String param, int value) {
        return new Problem(param, "max_tokens_below_one", "Invalid '" + param + "': integer below minimum value. "
            + "Expected a value >= 1, but got " + value + " instead.", "integer_below_min_value");
    }

    /**
     * The rule's bounds on what one request may ask the engines for: at most {@code max_n} choices and at most
     * {@code max_n} batched prompts (each costs engine work, and on SGLang P/D a bootstrap room the gateway builds).
     */
    public static Problem withinRule(RequestFields f, boolean chat, String ruleName, int maxN, int maxPromptTokens) {
        if (f.n > maxN) {
            return Problem.field("n", "n_over_max", "'n' is " + f.n + "; rule '" + ruleName + "' allows at most " + maxN
                + " choices per request (max_n).");
        }
        if (!chat && f.promptCount > maxN) {
            return Problem.field("prompt", "batch_over_max", "The request batches " + f.promptCount + " prompts; rule '"
                + ruleName + "' allows at most " + maxN + " per request (max_n).");
        }
        if (!chat && f.promptTokenIdsMax > maxPromptTokens) {
            // Token ids were counted while the body streamed in: refused before any parse, render or hash.
            return contextLengthExceeded("prompt", f.promptTokenIdsMax + " tokens", ruleName, maxPromptTokens);
        }
        return null;
    }

    /**
     * {@code greedy_n: reject}: {@code n > 1} at {@code temperature: 0} gets vLLM's 400 (its wording, OpenAI's
     * shape) from every engine, SGLang included, before any engine sees it. Under {@code replicate} (the default) it
     * is accepted everywhere ({@link AnswerRewrite}). Checked after {@code max_n}, which bounds {@code n} first.
     */
    public static Problem greedyN(RequestFields f, io.kvgate.control.config.RuleConfig.GreedyN mode) {
        if (mode == io.kvgate.control.config.RuleConfig.GreedyN.REJECT && AnswerRewrite.greedyN(f)) {
            return new Problem("n", "greedy_n", "n must be 1 when using greedy sampling.", "invalid_value");
        }
        return null;
    }

    /** 400 {@code context_length_exceeded}, as OpenAI answers a prompt over the model's context, naming the limit. */
    public static Problem contextLengthExceeded(String param, String what, String ruleName, int maxPromptTokens) {
        return new Problem(param, "context_length_exceeded", "The prompt has " + what + "; rule '" + ruleName
            + "' accepts at most " + maxPromptTokens + " prompt tokens (max_prompt_tokens). Please reduce the length of the "
            + ("messages".equals(param) ? "messages." : "prompt."), "context_length_exceeded");
    }
}
