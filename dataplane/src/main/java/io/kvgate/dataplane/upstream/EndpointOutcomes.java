package io.kvgate.dataplane.upstream;

import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;

/**
 * Where a leg reports, exactly once, that the request it carried to an endpoint is over and how it ended for the
 * endpoint (the routing stage's load and breaker bookkeeping: the event loop's {@code RouterPort}).
 */
@FunctionalInterface
public interface EndpointOutcomes {
    void complete(EndpointState endpoint, Outcome outcome);

    /**
     * {@code tokens} of the prefill the routing stage charged to the request on {@code endpoint} are done (first
     * response bytes, or the end of the leg). Reported at most once per charge, before its {@link #complete}.
     */
    default void prefillDone(EndpointState endpoint, int tokens) {}

    /** As {@link #complete(EndpointState, Outcome)} for a request pinned to DP rank {@code rank} (-1: none). */
    default void complete(EndpointState endpoint, Outcome outcome, int rank) {
        complete(endpoint, outcome);
    }

    /** As {@link #prefillDone(EndpointState, int)} for a request pinned to DP rank {@code rank} (-1: none). */
    default void prefillDone(EndpointState endpoint, int tokens, int rank) {
        prefillDone(endpoint, tokens);
    }

    /** A streamed request on {@code endpoint} got its first token {@code ttftNs} after it was sent (TTFT estimate). */
    default void firstToken(EndpointState endpoint, long ttftNs) {}

    /**
     * A request's leg on {@code endpoint} was cancelled by a winning hedge {@code waitedNs} after it was sent, before
     * its first token: a lower bound of the endpoint's TTFT.
     */
    default void noFirstTokenAfter(EndpointState endpoint, long waitedNs) {}
}
