package io.kvgate.dataplane.route;

/**
 * Picks an endpoint for one request. Called only on the routing stage (single writer), so implementations keep
 * plain mutable state. Returns null when no endpoint in {@code candidates} is available and not excluded.
 */
public interface RoutingPolicy {
    EndpointState choose(EndpointState[] candidates, RouteRequest request, long nowNs, StringBuilder why);

    /** Whether {@code ep} may take this request: available now and not already tried by it. */
    static boolean eligible(EndpointState ep, RouteRequest request, long nowNs) {
        return ep.available(nowNs) && !request.alreadyTried(ep);
    }
}
