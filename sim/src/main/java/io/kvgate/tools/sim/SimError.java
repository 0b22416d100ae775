package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * A request the engine refuses: HTTP status plus the OpenAI error fields. Thrown only while validating a request
 * (cold path); the handler renders it in the configured error shape, or sends {@link #body} as is when the engine
 * answers this error in a shape of its own (e.g. SGLang's OpenAI-shaped 404 from {@code GET /v1/models/{id}}).
 */
final class SimError extends RuntimeException {
    final int status;
    final String type;
    final String param;
    /** A fixed body that replaces the dialect's error shape, or null. */
    final ObjectNode body;

    SimError(int status, String type, String message, String param) {
        this(status, type, message, param, null);
    }

    private SimError(int status, String type, String message, String param, ObjectNode body) {
        super(message, null, false, false);
        this.status = status;
        this.type = type;
        this.param = param;
        this.body = body;
    }

    static SimError badRequest(String message) {
        return new SimError(400, "BadRequestError", message, null);
    }

    static SimError badRequest(String message, String param) {
        return new SimError(400, "BadRequestError", message, param);
    }

    /** An error whose body the engine shapes itself. */
    static SimError withBody(int status, String message, ObjectNode body) {
        return new SimError(status, null, message, null, body);
    }
}
