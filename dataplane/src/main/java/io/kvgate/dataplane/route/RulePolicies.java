package io.kvgate.dataplane.route;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;

/** Builds a rule's policy stack: the configured tier on top of its load-only fallback. */
public final class RulePolicies {
    private RulePolicies() {}

    /** As below, with stage timings recorded into a private (unexported) set of histograms. */
    public static RoutingPolicy create(RouteTable.RuleBuildContext ctx, BlockIndex index, NanoClock clock) {
        return create(ctx, index, clock, new StageTimers());
    }

    /**
     * Heap bytes of {@code rule}'s KV routing state (lookup keys, index reader, prefix-hash memo, speculative
     * overlay) on a gateway block index of {@code index}: what {@link #create} allocates for it, 0 when the rule does
     * not look the index up. Each rule version holds its own (a reload builds new ones, the old are collected).
     */
    public static long kvRoutingHeapBytes(RuleConfig rule, BlockIndexConfig index) {
        return looksUpIndex(rule) ? KvExactPolicy.heapBytesFor(rule, index) : 0;
    }

    /** Whether {@code rule} routes on the block index (given the gateway keeps one). */
    public static boolean looksUpIndex(RuleConfig rule) {
        return switch (rule.policyKind()) {
            case KV_EXACT -> true;
            case PD -> "kv_exact".equals(rule.pd().prefillPolicy()) && prefillEvents(rule);
            default -> false;
        };
    }

    private static boolean prefillEvents(RuleConfig rule) {
        for (var e : rule.endpoints()) {
            if ("prefill".equals(e.role()) && e.kvEvents() != null) {
                return true;
            }
        }
        return false;
    }

    /** @param index the gateway's block index, or null when no endpoint publishes KV events */
    public static RoutingPolicy create(RouteTable.RuleBuildContext ctx, BlockIndex index, NanoClock clock, StageTimers stages) {
        RuleConfig rule = ctx.rule();
        RuleStats stats = ctx.stats();
        RoutingPolicy fallback = Policies.create(rule.fallback());
        // Under kv_exact a miss prefills the whole prompt: the fallback weighs in-flight prefill tokens too.
        double tokenWeight = rule.kvExact().prefillTokenWeight();
        return switch (rule.policyKind()) {
            case SESSION -> session(rule, fallback, stats);
            case CHWBL -> new ChwblPolicy(rule, ctx.endpoints(), fallback, stats);
            case KV_EXACT -> new KvExactPolicy(rule, index, Policies.create(rule.fallback(), tokenWeight, false), stats, clock, stages);
            case PD -> {
                // "Mode 1": exact inventory over the prefill pool when the prefills publish events.
                RoutingPolicy prefill = looksUpIndex(rule) && index != null
                    ? new KvExactPolicy(rule, index, Policies.create("least_outstanding", tokenWeight, false), stats, clock, stages)
                    : Policies.create("least_outstanding");
                yield rule.pd().sessionAffinity() ? session(rule, prefill, stats) : prefill;
            }
            case ROUND_ROBIN, WEIGHTED, LEAST_OUTSTANDING -> Policies.create(rule.policy(), 0.0, true);
        };
    }

    /**
     * Session affinity over {@code inner} in the rule's {@code session.mode}: rendezvous hashing of the session key
     * (hash: every replica agrees), or this gateway's TTL pin table whose pins {@code inner} makes (table).
     */
    static RoutingPolicy session(RuleConfig rule, RoutingPolicy inner, RuleStats stats) {
        return switch (rule.session().modeKind()) {
            case HASH -> new HashedSessionPolicy(rule, inner, stats);
            case TABLE -> new SessionPolicy(rule, inner, stats);
        };
    }

    /** The decode pool's policy of a P/D rule: least outstanding, pinned per conversation when configured. */
    public static RoutingPolicy decodePolicy(RuleConfig rule, RuleStats stats) {
        RoutingPolicy lo = Policies.create("least_outstanding");
        return rule.policyKind() == RuleConfig.Policy.PD && rule.pd().sessionAffinity() ? session(rule, lo, stats) : lo;
    }

    /** Whether requests of this rule need a session key (session policy, or P/D with session affinity). */
    public static boolean needsSessionKey(RuleConfig rule) {
        RuleConfig.Policy p = rule.policyKind();
        return p == RuleConfig.Policy.SESSION || (p == RuleConfig.Policy.PD && rule.pd().sessionAffinity());
    }

    /**
     * Whether a P/D rule decides per request between the split path and the decode endpoint alone (conditional P/D:
     * {@code pd.min_uncached_tokens} above 0, or decode endpoints whose KV events show what they hold).
     */
    public static boolean conditionalPd(RuleConfig rule) {
        return rule.policyKind() == RuleConfig.Policy.PD && EngineProfiles.of(rule).decodeServesAlone()
            && (rule.pd().minUncachedTokens() > 0
                || rule.endpoints().stream().anyMatch(e -> "decode".equals(e.role()) && e.kvEvents() != null));
    }

    /** Whether a P/D rule routes its prefill leg on the exact inventory (the prefills publish KV events). */
    public static boolean prefillKvExact(RuleConfig rule) {
        return rule.policyKind() == RuleConfig.Policy.PD && "kv_exact".equals(rule.pd().prefillPolicy())
            && rule.endpoints().stream().anyMatch(e -> "prefill".equals(e.role()) && e.kvEvents() != null);
    }

    /** Whether requests of this rule need their prompt tokens before routing. */
    public static boolean needsPromptTokens(RuleConfig rule) {
        return switch (rule.policyKind()) {
            case KV_EXACT, CHWBL -> true;
            case PD -> prefillKvExact(rule) || conditionalPd(rule); // conditional: the prompt's length decides the path
            default -> false;
        };
    }

    /**
     * The most prompt tokens a request of this rule is routed on, 0 when it is not routed on its prompt: lookups read
     * at most the index's lookup depth ({@link BlockIndexConfig#DEFAULT_MAX_PROMPT_BLOCKS}
     * blocks), so the routing stage never gets, nor hashes, more.
     */
    public static int promptTokensRoutedOn(RuleConfig rule) {
        if (!needsPromptTokens(rule)) {
            return 0;
        }
        return (int) Math.min(Integer.MAX_VALUE, (long) BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS * rule.blockSize());
    }
}
