package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;

/**
 * Session affinity with a pin table ({@code session.mode: table}; the default mode is {@link HashedSessionPolicy}):
 * a conversation (keyed by {@code user}, {@code X-Conversation-Id}, a configured header or cookie,
 * hashed to 64 bits on the I/O thread) stays on the endpoint that served it, so its growing prefix stays cached there.
 * Pins expire after the TTL (each use renews it); the table is bounded (least recently used pins go first); a pinned
 * endpoint that is unavailable or no longer a candidate is abandoned and the conversation re-pinned to wherever the
 * fallback policy sends it. A configuration swap keeps the pins ({@link #carryOver}).
 *
 * <p>Routing stage only. No allocation per decision ({@link SessionPins}).
 */
final class SessionPolicy implements RoutingPolicy {
    private final long ttlNs;
    private final RoutingPolicy fallback;
    private final RuleStats stats;
    private final SessionPins pins;

    SessionPolicy(RuleConfig rule, RoutingPolicy fallback, RuleStats stats) {
        this.ttlNs = rule.session().ttlMs() * 1_000_000L;
        this.fallback = fallback;
        this.stats = stats;
        this.pins = new SessionPins(rule.session().maxEntries());
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        long key = r.sessionKeyHash();
        if (key == SessionKeys.NONE) {
            stats.tier(r.decidedBy(Tier.FALLBACK));
            stats.miss(MissReason.NO_SESSION_KEY);
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(no session key)");
            }
            return ep;
        }
        EndpointState pinned = pins.endpoint(key);
        if (pinned != null && nowNs - pins.expiresNs(key) < 0 && RoutingPolicy.eligible(pinned, r, nowNs) && contains(c, pinned)) {
            if (!r.dryRun()) {
                pins.pin(key, pinned, nowNs + ttlNs);
            }
            stats.tier(r.decidedBy(Tier.SESSION_PINNED));
            if (r.explain()) {
                why.append("tier=session; pinned");
            }
            return pinned;
        }
        EndpointState ep = fallback.choose(c, r, nowNs, why);
        if (ep != null && !r.dryRun()) {
            pins.pin(key, ep, nowNs + ttlNs);
            stats.tier(r.decidedBy(pinned == null ? Tier.SESSION_NEW : Tier.SESSION_REPINNED));
            if (r.explain()) {
                why.append(pinned == null ? "tier=session; new pin" : "tier=session; re-pinned (previous endpoint unavailable or expired)");
            }
        }
        return ep;
    }

    @Override
    public void carryOver(RoutingPolicy previous) {
        if (previous instanceof SessionPolicy p) {
            pins.copyFrom(p.pins);
            fallback.carryOver(p.fallback);
        }
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
