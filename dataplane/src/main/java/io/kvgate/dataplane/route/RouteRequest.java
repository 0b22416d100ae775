package io.kvgate.dataplane.route;

import io.kvgate.dataplane.http.RequestFields;

/**
 * What the routing stage needs from a request, and how it hands the decision back. Implemented by the proxy
 * exchange, which lives on one I/O thread; {@link #onRouted} is called on the routing stage and must only publish
 * the decision to that I/O thread (e.g. {@code eventLoop.execute(this)}), never touch the channel.
 */
public interface RouteRequest {
    /** Which pool of a P/D rule to pick from; {@link Role#ANY} outside P/D. */
    enum Role { ANY, PREFILL, DECODE }

    /** Name of the rule the I/O thread resolved for the request's model. */
    String ruleName();

    default Role role() {
        return Role.ANY;
    }

    RequestFields fields();

    /** The prompt's token ids as the engine will see them (rendered + tokenized on the I/O thread), or null. */
    default int[] promptTokens() {
        return null;
    }

    /** vLLM {@code cache_salt} / SGLang salt of the request (enters block 0's hash), or null. */
    default String cacheSalt() {
        return null;
    }

    /** The session affinity key pulled by the I/O thread for the rule's session settings, or null. */
    default String sessionKey() {
        return null;
    }

    /** Whether the decision should be explained (policies then fill in their {@code why}). */
    default boolean explain() {
        return false;
    }

    /**
     * A decision asked for its explanation only (admin explain): the routing stage decides as it would but counts
     * no load, records no speculative blocks and pins no session.
     */
    default boolean dryRun() {
        return false;
    }

    /** Whether this request already tried {@code ep} (connect failure → retry elsewhere). */
    boolean alreadyTried(EndpointState ep);

    /** The decision: an endpoint, or null with a reason (no endpoint available / rule gone). */
    void onRouted(EndpointState endpoint, Rule rule, String explanation);
}
