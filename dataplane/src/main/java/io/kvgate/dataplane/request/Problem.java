package io.kvgate.dataplane.request;

/**
 * Why a request body was refused: the OpenAI {@code param} it concerns (null when it is the body as a whole), a
 * stable machine {@code reason} (the {@code kvgate_bad_requests_total} label), the client-facing message, and the
 * OpenAI error {@code code} where OpenAI defines one (e.g. {@code context_length_exceeded}), else null. The front
 * door turns it into a 400 OpenAI error object without looking at the message text.
 */
public record Problem(String param, String reason, String message, String openAiCode) {
    /** A problem with the body as a whole (empty, not JSON, not an object). */
    public static Problem body(String reason, String message) {
        return new Problem(null, reason, message, null);
    }

    /** A problem with one top-level field. */
    public static Problem field(String param, String reason, String message) {
        return new Problem(param, reason, message, null);
    }
}
