package io.kvgate.dataplane.route;

/**
 * The routing decision itself, with no ring, port or thread in it: a request's inputs ({@link RouteEvent}) and its
 * rule in, a filled {@link Decision} out, the chosen endpoints' load counted unless dry run. The {@link RouterAgent}
 * calls it for each request it takes from the ring (or from admission control's queue) and hands the decision back;
 * a test calls it directly.
 *
 * <p>Single-threaded like the policies it runs: one decider per routing stage, called by its runner only. Allocates
 * nothing unless the request asked for an explanation.
 */
final class Decider {
    static final String NO_HEALTHY_ENDPOINT = "no healthy endpoint";
    static final String NO_HEALTHY_PREFILL = "no healthy prefill endpoint";
    static final String NO_HEALTHY_DECODE = "no healthy decode endpoint";

    private final StringBuilder why = new StringBuilder(256);

    /**
     * Decides {@code e} under {@code rule} at {@code now} (its admission, if any, already let it through) into
     * {@code d}: the endpoint (a pair request: prefill and decode), what it was charged and pinned to, the policy's
     * tier, the admission wait, or the reason there is none. Returns how many endpoints it counted: 0 when the request
     * was refused or is a dry run.
     */
    int decide(Rule rule, RouteEvent e, long now, Decision d) {
        d.rule = rule;
        d.waitedForAdmission = e.waitedForAdmission;
        d.admissionQueuedAtNs = e.admissionQueuedAtNs;
        d.admissionAdmittedAtNs = e.admissionAdmittedAtNs;
        return e.type == RouteEvent.ROUTE_PAIR ? decidePair(rule, e, now, d) : decideOne(rule, e, now, d);
    }

    /** A request charges the uncached prompt tokens the policy found (kv_exact) when it reports its prefill's end. */
    private int decideOne(Rule rule, RouteEvent e, long now, Decision d) {
        resetPolicyOutputs(e, rule);
        why.setLength(0);
        EndpointState ep = rule.policyFor(e.role).choose(rule.candidates(e.role), e, now, why);
        if (e.explain && e.serving != null) {
            explainExcluded(rule.candidates(e.role), e);
        }
        d.explanation = why.length() == 0 ? null : why.toString(); // only explained requests fill it
        if (ep == null) {
            if (d.explanation == null) {
                d.explanation = NO_HEALTHY_ENDPOINT;
            }
            return 0;
        }
        d.endpoint = ep;
        return charge(e, ep, now, d) ? 1 : 0;
    }

    /**
     * A pair decision (SGLang's concurrent P/D): the prefill as {@code e} asks, then the decode as the same request's
     * decode leg would be (no prompt: the prefill computes it; nothing tried; not gated again), and both are counted
     * together, or neither: a pool without an endpoint refuses the pair, and nothing was charged to the other.
     */
    private int decidePair(Rule rule, RouteEvent e, long now, Decision d) {
        resetPolicyOutputs(e, rule);
        why.setLength(0);
        if (e.explain) {
            why.append("prefill: ");
        }
        int mark = why.length();
        EndpointState prefill = rule.policyFor(Role.PREFILL).choose(rule.candidates(Role.PREFILL), e, now, why);
        if (e.explain && e.serving != null) {
            explainExcluded(rule.candidates(Role.PREFILL), e);
        }
        EndpointState decode = null;
        if (prefill != null) {
            // The prefill's policy outputs are kept aside while the decode pool is asked as a decode leg would be.
            int uncached = e.uncachedTokens;
            int rank = e.chosenRank;
            RuleStats.Tier tier = e.tier;
            int reachable = e.reachableTokens;
            int predicted = e.predictedTokens;
            int confirmed = e.confirmedTokens;
            io.kvgate.dataplane.quality.LossCause routeLoss = e.routeLoss;
            int[] prompt = e.promptTokens;
            int tried = e.triedCount;
            Admission gate = e.gate;
            e.role = Role.DECODE;
            e.promptTokens = null;
            e.triedCount = 0;
            e.gate = null;
            clearPolicyOutputs(e);
            if (e.explain) {
                why.append(why.length() == mark ? "" : "; ").append("decode: ");
            }
            decode = rule.policyFor(Role.DECODE).choose(rule.candidates(Role.DECODE), e, now, why);
            if (e.explain && e.serving != null) {
                explainExcluded(rule.candidates(Role.DECODE), e);
            }
            e.role = Role.PREFILL;
            e.promptTokens = prompt;
            e.triedCount = tried;
            e.gate = gate;
            e.uncachedTokens = uncached;
            e.chosenRank = rank;
            e.tier = tier;
            e.reachableTokens = reachable;
            e.predictedTokens = predicted;
            e.confirmedTokens = confirmed;
            e.routeLoss = routeLoss;
        }
        d.explanation = e.explain ? why.toString() : null;
        if (prefill == null || decode == null) {
            d.unserved = prefill == null ? Role.PREFILL : Role.DECODE;
            if (d.explanation == null) {
                d.explanation = prefill == null ? NO_HEALTHY_PREFILL : NO_HEALTHY_DECODE;
            }
            return 0;
        }
        d.endpoint = prefill;
        d.decodeEndpoint = decode;
        if (!charge(e, prefill, now, d)) {
            return 0;
        }
        decode.onRouted(now, 0, -1);
        return 2;
    }

    private static void resetPolicyOutputs(RouteEvent e, Rule rule) {
        e.gate = e.needsAdmission ? rule.admission : null;
        clearPolicyOutputs(e);
    }

    /** What a policy writes into the event: cleared before it is asked. */
    private static void clearPolicyOutputs(RouteEvent e) {
        e.uncachedTokens = 0;
        e.chosenRank = -1;
        e.tier = null;
        e.reachableTokens = -1;
        e.predictedTokens = -1;
        e.confirmedTokens = -1;
        e.routeLoss = null;
    }

    /** Counts {@code ep} for the request (not for a dry run) and tells the decision what it charged. */
    private static boolean charge(RouteEvent e, EndpointState ep, long now, Decision d) {
        if (e.dryRun) {
            return false;
        }
        int charge = e.tracksPrefill ? Math.max(0, e.uncachedTokens) : 0;
        int rank = e.sendsDpRank ? e.chosenRank : -1;
        ep.onRouted(now, charge, rank);
        d.chargedPrefillTokens = charge;
        d.dpRank = rank;
        if (e.tier != null) {
            d.tier = e.tier.label();
            d.reachableTokens = e.reachableTokens;
            d.predictedTokens = e.predictedTokens;
            d.confirmedTokens = e.confirmedTokens;
            d.routeLoss = e.routeLoss;
        }
        return true;
    }

    /**
     * Explained requests only: the candidates the request may not go to because they do not serve its discovered LoRA
     * adapter or do not mount its route (review row 27), whatever the policy said about them.
     */
    private void explainExcluded(EndpointState[] candidates, RouteEvent e) {
        int mark = why.length();
        for (EndpointState c : candidates) {
            if (!e.serves(c)) {
                why.append(why.length() == mark ? (mark == 0 ? "" : "; ") + "excluded (adapter or route not served)=" : ",")
                    .append(c.key());
            }
        }
    }
}
