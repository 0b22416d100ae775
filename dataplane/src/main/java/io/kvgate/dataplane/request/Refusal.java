package io.kvgate.dataplane.request;

import io.kvgate.dataplane.openai.OpenAiErrors;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.util.AsciiString;

/**
 * The one way a request stage says no: every stage of the {@code RequestPipeline} returns a {@code Refusal} or null.
 * It carries the HTTP status, the OpenAI error object's {@code message}, {@code param} and {@code code} (its
 * {@code type} follows from the status, {@link OpenAiErrors#typeFor}), the machine {@link #reason()} the refusal is
 * counted under ({@code kvgate_bad_requests_total}, or {@code kvgate_shed_total} for {@link #shed()}) and the access
 * log's {@code error_code}, whether the connection closes after the answer, and at most one extra header
 * ({@code Allow}, {@code WWW-Authenticate}, {@code Retry-After}).
 *
 * <p>Refusals whose text never varies are constants; the others are built by the factories below, which run only on
 * the refusal path: an accepted request allocates none. Immutable.
 */
public final class Refusal {
    /** The 401 of a missing or wrong API key (and of an unknown {@code /v1/} route asked without one). */
    public static final Refusal UNAUTHORIZED = new Refusal(HttpResponseStatus.UNAUTHORIZED, "unauthorized",
        "Missing or invalid API key (Authorization: Bearer ...).", null, null, false, false,
        HttpHeaderNames.WWW_AUTHENTICATE, "Bearer");

    private final HttpResponseStatus status;
    private final String reason;
    private final String message;
    private final String param;
    private final String code;
    private final boolean close;
    private final boolean shed;
    private final AsciiString headerName;
    private final Object headerValue;

    private Refusal(HttpResponseStatus status, String reason, String message, String param, String code, boolean close,
                    boolean shed, AsciiString headerName, Object headerValue) {
        this.status = status;
        this.reason = reason;
        this.message = message;
        this.param = param;
        this.code = code;
        this.close = close;
        this.shed = shed;
        this.headerName = headerName;
        this.headerValue = headerValue;
    }

    /** A request refused with {@code status}; the connection goes on when the client lets it. */
    public static Refusal of(HttpResponseStatus status, String reason, String message) {
        return new Refusal(status, reason, message, null, null, false, false, null, null);
    }

    /**
     * A refusal after which the connection closes (lingering while the client may still be sending): the request
     * cannot be read to its end (malformed, too large, too slow), so nothing after it can be trusted to start at a
     * request boundary.
     */
    public static Refusal closing(HttpResponseStatus status, String reason, String message) {
        return new Refusal(status, reason, message, null, null, true, false, null, null);
    }

    /** The 400 of a body problem: its param, reason and OpenAI code as the validator named them. */
    public static Refusal of(Problem p) {
        return new Refusal(HttpResponseStatus.BAD_REQUEST, p.reason(), p.message(), p.param(), p.openAiCode(), false,
            false, null, null);
    }

    /** A 404 about the request's {@code model}, with an OpenAI {@code code} ({@code model_not_found}...). */
    public static Refusal model(String reason, String message, String code) {
        return new Refusal(HttpResponseStatus.NOT_FOUND, reason, message, "model", code, false, false, null, null);
    }

    /**
     * The 503 of a draining gateway, counted as shed (it is not the client's fault) and closing the connection, so
     * the client's next request goes to another instance.
     */
    public static Refusal draining(long retryAfterSeconds) {
        return new Refusal(HttpResponseStatus.SERVICE_UNAVAILABLE, "draining",
            "The gateway is draining and takes no new requests; retry (another instance will answer).", null, null,
            true, true, HttpHeaderNames.RETRY_AFTER, retryAfterSeconds);
    }

    /** The 405 of a method the route does not take, naming the one it does in {@code Allow}. */
    public static Refusal methodNotAllowed(String path, String allowed) {
        return new Refusal(HttpResponseStatus.METHOD_NOT_ALLOWED, "method_not_allowed",
            "Method not allowed on " + path + " (use " + allowed + ").", null, null, false, false, HttpHeaderNames.ALLOW,
            allowed);
    }

    /**
     * A tenant over one of its limits: OpenAI's 429 ({@code rate_limit_error}, code {@code rate_limit_exceeded}) with
     * {@code Retry-After} in whole seconds, at least 1. The {@code x-ratelimit-*} headers are added by the front door
     * to every answer of a limited tenant.
     */
    public static Refusal rateLimited(String message, long retryAfterSeconds) {
        return new Refusal(HttpResponseStatus.TOO_MANY_REQUESTS, "rate_limit_exceeded", message, null, "rate_limit_exceeded",
            false, false, HttpHeaderNames.RETRY_AFTER, Math.max(1, retryAfterSeconds));
    }

    /**
     * The 503 of a limited tenant's request whose limits could not be checked: the shared rate-limit store did not
     * answer and {@code rate_limit_store.on_failure} is {@code deny}. Counted as shed (the gateway's state, not the
     * client's), {@code Retry-After: 1}.
     */
    public static Refusal storeUnavailable(String message) {
        return new Refusal(HttpResponseStatus.SERVICE_UNAVAILABLE, "rate_limit_store_unavailable", message, null,
            "rate_limit_store_unavailable", false, true, HttpHeaderNames.RETRY_AFTER, 1L);
    }

    /** The answer the client gets: the OpenAI error object, plus the extra header when there is one. */
    public FullHttpResponse response(ByteBufAllocator alloc) {
        FullHttpResponse r = OpenAiErrors.response(alloc, status, message, param, code);
        if (headerName != null) {
            r.headers().set(headerName, headerValue);
        }
        return r;
    }

    public HttpResponseStatus status() {
        return status;
    }

    /** The counter label and access-log {@code error_code}. */
    public String reason() {
        return reason;
    }

    public String message() {
        return message;
    }

    /** The OpenAI {@code param} it concerns, or null. */
    public String param() {
        return param;
    }

    /** The OpenAI error {@code code}, or null. */
    public String code() {
        return code;
    }

    /** Whether the connection closes after the answer. */
    public boolean closes() {
        return close;
    }

    /** Counted as shed load (the gateway's state), not as a bad request (the client's). */
    public boolean shed() {
        return shed;
    }

    @Override
    public String toString() {
        return status.code() + " " + reason + ": " + message;
    }
}
