package io.kvgate.dataplane.route;

/**
 * How a request routed to an endpoint ended, as the upstream leg classifies it. Only {@link #FAILURE} counts toward
 * the endpoint's circuit breaker; every outcome returns the request's load.
 */
public enum Outcome {
    /** The engine answered (any 2xx–4xx: a 4xx is the client's mistake, not the engine's). */
    SUCCESS,
    /** The engine failed: a 5xx answer, a connect failure, a timeout, or the connection died mid-response. */
    FAILURE,
    /**
     * No verdict on the engine: the client went away, an orchestrator abandoned the leg, or the leg was never sent.
     * Load is returned; the breaker neither counts a failure nor closes (a half-open trial becomes available again).
     */
    RELEASED
}
