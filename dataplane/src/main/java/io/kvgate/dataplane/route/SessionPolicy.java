package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Session affinity: a conversation (keyed by {@code user}, {@code X-Conversation-Id}, a configured header or cookie)
 * stays on the endpoint that served it, so its growing prefix stays cached there. Pins expire after the TTL; the
 * table is bounded (least recently used pins go first); a pinned endpoint that is unhealthy is abandoned and the
 * conversation re-pinned to wherever the fallback policy sends it.
 *
 * <p>Routing stage only.
 */
final class SessionPolicy implements RoutingPolicy {
    private record Pin(EndpointState endpoint, long expiresNs) {}

    private final RuleConfig.SessionConfig knobs;
    private final RoutingPolicy fallback;
    private final RuleStats stats;
    private final LinkedHashMap<String, Pin> pins;

    SessionPolicy(RuleConfig rule, RoutingPolicy fallback, RuleStats stats) {
        this.knobs = rule.session();
        this.fallback = fallback;
        this.stats = stats;
        int max = knobs.maxEntries();
        this.pins = new LinkedHashMap<>(Math.min(max, 1 << 16), 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Pin> eldest) {
                return size() > max;
            }
        };
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteRequest r, long nowNs, StringBuilder why) {
        String key = r.sessionKey();
        if (key == null) {
            stats.tier("fallback");
            stats.miss("no_session_key");
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(no session key)");
            }
            return ep;
        }
        Pin pin = pins.get(key);
        if (pin != null && nowNs - pin.expiresNs() < 0 && RoutingPolicy.eligible(pin.endpoint(), r, nowNs) && contains(c, pin.endpoint())) {
            if (!r.dryRun()) {
                pins.put(key, new Pin(pin.endpoint(), nowNs + knobs.ttlMs() * 1_000_000L));
            }
            stats.tier("session_pinned");
            if (r.explain()) {
                why.append("tier=session; pinned");
            }
            return pin.endpoint();
        }
        EndpointState ep = fallback.choose(c, r, nowNs, why);
        if (ep != null && !r.dryRun()) {
            pins.put(key, new Pin(ep, nowNs + knobs.ttlMs() * 1_000_000L));
            stats.tier(pin == null ? "session_new" : "session_repinned");
            if (r.explain()) {
                why.append(pin == null ? "tier=session; new pin" : "tier=session; re-pinned (previous endpoint unavailable or expired)");
            }
        }
        return ep;
    }

    private static boolean contains(EndpointState[] c, EndpointState ep) {
        for (EndpointState e : c) {
            if (e == ep) {
                return true;
            }
        }
        return false;
    }

    int size() {
        return pins.size();
    }
}
