package io.kvgate.dataplane.route;

/** The load-only policies. Each instance belongs to one rule and is used by the routing stage only. */
public final class Policies {
    private Policies() {}

    public static RoutingPolicy create(String name) {
        return switch (name) {
            case "round_robin" -> new RoundRobin();
            case "weighted" -> new SmoothWeighted();
            case "least_outstanding" -> new LeastOutstanding();
            default -> throw new IllegalArgumentException("not a load policy: " + name);
        };
    }

    /** Plain rotation over the eligible endpoints. */
    static final class RoundRobin implements RoutingPolicy {
        private int next;

        @Override
        public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
            for (int i = 0; i < c.length; i++) {
                int idx = Math.floorMod(next + i, c.length);
                if (RoutingPolicy.eligible(c[idx], r, nowNs)) {
                    next = idx + 1;
                    return c[idx];
                }
            }
            return null;
        }

        @Override
        public void carryOver(RoutingPolicy previous) {
            if (previous instanceof RoundRobin p) {
                next = p.next;
            }
        }
    }

    /**
     * Nginx's smooth weighted round robin: every pick adds each eligible endpoint's weight to its running total,
     * takes the largest and subtracts the sum — weights are honoured without bursts to the heaviest endpoint. The
     * running totals live on the endpoints, so they survive a configuration swap by themselves.
     */
    static final class SmoothWeighted implements RoutingPolicy {
        @Override
        public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
            EndpointState best = null;
            long total = 0;
            for (EndpointState ep : c) {
                if (!RoutingPolicy.eligible(ep, r, nowNs)) {
                    continue;
                }
                int w = ep.config().weight();
                ep.currentWeight += w;
                total += w;
                if (best == null || ep.currentWeight > best.currentWeight) {
                    best = ep;
                }
            }
            if (best != null) {
                best.currentWeight -= total;
            }
            return best;
        }
    }

    /**
     * Fewest requests in flight, weighted (outstanding / weight, compared exactly by cross-multiplying); ties rotate
     * so equal endpoints share evenly.
     */
    static final class LeastOutstanding implements RoutingPolicy {
        private int rotate;

        @Override
        public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
            EndpointState best = null;
            int n = c.length;
            rotate = rotate == Integer.MAX_VALUE ? 0 : rotate + 1;
            for (int i = 0; i < n; i++) {
                EndpointState ep = c[(rotate + i) % n];
                if (!RoutingPolicy.eligible(ep, r, nowNs)) {
                    continue;
                }
                // ep.outstanding/ep.weight < best.outstanding/best.weight, without division
                if (best == null || (long) ep.outstanding() * best.config().weight() < (long) best.outstanding() * ep.config().weight()) {
                    best = ep;
                }
            }
            return best;
        }

        @Override
        public void carryOver(RoutingPolicy previous) {
            if (previous instanceof LeastOutstanding p) {
                rotate = p.rotate;
            }
        }
    }
}
