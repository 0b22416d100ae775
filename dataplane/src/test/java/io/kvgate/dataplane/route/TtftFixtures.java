package io.kvgate.dataplane.route;

/** Sets endpoints' TTFT estimates as the routing stage would, for tests outside the routing package (the hedge). */
public final class TtftFixtures {
    private TtftFixtures() {}

    /**
     * Endpoint {@code eps[i]} measured one first token of {@code ttftMs[i]} at {@code nowNs}; then the fleet of
     * {@code eps} applied to each, as {@link TtftFleets} does for a rule listing exactly them.
     */
    public static void measured(long nowNs, EndpointState[] eps, long... ttftMs) {
        for (int i = 0; i < eps.length; i++) {
            eps[i].ttft().onMeasured(ttftMs[i] * 1_000_000L, 1, nowNs);
        }
        double fleet = TtftEstimate.fleetNs(eps, new double[eps.length]);
        for (EndpointState ep : eps) {
            ep.ttft().applyFleet(fleet, nowNs, 500_000_000L, false);
        }
    }
}
