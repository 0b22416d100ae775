package io.kvgate.tools.sim;

/**
 * A request the engine refuses: HTTP status plus the OpenAI error fields. Thrown only while validating a request
 * (cold path); the handler renders it in the configured error shape.
 */
final class SimError extends RuntimeException {
    final int status;
    final String type;
    final String param;

    SimError(int status, String type, String message, String param) {
        super(message, null, false, false);
        this.status = status;
        this.type = type;
        this.param = param;
    }

    static SimError badRequest(String message) {
        return new SimError(400, "BadRequestError", message, null);
    }

    static SimError badRequest(String message, String param) {
        return new SimError(400, "BadRequestError", message, param);
    }
}
