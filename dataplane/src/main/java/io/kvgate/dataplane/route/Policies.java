package io.kvgate.dataplane.route;

/** The load-only policies. Each instance belongs to one rule and is used by the routing stage only. */
public final class Policies {
    private Policies() {}

    public static RoutingPolicy create(String name) {
        return create(name, 0.0, false);
    }

    /**
     * @param prefillTokenWeight least_outstanding: load per in-flight uncached prefill token on top of the request
     *                           load ({@code kv.prefill_token_weight} of a kv_exact rule's fallback; 0 elsewhere)
     * @param explains           least_outstanding: the policy is the rule's own (not a fallback under another
     *                           tier) and writes the explanation when one is asked for
     */
    static RoutingPolicy create(String name, double prefillTokenWeight, boolean explains) {
        return switch (name) {
            case "round_robin" -> new RoundRobin();
            case "weighted" -> new SmoothWeighted();
            case "least_outstanding" -> new LeastOutstanding(prefillTokenWeight, explains);
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
     * Least loaded, weighted (load / weight; the load is the endpoint's estimate, {@link EndpointState#load()}:
     * engine-reported plus this gateway's requests since the scrape, or this gateway's in-flight count), compared
     * exactly by cross-multiplying; with a prefill token weight, {@code load + weight x in-flight uncached prefill
     * tokens} per endpoint weight. Ties rotate so equal endpoints share evenly. An endpoint whose recent time to first
     * token is far above its fleet's is weighed as busier ({@link TtftEstimate}, {@code load.ttft_aware}).
     */
    static final class LeastOutstanding implements RoutingPolicy {
        private final double tokenWeight;
        private final boolean explains;
        private int rotate;

        LeastOutstanding() {
            this(0.0, false);
        }

        LeastOutstanding(double tokenWeight, boolean explains) {
            this.tokenWeight = tokenWeight;
            this.explains = explains;
        }

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
                if (best == null || lighter(ep, best)) {
                    best = ep;
                }
            }
            if (explains && r.explain()) {
                why.append("tier=least_outstanding; load=");
                for (int i = 0; i < n; i++) {
                    why.append(i == 0 ? "" : ",").append(c[i].key()).append(':');
                    c[i].loadEstimate().explain(why);
                    double f = c[i].ttft().loadFactor();
                    if (f != 1.0) {
                        // Weighed as an outlier (load.ttft_aware): its recent TTFT is this many times its fleet's.
                        why.append("*ttft_x").append(Math.round(f * 10) / 10.0);
                    }
                }
            }
            return best;
        }

        /**
         * a.load / a.weight < b.load / b.weight, without division when no token weight applies; an endpoint whose
         * recent TTFT makes it an outlier ({@code load.ttft_aware}) compares with its load weighed up by
         * {@link TtftEstimate#weigh}.
         */
        private boolean lighter(EndpointState a, EndpointState b) {
            double fa = a.ttft().loadFactor();
            double fb = b.ttft().loadFactor();
            if (tokenWeight == 0 && fa == 1.0 && fb == 1.0) {
                return (long) a.load() * b.config().weight() < (long) b.load() * a.config().weight();
            }
            double ca = TtftEstimate.weigh(tokenWeight == 0 ? a.load() : a.cost(tokenWeight), fa);
            double cb = TtftEstimate.weigh(tokenWeight == 0 ? b.load() : b.cost(tokenWeight), fb);
            return ca * b.config().weight() < cb * a.config().weight();
        }

        @Override
        public void carryOver(RoutingPolicy previous) {
            if (previous instanceof LeastOutstanding p) {
                rotate = p.rotate;
            }
        }
    }
}
