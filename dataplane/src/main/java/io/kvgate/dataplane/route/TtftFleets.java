package io.kvgate.dataplane.route;

import io.kvgate.control.config.GatewayConfig;

/**
 * Sets every endpoint's fleet TTFT ({@link TtftEstimate}): per rule, the lower median of the measured averages of the
 * endpoints a request may go to (per role on a P/D rule), then each endpoint's load factor and published recent TTFT
 * against it. Routing thread only, at every housekeeping (a few times per batch of decisions at most: a sort of each
 * rule's few endpoints, no allocation once the scratch array has grown).
 */
final class TtftFleets {
    private double[] scratch = new double[16];

    void apply(RouteTable table, long nowNs) {
        GatewayConfig.Load load = table.config().load();
        long recoverNs = load.ttftRecoverMs() * 1_000_000L;
        boolean aware = load.ttftAware();
        java.util.List<Rule> rules = table.rules();
        for (int i = 0; i < rules.size(); i++) { // indexed: an iterator per housekeeping would allocate per batch
            Rule rule = rules.get(i);
            if (rule.isPd()) {
                apply(rule.candidates(Role.PREFILL), nowNs, recoverNs, aware);
                apply(rule.candidates(Role.DECODE), nowNs, recoverNs, aware);
            } else {
                apply(rule.candidates(Role.ANY), nowNs, recoverNs, aware);
            }
        }
    }

    private void apply(EndpointState[] eps, long nowNs, long recoverNs, boolean aware) {
        if (scratch.length < eps.length) {
            scratch = new double[Math.max(eps.length, scratch.length * 2)];
        }
        double fleet = TtftEstimate.fleetNs(eps, scratch);
        for (EndpointState ep : eps) {
            ep.ttft().applyFleet(fleet, nowNs, recoverNs, aware);
        }
    }
}
