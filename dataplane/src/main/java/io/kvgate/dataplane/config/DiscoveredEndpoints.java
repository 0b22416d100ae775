package io.kvgate.dataplane.config;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.kvgate.discovery.DiscoveredEndpoint;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RoutingStage;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Predicate;

/**
 * What discovery (DNS, Kubernetes) reported per rule, and what the gateway did about it: the configuration never lists
 * a discovered rule's endpoints, so every reload puts the last reported set in place ({@link #into}); an endpoint
 * reported terminating is drained through the routing stage, and undrained when it serves again
 * ({@link #followTerminating}). Called under the gateway's reload lock, which its reloads (admin, control socket,
 * SIGHUP, a resolved seed) and discovery's report thread all take.
 */
public final class DiscoveredEndpoints {
    /** The last endpoint set discovery reported per rule. */
    private final Map<String, List<DiscoveredEndpoint>> byRule = new ConcurrentHashMap<>();
    /** Endpoints discovery drained because they were terminating (by key): undrained when they come back serving. */
    private final Set<String> drainedByDiscovery = ConcurrentHashMap.newKeySet();
    /** Told after each discovered set is applied (tests await it instead of sleeping). */
    private volatile BiConsumer<String, List<DiscoveredEndpoint>> listener = (r, e) -> {};

    /**
     * {@code next} with each discovered rule's endpoints set to what its discovery last reported (none before its
     * first report): the configuration never lists them, so a reload of the file, a patch or a resolved seed keeps
     * what was found.
     */
    public GatewayConfig into(GatewayConfig next) {
        List<RuleConfig> rules = new java.util.ArrayList<>(next.rules());
        boolean changed = false;
        for (int i = 0; i < rules.size(); i++) {
            RuleConfig rc = rules.get(i);
            if (rc.discovery().isStatic()) {
                continue;
            }
            List<DiscoveredEndpoint> found = byRule.getOrDefault(rc.name(), List.of());
            List<io.kvgate.control.config.EndpointConfig> eps = found.stream().map(DiscoveredEndpoint::config).toList();
            if (!eps.equals(rc.endpoints())) {
                rules.set(i, rc.withDiscoveredEndpoints(eps));
                changed = true;
            }
        }
        return changed ? next.withRules(rules) : next;
    }

    /** What a reload changes in discovered rules' endpoints (the configuration diff does not show them: they are not written). */
    public static List<String> changes(GatewayConfig cur, GatewayConfig next) {
        List<String> out = new java.util.ArrayList<>();
        for (RuleConfig rc : next.rules()) {
            if (rc.discovery().isStatic()) {
                continue;
            }
            java.util.Set<String> before = new java.util.TreeSet<>();
            cur.rules().stream().filter(r -> r.name().equals(rc.name())).findFirst()
                .ifPresent(r -> r.endpoints().forEach(e -> before.add(e.key())));
            java.util.Set<String> after = new java.util.TreeSet<>();
            rc.endpoints().forEach(e -> after.add(e.key()));
            if (!before.equals(after)) {
                java.util.Set<String> added = new java.util.TreeSet<>(after);
                added.removeAll(before);
                java.util.Set<String> removed = new java.util.TreeSet<>(before);
                removed.removeAll(after);
                out.add("rules[name=" + rc.name() + "].endpoints: discovered " + after.size() + (added.isEmpty() ? "" : ", +" + added)
                    + (removed.isEmpty() ? "" : ", -" + removed));
            }
        }
        return out;
    }

    /** Records {@code found} as {@code rule}'s set; returns the set it replaces (null: none), for {@link #restore}. */
    public List<DiscoveredEndpoint> put(String rule, List<DiscoveredEndpoint> found) {
        return byRule.put(rule, found);
    }

    /** Puts back what {@link #put} replaced: the set in effect stays when a new one could not be applied. */
    public void restore(String rule, List<DiscoveredEndpoint> before) {
        if (before == null) {
            byRule.remove(rule);
        } else {
            byRule.put(rule, before);
        }
    }

    /**
     * Forgets the sets of rules no longer discovered ({@code discovers} is false): were a rule discovered again, its
     * new source reports afresh.
     */
    public void forgetUndiscovered(Predicate<String> discovers) {
        byRule.keySet().removeIf(rule -> !discovers.test(rule));
    }

    /**
     * After {@code rule}'s set {@code found} was applied: drains each endpoint newly reported terminating (no new
     * request; those in flight finish) and undrains each that discovery had drained and that serves again, through the
     * routing stage; then tells the listener.
     */
    public void followTerminating(String rule, List<DiscoveredEndpoint> found, EndpointRegistry endpoints, RoutingStage router) {
        for (DiscoveredEndpoint d : found) {
            String key = d.config().key();
            boolean was = drainedByDiscovery.contains(key);
            if (d.terminating() == was) {
                continue;
            }
            EndpointState ep = endpoints.get(key);
            if (ep == null) {
                continue;
            }
            if (router.drain(ep, d.terminating())) {
                if (d.terminating()) {
                    drainedByDiscovery.add(key);
                    Log.info("discovery: rule '" + rule + "': " + key + " is terminating: drained (no new requests; "
                        + ep.outstanding() + " in flight finish)");
                } else {
                    drainedByDiscovery.remove(key);
                    Log.info("discovery: rule '" + rule + "': " + key + " serves again: undrained");
                }
            } else {
                Log.warn("discovery: rule '" + rule + "': the routing stage did not apply the drain of " + key
                    + " within 5 s; it is retried with the next change");
            }
        }
        listener.accept(rule, found);
    }

    /** Called after each discovered endpoint set is applied (null: nobody). */
    public void onApplied(BiConsumer<String, List<DiscoveredEndpoint>> l) {
        this.listener = l == null ? (r, e) -> {} : l;
    }
}
