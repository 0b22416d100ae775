package io.kvgate.dataplane.route;

/**
 * Picks an endpoint for one request. Called only on the routing stage (single writer), so implementations keep
 * plain mutable state. Returns null when no endpoint in {@code candidates} is available and not excluded.
 * Implementations allocate nothing per decision (the explanation text is built only when {@code request.explain}).
 */
public interface RoutingPolicy {
    EndpointState choose(EndpointState[] candidates, RouteEvent request, long nowNs, StringBuilder why);

    /**
     * Takes over the state of the same rule's policy from the previous table (configuration swap, routing stage
     * only): session pins, rotation positions, speculative overlay. A policy of another kind is ignored.
     */
    default void carryOver(RoutingPolicy previous) {}

    /**
     * Whether {@code ep} may take this request: available now, not already tried by it, serving the request's LoRA
     * adapter when only some endpoints do (discovered adapters), not saturated (admission).
     */
    static boolean eligible(EndpointState ep, RouteEvent request, long nowNs) {
        return ep.available(nowNs) && !request.alreadyTried(ep) && request.serves(ep)
            && (request.gate == null || request.gate.admits(ep, request.priority));
    }
}
