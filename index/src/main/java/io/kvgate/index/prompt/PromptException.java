package io.kvgate.index.prompt;

/**
 * A request cannot be turned into a prompt. Maps to an HTTP 400 OpenAI error whose {@code param} is {@link #param()}
 * (e.g. {@code messages}, {@code messages[2].content}, {@code prompt}) and whose message is {@link #getMessage()}.
 */
public final class PromptException extends Exception {
    private final String param;

    public PromptException(String param, String message) {
        super(message, null, false, false);
        this.param = param;
    }

    /** The request field at fault, in OpenAI's {@code param} notation. */
    public String param() {
        return param;
    }
}
