package io.kvgate.dataplane.request;

/**
 * The body stage's verdict on an OpenAI request body: a typed {@link Problem} (param, reason, message) or null.
 * Checks only what the gateway itself relies on (one well-formed JSON object, {@code model}, {@code messages} or
 * {@code prompt}, {@code n}); the engine judges everything else. Stateless.
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
        return null;
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

    /** 400 {@code context_length_exceeded}, as OpenAI answers a prompt over the model's context, naming the limit. */
    public static Problem contextLengthExceeded(String param, String what, String ruleName, int maxPromptTokens) {
        return new Problem(param, "context_length_exceeded", "The prompt has " + what + "; rule '" + ruleName
            + "' accepts at most " + maxPromptTokens + " prompt tokens (max_prompt_tokens). Please reduce the length of the "
            + ("messages".equals(param) ? "messages." : "prompt."), "context_length_exceeded");
    }
}
