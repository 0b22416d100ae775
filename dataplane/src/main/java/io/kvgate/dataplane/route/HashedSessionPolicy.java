package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;

/**
 * Session affinity by consistent hashing ({@code session.mode: hash}, the default): a conversation's endpoint is the
 * rendezvous-hash winner of its session key over the eligible (healthy, untried, admitted) endpoints of the rule
 * ({@link Rendezvous}). Nothing is stored: every gateway replica with the same configuration and the same healthy set
 * sends a conversation to the same engine, whichever replica the L4 balancer picked for the request. When an endpoint
 * leaves, only its conversations move (each to its own next endpoint); when it returns, they come back.
 *
 * <p>Load bound: the winner takes the request only while its load plus this request stays within
 * {@code max(load_cap_factor × share, share + load_slack)}, where {@code share} is its weighted share of the rule's
 * load plus one; otherwise the conversation goes to the highest-ranked endpoint that is under its bound — its next
 * endpoint in rendezvous order, the same one every time and in every replica that sees the same load. So a hot
 * engine sheds conversations to their second choice (which warms up for them) instead of queuing them, and they
 * return when its load drops. The absolute slack keeps one or two requests in flight at low load from counting as
 * a hot spot. Should every endpoint be over its bound (possible only with a slack below one), the fallback policy
 * decides. The load is each endpoint's estimate ({@link #load}): with engine-reported load the replicas compare
 * nearly the same numbers, so they walk the same way; with local counts only, each replica bounds on its own share.
 *
 * <p>Routing stage only; no state, no allocation per decision (two passes over the candidates, no sort).
 */
final class HashedSessionPolicy implements RoutingPolicy {
    private final double capFactor;
    private final double slack;
    private final RoutingPolicy fallback;
    private final RuleStats stats;

    HashedSessionPolicy(RuleConfig rule, RoutingPolicy fallback, RuleStats stats) {
        this.capFactor = rule.session().loadCapFactor();
        this.slack = rule.session().loadSlack();
        this.fallback = fallback;
        this.stats = stats;
    }

    /**
     * The load the bound compares: the endpoint's estimate ({@link EndpointState#load()}: the engine's own running
     * and waiting requests plus this gateway's since the last scrape when a fresh reading exists, so every replica
     * bounds on about the same number; else this gateway's in-flight count).
     */
    static long load(EndpointState ep) {
        return ep.load();
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        long key = r.sessionKeyHash();
        if (key == SessionKeys.NONE) {
            stats.tier(Tier.FALLBACK);
            stats.miss(MissReason.NO_SESSION_KEY);
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(no session key)");
            }
            return ep;
        }
        int eligible = 0;
        long totalLoad = 0;
        long totalWeight = 0;
        int firstWeight = -1;
        boolean uniform = true;
        for (EndpointState e : c) {
            if (RoutingPolicy.eligible(e, r, nowNs)) {
                eligible++;
                totalLoad += load(e);
                int w = e.config().weight();
                totalWeight += w;
                uniform &= firstWeight < 0 || w == firstWeight;
                firstWeight = w;
            }
        }
        if (eligible == 0) {
            return null;
        }
        EndpointState owner = null;
        EndpointState chosen = null;
        long ownerScore = 0;
        long chosenScore = 0;
        double ownerW = 0;
        double chosenW = 0;
        for (EndpointState e : c) {
            if (!RoutingPolicy.eligible(e, r, nowNs)) {
                continue;
            }
            int w = e.config().weight();
            boolean under = load(e) + 1 <= cap(totalLoad, w, totalWeight);
            if (uniform) {
                long s = Rendezvous.score(key, e.affinitySeed());
                if (owner == null || Long.compareUnsigned(s, ownerScore) > 0) {
                    owner = e;
                    ownerScore = s;
                }
                if (under && (chosen == null || Long.compareUnsigned(s, chosenScore) > 0)) {
                    chosen = e;
                    chosenScore = s;
                }
            } else {
                double s = Rendezvous.weightedScore(key, e.affinitySeed(), w);
                if (owner == null || s > ownerW) {
                    owner = e;
                    ownerW = s;
                }
                if (under && (chosen == null || s > chosenW)) {
                    chosen = e;
                    chosenW = s;
                }
            }
        }
        if (chosen == null) {
            stats.tier(Tier.FALLBACK);
            stats.miss(MissReason.ALL_OVER_BOUND);
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(every endpoint over the session load bound)");
            }
            return ep;
        }
        stats.tier(chosen == owner ? Tier.SESSION_HASH : Tier.SESSION_HASH_WALK);
        if (r.explain()) {
            why.append("tier=session(hash); key=").append(Long.toHexString(key)).append("; owner=").append(owner.key());
            if (chosen != owner) {
                why.append(" (load ").append(load(owner)).append(" over its bound ")
                    .append((long) cap(totalLoad, owner.config().weight(), totalWeight)).append(": next in rendezvous order)");
            }
            why.append("; bound=").append((long) cap(totalLoad, chosen.config().weight(), totalWeight)).append("; load=");
            chosen.explainLoad(why);
        }
        return chosen;
    }

    /** The most load an endpoint of weight {@code w} may carry, this request included. */
    private double cap(long totalLoad, int w, long totalWeight) {
        double share = (double) (totalLoad + 1) * w / totalWeight;
        return Math.max(capFactor * share, share + slack);
    }
}
