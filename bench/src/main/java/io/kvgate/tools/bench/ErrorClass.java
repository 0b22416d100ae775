package io.kvgate.tools.bench;

import java.util.Locale;

/**
 * Why a request did not count as a success. Every failed request is counted in exactly one class.
 *
 * <ul>
 *   <li>{@code connect}: the TCP connection could not be opened, or closed before any response byte.</li>
 *   <li>{@code timeout}: no complete response within {@code --timeout} of the send.</li>
 *   <li>{@code http_4xx}, {@code http_5xx}, {@code http_other}: the response status (1xx/3xx are "other").</li>
 *   <li>{@code stream_error}: a {@code data: {"error":…}} frame in a 200 stream, or a 200 answer to a streaming
 *       request that is not {@code text/event-stream}.</li>
 *   <li>{@code truncated}: the connection closed mid-response, or a stream ended without {@code data: [DONE]}.</li>
 *   <li>{@code invalid_json}: a body or data frame that is not a JSON object, a completion without
 *       {@code choices}, or data after {@code [DONE]} that is not allowed.</li>
 *   <li>{@code error_body}: a non-streaming 200 whose body is an error object.</li>
 *   <li>{@code protocol}: a malformed HTTP response, or a body larger than the generator's limit.</li>
 * </ul>
 */
public enum ErrorClass {
    CONNECT, TIMEOUT, HTTP_4XX, HTTP_5XX, HTTP_OTHER, STREAM_ERROR, TRUNCATED, INVALID_JSON, ERROR_BODY, PROTOCOL;

    private static final ErrorClass[] VALUES = values();

    /** The report key, e.g. {@code http_5xx}. */
    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }

    static ErrorClass byOrdinal(int ordinal) {
        return VALUES[ordinal];
    }

    /** The class of a non-200 final status. */
    public static ErrorClass ofStatus(int status) {
        if (status >= 400 && status < 500) {
            return HTTP_4XX;
        }
        if (status >= 500 && status < 600) {
            return HTTP_5XX;
        }
        return HTTP_OTHER;
    }
}
