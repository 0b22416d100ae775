package io.kvgate.dataplane.request;

/**
 * What a request brings to the routing stage besides its fields: the exact prompt tokens (rendered and tokenized on
 * the I/O thread), the cache salt, and the session affinity key. Immutable.
 */
public record RoutingInputs(int[] promptTokens, String cacheSalt, String sessionKey) {
    public static final RoutingInputs NONE = new RoutingInputs(null, null, null);
}
