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
 * <p>Share bound ({@code session.share_cap_factor}; 0, the default, turns it off): the load bound above compares
 * requests in flight, which at low load are a handful per engine, so it seldom binds and an engine's share of the
 * requests is its share of the conversations that hash to it, a multinomial draw: with 8 engines and a few hundred
 * conversations in a run the busiest got 1.15-1.26x the mean, with a few dozen 1.4x (perf/results/fleet-2026-12-02.md).
 * So each endpoint has a shed fraction, and a conversation walks from an endpoint when its unit value there
 * ({@link Rendezvous#unit}, a pure function of key and endpoint) is below that fraction: the walking conversations
 * are the same ones turn after turn (their next endpoint warms up for them), and every replica, which sees a sample
 * of the same traffic through the balancer and so computes nearly the same fractions, walks nearly the same ones;
 * nothing is shared. A conversation lands on the highest-ranked endpoint that keeps it and is under the load bound
 * (should none keep it, the highest-ranked under the load bound: the share bound is a preference, the load bound is
 * not). The fractions follow this gateway's routed share of each endpoint (decayed with the time constant
 * {@link #SHARE_WINDOW_NS}, weighted: 1 = its fair share) by integral control: every decision moves each eligible
 * endpoint's fraction by {@link #SHARE_GAIN} / n times its share's excess over the factor (down when under it),
 * within [0, {@link #MAX_SHED}]. Feedback on where requests went, not on where the hash sends them, so conversations
 * walked onto an endpoint count against it too; a count of where the hash sends them (tried first) followed the
 * conversations too slowly as they came and went (the busiest engine 1.21-1.23x instead of 1.26x, simulated). Off by
 * default: replicas agree on nearly every conversation with it, not on every one as with the hash alone.
 *
 * <p>Routing stage only; no allocation per decision (three passes over the candidates, no sort; the arrays grow
 * only when an endpoint id is seen the first time). Dry runs (explain-only requests) change nothing.
 */
final class HashedSessionPolicy implements RoutingPolicy {
    /**
     * The routed counts' decay time constant: long enough that a replica seeing a third of 120 req/s over 8 engines
     * counts ~15 decisions per endpoint in it, short enough to follow conversations that last a few seconds.
     * Chosen with the controller's gain on a simulation of perf/replicas-routing.sh's multi-turn workload (1 and 3
     * replicas): 3 s and 0.05 held the busiest engine at 1.05-1.13x the mean with ~3 % of turns changing engine;
     * 10 s lagged (1.16-1.25x), a gain of 0.1 moved twice the turns for little more balance.
     */
    static final long SHARE_WINDOW_NS = 3_000_000_000L;
    /** Integral gain: the change of a shed fraction per decision per unit of share excess, over the endpoints. */
    static final double SHARE_GAIN = 0.05;
    /** No control before the eligible endpoints' routed counts sum to this many decisions each (an estimate of noise). */
    static final int SHARE_MIN_DECISIONS = 8;
    /** The most of its conversations an endpoint sheds, however hot. */
    static final double MAX_SHED = 0.9;

    private final double capFactor;
    private final double slack;
    private final double shareCap;
    private final RoutingPolicy fallback;
    private final RuleStats stats;
    /** Decayed count of the decisions that chose each endpoint (by id), and its shed fraction (routing stage only). */
    private double[] routedCount = new double[16];
    private double[] shedFraction = new double[16];
    private long decayedAtNs;
    private boolean decayStarted;

    HashedSessionPolicy(RuleConfig rule, RoutingPolicy fallback, RuleStats stats) {
        this.capFactor = rule.session().loadCapFactor();
        this.slack = rule.session().loadSlack();
        this.shareCap = rule.session().shareCapFactor();
        this.fallback = fallback;
        this.stats = stats;
    }

    @Override
    public void carryOver(RoutingPolicy previous) {
        if (previous instanceof HashedSessionPolicy p) {
            fallback.carryOver(p.fallback);
            // Endpoint ids survive a swap (EndpointState identity), so the shares and fractions still apply.
            routedCount = p.routedCount;
            shedFraction = p.shedFraction;
            decayedAtNs = p.decayedAtNs;
            decayStarted = p.decayStarted;
        }
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
            stats.tier(r.decidedBy(Tier.FALLBACK));
            stats.miss(MissReason.NO_SESSION_KEY);
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(no session key)");
            }
            return ep;
        }
        boolean sharing = shareCap > 0;
        if (sharing) {
            decay(nowNs);
        }
        int eligible = 0;
        long totalLoad = 0;
        long totalWeight = 0;
        double totalRouted = 0;
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
                if (sharing) {
                    totalRouted += routedOf(e.id());
                }
            }
        }
        if (eligible == 0) {
            return null;
        }
        // Too few decisions seen yet to tell a hot endpoint from noise: no control yet (the fractions stay as they are).
        boolean control = sharing && !r.dryRun() && totalRouted >= (double) SHARE_MIN_DECISIONS * eligible;
        EndpointState owner = null;
        EndpointState chosen = null; // the best endpoint under the load bound that keeps the conversation
        EndpointState under = null;  // the best endpoint under the load bound
        long ownerScore = 0;
        long chosenScore = 0;
        long underScore = 0;
        double ownerW = 0;
        double chosenW = 0;
        double underW = 0;
        for (EndpointState e : c) {
            if (!RoutingPolicy.eligible(e, r, nowNs)) {
                continue;
            }
            int w = e.config().weight();
            boolean fits = load(e) + 1 <= cap(totalLoad, w, totalWeight);
            boolean keeps = fits && (!sharing || Rendezvous.unit(key, e.affinitySeed()) >= shedOf(e.id()));
            if (uniform) {
                long s = Rendezvous.score(key, e.affinitySeed());
                if (owner == null || Long.compareUnsigned(s, ownerScore) > 0) {
                    owner = e;
                    ownerScore = s;
                }
                if (fits && (under == null || Long.compareUnsigned(s, underScore) > 0)) {
                    under = e;
                    underScore = s;
                }
                if (keeps && (chosen == null || Long.compareUnsigned(s, chosenScore) > 0)) {
                    chosen = e;
                    chosenScore = s;
                }
            } else {
                double s = Rendezvous.weightedScore(key, e.affinitySeed(), w);
                if (owner == null || s > ownerW) {
                    owner = e;
                    ownerW = s;
                }
                if (fits && (under == null || s > underW)) {
                    under = e;
                    underW = s;
                }
                if (keeps && (chosen == null || s > chosenW)) {
                    chosen = e;
                    chosenW = s;
                }
            }
        }
        if (chosen == null) {
            chosen = under; // every endpoint under the load bound sheds this conversation: the share bound yields
        }
        if (control) {
            for (EndpointState e : c) {
                if (RoutingPolicy.eligible(e, r, nowNs)) {
                    int id = e.id();
                    double excess = routedShare(id, e.config().weight(), totalRouted, totalWeight) - shareCap;
                    double f = shedOf(id) + SHARE_GAIN * excess / eligible;
                    setShed(id, Math.max(0, Math.min(MAX_SHED, f)));
                }
            }
        }
        if (sharing && chosen != null && !r.dryRun()) {
            countRouted(chosen.id());
        }
        if (chosen == null) {
            stats.tier(r.decidedBy(Tier.FALLBACK));
            stats.miss(MissReason.ALL_OVER_BOUND);
            EndpointState ep = fallback.choose(c, r, nowNs, why);
            if (r.explain()) {
                why.append("tier=fallback(every endpoint over the session load bound)");
            }
            return ep;
        }
        stats.tier(r.decidedBy(chosen == owner ? Tier.SESSION_HASH : Tier.SESSION_HASH_WALK));
        if (r.explain()) {
            why.append("tier=session(hash); key=").append(Long.toHexString(key)).append("; owner=").append(owner.key());
            if (chosen != owner) {
                int ow = owner.config().weight();
                if (load(owner) + 1 > cap(totalLoad, ow, totalWeight)) {
                    why.append(" (load ").append(load(owner)).append(" over its bound ")
                        .append((long) cap(totalLoad, ow, totalWeight)).append(": next in rendezvous order)");
                } else {
                    why.append(" (sheds ").append(round2(shedOf(owner.id()))).append(" of its conversations, routed share ")
                        .append(round2(routedShare(owner.id(), ow, totalRouted, totalWeight))).append(" for share_cap_factor ")
                        .append(shareCap).append(": this one to its next endpoint)");
                }
            }
            why.append("; bound=").append((long) cap(totalLoad, chosen.config().weight(), totalWeight)).append("; load=");
            chosen.loadEstimate().explain(why);
        }
        return chosen;
    }

    /** {@code id}'s share of the eligible endpoints' routed count over its weighted share of them (1 = fair). */
    private double routedShare(int id, int w, double totalRouted, long totalWeight) {
        return totalRouted <= 0 ? 0 : routedOf(id) / totalRouted * totalWeight / w;
    }

    private double routedOf(int id) {
        return id < routedCount.length ? routedCount[id] : 0;
    }

    private double shedOf(int id) {
        return id < shedFraction.length ? shedFraction[id] : 0;
    }

    private void grow(int id) {
        if (id >= routedCount.length) { // once per new endpoint id
            int n = Math.max(id + 1, 2 * routedCount.length);
            routedCount = java.util.Arrays.copyOf(routedCount, n);
            shedFraction = java.util.Arrays.copyOf(shedFraction, n);
        }
    }

    private void setShed(int id, double f) {
        grow(id);
        shedFraction[id] = f;
    }

    private void countRouted(int id) {
        grow(id);
        routedCount[id] += 1;
    }

    /** Ages every endpoint's routed count by the time since the last decision (one exponential per decision). */
    private void decay(long nowNs) {
        if (!decayStarted) {
            decayStarted = true;
            decayedAtNs = nowNs;
            return;
        }
        long dt = nowNs - decayedAtNs;
        if (dt <= 0) {
            return;
        }
        decayedAtNs = nowNs;
        double f = Math.exp(-(double) dt / SHARE_WINDOW_NS);
        for (int i = 0; i < routedCount.length; i++) {
            routedCount[i] *= f;
        }
    }

    /** The shed fraction of {@code e} (tests). */
    double shedFractionForTest(EndpointState e) {
        return shedOf(e.id());
    }

    private static double round2(double v) {
        return Math.round(v * 100) / 100.0;
    }

    /** The most load an endpoint of weight {@code w} may carry, this request included. */
    private double cap(long totalLoad, int w, long totalWeight) {
        double share = (double) (totalLoad + 1) * w / totalWeight;
        return Math.max(capFactor * share, share + slack);
    }
}
