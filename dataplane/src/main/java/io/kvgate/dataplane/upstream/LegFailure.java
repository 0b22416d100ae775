package io.kvgate.dataplane.upstream;

import io.kvgate.dataplane.route.Outcome;
import io.netty.handler.codec.http.HttpResponseStatus;

/**
 * How an upstream leg ended badly: the ONE classification the breaker, the metrics and the client's error share.
 * {@link #chargesEngine()} decides what the endpoint's breaker counts as a failure (transport failures, timeouts and
 * engine 5xx); what the client or the gateway caused (a stalled or vanished client, a response over the gateway's
 * own bound, a gateway bug) never opens a healthy engine's breaker.
 */
public enum LegFailure {
    /** The connection could not be made, or a pooled one was dead before the request left: retry elsewhere. */
    CONNECT(true, HttpResponseStatus.SERVICE_UNAVAILABLE, "upstream_connect_failed"),
    /** The connection closed or broke (or the response head was malformed) before the response head arrived. */
    EARLY_CLOSE(true, HttpResponseStatus.BAD_GATEWAY, "upstream_disconnected"),
    /** The connection closed or broke in the middle of the body. */
    MID_BODY(true, HttpResponseStatus.BAD_GATEWAY, "upstream_disconnected"),
    /** No response head within the first-byte timeout. */
    FIRST_BYTE_TIMEOUT(true, HttpResponseStatus.GATEWAY_TIMEOUT, "upstream_timeout"),
    /** The engine sent nothing for the idle timeout while the gateway was waiting to read (never while the client held reads). */
    IDLE_TIMEOUT(true, HttpResponseStatus.GATEWAY_TIMEOUT, "upstream_timeout"),
    /**
     * The engine kept sending bytes but nothing the client could use (no complete SSE event) for the idle timeout: an
     * engine dripping a partial event would otherwise restart the idle timer with every byte and hold the client for
     * ever. Raised by the relay, which alone knows what reached the client ({@link UpstreamLeg#failFromListener}).
     */
    NO_PROGRESS(true, HttpResponseStatus.GATEWAY_TIMEOUT, "upstream_timeout"),
    /** The engine answered with a 5xx status: a complete response, but the breaker counts it. */
    ENGINE_5XX(true, HttpResponseStatus.BAD_GATEWAY, "upstream_error"),
    /**
     * The engine answered 503 while its model loads (llama-server answers every request so until it is ready): the
     * endpoint is not ready yet, which the health probe tracks; the breaker is not charged. Nothing was processed,
     * so, like {@link #CONNECT}, the request is retried on another endpoint.
     */
    ENGINE_LOADING(false, HttpResponseStatus.SERVICE_UNAVAILABLE, "upstream_loading"),
    /**
     * The health probe found the endpoint down while this leg waited on it (an engine stopped with SIGTERM keeps its
     * connections open and silent): before the response started the request goes elsewhere, as after a refused
     * connection; a started stream ends at once with a retryable error instead of stalling until the idle timeout.
     */
    ENDPOINT_DOWN(true, HttpResponseStatus.SERVICE_UNAVAILABLE, "upstream_unhealthy"),
    /** An aggregated answer (error body, P/D JSON) exceeded the gateway's bound: refused, never truncated. */
    RESPONSE_TOO_LARGE(false, HttpResponseStatus.BAD_GATEWAY, "upstream_response_too_large"),
    /** The client took no bytes for {@code limits.client_stall_timeout_ms}: the client's doing, not the engine's. */
    CLIENT_STALL(false, HttpResponseStatus.REQUEST_TIMEOUT, "client_stalled"),
    /** The gateway abandoned the leg (client gone, the other P/D leg decided, drain). */
    CANCELLED(false, HttpResponseStatus.SERVICE_UNAVAILABLE, "cancelled"),
    /** An exception inside the gateway while handling the leg (the per-exchange watchdog caught it). */
    INTERNAL(false, HttpResponseStatus.INTERNAL_SERVER_ERROR, "internal_error");

    private final boolean chargesEngine;
    private final HttpResponseStatus clientStatus;
    private final String code;
    private final String metricName;

    LegFailure(boolean chargesEngine, HttpResponseStatus clientStatus, String code) {
        this.chargesEngine = chargesEngine;
        this.clientStatus = clientStatus;
        this.code = code;
        this.metricName = name().toLowerCase(java.util.Locale.ROOT);
    }

    /** Whether the endpoint's breaker counts this as a failure. */
    public boolean chargesEngine() {
        return chargesEngine;
    }

    /**
     * What the routing stage is told: {@link Outcome#FAILURE} when the engine is charged; {@link Outcome#SUCCESS}
     * when the engine answered but the gateway refused the answer (over its bound); {@link Outcome#RELEASED} when the
     * client or the gateway ended the leg (no verdict on the engine).
     */
    public Outcome outcome() {
        if (chargesEngine) {
            return Outcome.FAILURE;
        }
        return this == RESPONSE_TOO_LARGE ? Outcome.SUCCESS : Outcome.RELEASED;
    }

    /** The status a client gets when this ends the exchange before its response started. */
    public HttpResponseStatus clientStatus() {
        return clientStatus;
    }

    /** The OpenAI error {@code code} a client gets. */
    public String code() {
        return code;
    }

    /** The {@code cause} label of {@code kvgate_upstream_errors_total}. */
    public String metricName() {
        return metricName;
    }

    /** A completed response's classification: {@link #ENGINE_5XX} for 5xx statuses, null otherwise (4xx is the request's fault). */
    public static LegFailure ofStatus(int status) {
        return status >= 500 ? ENGINE_5XX : null;
    }
}
