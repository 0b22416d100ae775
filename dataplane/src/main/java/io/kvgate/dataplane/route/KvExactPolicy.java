package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.Holders;
import io.kvgate.index.block.SpeculativeOverlay;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;

/**
 * KV-exact routing: for each candidate, the longest contiguous run of cached blocks from the start of the prompt
 * (what engines actually reuse), from the index plus the speculative overlay; the best under a load bound, or by a
 * soft cost (missed blocks + λ·load). A candidate's load is its estimate ({@link EndpointState#load()}: engine-reported
 * plus this gateway's requests since the scrape, else this gateway's in-flight count) plus
 * {@code kv.prefill_token_weight} per uncached prompt token of this gateway's requests still in prefill there; the
 * chosen endpoint is charged this request's own uncached tokens (prompt minus matched blocks) until its first
 * response bytes. Falls back to the rule's fallback policy when the prompt has no tokens, no full
 * block, or matches fewer than {@code min_match_blocks} anywhere; an endpoint with an empty inventory (e.g. just
 * restarted) is re-admitted every {@code cold_readmit_every} decisions so it is not starved.
 *
 * <p>Only the first {@code maxPromptBlocks} blocks of a prompt are hashed (the index's lookup limit, 8192 by
 * default): block keys chain from the start and the lookup scores no more, so hashing the rest of a 4M-token prompt
 * would only hold up every other rule's routing (reliability review H4).
 *
 * <p>Routing stage only: owns its hasher, index reader, overlay and scratch arrays (no allocation per decision). A
 * configuration swap hands the speculative overlay and the decision count to the rule's next version when both hash
 * prompts the same way ({@link #carryOver}).
 */
final class KvExactPolicy implements RoutingPolicy {
    private final RuleConfig.KvExactConfig knobs;
    private final RuleConfig rule;
    private final boolean soft;
    private final int maxPromptBlocks;
    private final RoutingPolicy fallback;
    private final RuleStats stats;
    private final BlockIndex index;
    private final BlockIndexReader reader;
    private SpeculativeOverlay overlay;
    private final RuleHasher hasher;
    private final int blockSize;
    private final String ruleName;
    private final int watchdogStreak;
    private final long[] keys;
    private int[] ids = new int[16];
    private int[] matched = new int[16];
    /** Memory tier of each candidate's last matched block (see {@link BlockIndexReader#longestPrefix}). */
    private int[] tiers = new int[16];
    /** Each candidate's load for this decision (request estimate + token term), computed once per decision. */
    private double[] loads = new double[16];
    private final double tokenWeight;
    private long decisions;
    private final NanoClock clock;
    private final StageTimers stages;

    KvExactPolicy(RuleConfig rule, BlockIndex index, RoutingPolicy fallback, RuleStats stats, NanoClock clock, StageTimers stages) {
        this.clock = clock;
        this.stages = stages;
        this.knobs = rule.kvExact();
        this.rule = rule;
        this.soft = "soft".equals(knobs.mode());
        this.maxPromptBlocks = index == null ? 0 : index.config().maxPromptBlocks();
        this.keys = new long[Math.max(1, maxPromptBlocks)];
        this.fallback = fallback;
        this.stats = stats;
        this.index = index;
        this.reader = index == null ? null : index.newReader();
        this.overlay = index == null || knobs.speculativeTtlMs() == 0 ? null
            : new SpeculativeOverlay(1 << 17, knobs.speculativeTtlMs() * 1_000_000L, clock);
        this.blockSize = rule.blockSize();
        this.ruleName = rule.name();
        this.watchdogStreak = knobs.watchdogZeroHitStreak();
        this.hasher = new RuleHasher(rule, 1 << 16);
        this.tokenWeight = knobs.prefillTokenWeight();
    }

    /** Computes the keys of the prompt's first full blocks (at most the lookup limit) into {@link #keys}. */
    private int hashPrompt(int[] tokens, String salt, String lora) {
        return hasher.hash(tokens, salt, lora, keys, maxPromptBlocks);
    }

    /** Blocks hashed by the last decision (tests: the H4 bound). */
    int lastHashedBlocks() {
        return lastBlocks;
    }

    @Override
    public void carryOver(RoutingPolicy previous) {
        if (!(previous instanceof KvExactPolicy p)) {
            return;
        }
        fallback.carryOver(p.fallback);
        decisions = p.decisions;
        boolean sameKeys = p.index == index && p.blockSize == blockSize && java.util.Objects.equals(p.rule.hashAlgo(), rule.hashAlgo())
            && java.util.Objects.equals(p.rule.hashSeed(), rule.hashSeed()) && java.util.Objects.equals(p.rule.kvKeyMode(), rule.kvKeyMode());
        if (sameKeys && p.overlay != null && overlay != null && p.knobs.speculativeTtlMs() == knobs.speculativeTtlMs()) {
            overlay = p.overlay; // blocks routed moments ago are still on their way into the engines' caches
        }
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        lookedUp = false;
        EndpointState ep = decide(c, r, nowNs, why);
        if (ep != null) {
            r.uncachedTokens = uncachedOn(ep, c, r.promptTokens());
        }
        if (ep != null && overlay != null && lastBlocks > 0 && !r.dryRun()) {
            overlay.recordRouted(ep.id(), keys, lastBlocks);
        }
        return ep;
    }

    private int lastBlocks;
    /** Whether {@link #matched} holds this decision's lookup. */
    private boolean lookedUp;

    /** The prompt tokens {@code ep} must prefill: all of them, less its matched blocks when the lookup ran. */
    private int uncachedOn(EndpointState ep, EndpointState[] c, int[] tokens) {
        if (tokens == null) {
            return 0;
        }
        int cached = 0;
        if (lookedUp) {
            for (int i = 0; i < c.length; i++) {
                if (c[i] == ep) {
                    cached = matched[i] * blockSize;
                    break;
                }
            }
        }
        return Math.max(0, tokens.length - cached);
    }

    private EndpointState decide(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        lastBlocks = 0;
        int[] tokens = r.promptTokens();
        if (index == null) {
            return fallback(c, r, nowNs, why, MissReason.NO_KV_EVENTS);
        }
        if (tokens == null) {
            return fallback(c, r, nowNs, why, MissReason.NO_TOKENS);
        }
        long t0 = clock.nanoTime();
        int n = hashPrompt(tokens, r.cacheSalt(), r.lora());
        long t1 = clock.nanoTime();
        stages.recordNs(StageTimers.Stage.HASH, t1 - t0);
        lastBlocks = n;
        if (n == 0) {
            return fallback(c, r, nowNs, why, MissReason.SHORT_PROMPT);
        }
        if (ids.length < c.length) {
            ids = new int[c.length];
            matched = new int[c.length];
            tiers = new int[c.length];
            loads = new double[c.length];
        }
        for (int i = 0; i < c.length; i++) {
            ids[i] = c[i].id();
        }
        reader.longestPrefix(keys, n, ids, c.length, matched, tiers, overlay);
        lookedUp = true;
        stages.recordNs(StageTimers.Stage.LOOKUP, clock.nanoTime() - t1);
        stats.lookup(n);

        int eligible = 0;
        double totalLoad = 0;
        int bestMatched = 0;
        for (int i = 0; i < c.length; i++) {
            if (RoutingPolicy.eligible(c[i], r, nowNs)) {
                eligible++;
                loads[i] = c[i].cost(tokenWeight);
                totalLoad += loads[i];
                bestMatched = Math.max(bestMatched, matched[i]);
            }
        }
        if (eligible == 0) {
            return null;
        }
        decisions++;
        double mean = (totalLoad + 1) / eligible;
        if (knobs.coldReadmitEvery() > 0 && decisions % knobs.coldReadmitEvery() == 0) {
            for (int i = 0; i < c.length; i++) {
                if (RoutingPolicy.eligible(c[i], r, nowNs) && index.blocks(c[i].id()) == 0 && loads[i] <= mean) {
                    stats.tier(Tier.KV_COLD_READMIT);
                    explain(r, why, c, n, "cold endpoint re-admitted");
                    return c[i];
                }
            }
        }
        if (bestMatched == 0) {
            watchdog(c, r, nowNs);
        } else {
            stats.zeroHitStreak = 0;
        }
        if (bestMatched < Math.max(1, knobs.minMatchBlocks())) {
            return fallback(c, r, nowNs, why, bestMatched == 0 ? MissReason.NO_MATCH : MissReason.BELOW_MIN_MATCH);
        }
        EndpointState best = null;
        int bestIdx = -1;
        if (soft) {
            double bestCost = Double.MAX_VALUE;
            for (int i = 0; i < c.length; i++) {
                if (!RoutingPolicy.eligible(c[i], r, nowNs)) {
                    continue;
                }
                double cost = (n - weighted(i)) + knobs.lambda() * loads[i];
                if (cost < bestCost || (cost == bestCost && loads[i] < loads[bestIdx])) {
                    bestCost = cost;
                    best = c[i];
                    bestIdx = i;
                }
            }
        } else {
            // Relative bound with an absolute slack: at low load one request in flight must not count as "hot".
            double cap = Math.max(knobs.loadCapFactor() * mean, mean + knobs.loadSlack());
            for (int i = 0; i < c.length; i++) {
                if (!RoutingPolicy.eligible(c[i], r, nowNs) || loads[i] + 1 > cap) {
                    continue;
                }
                if (best == null || weighted(i) > weighted(bestIdx)
                    || (weighted(i) == weighted(bestIdx) && loads[i] < loads[bestIdx])) {
                    best = c[i];
                    bestIdx = i;
                }
            }
            if (best != null && matched[bestIdx] < Math.max(1, knobs.minMatchBlocks())) {
                // Every endpoint that holds the prefix is over the bound: spread the load instead.
                return fallback(c, r, nowNs, why, MissReason.OVER_LOAD_BOUND);
            }
        }
        if (best == null) {
            return fallback(c, r, nowNs, why, MissReason.OVER_LOAD_BOUND);
        }
        stats.tier(Tier.KV_EXACT);
        stats.matched(matched[bestIdx]);
        if (r.explain()) {
            explain(r, why, c, n, "longest cached prefix " + matched[bestIdx] + "/" + n + " blocks (tier "
                + Holders.tierName(tiers[bestIdx]) + ", weight " + knobs.tierWeights().of(tiers[bestIdx]) + ")");
        }
        return best;
    }

    /** A candidate's match weighed by the memory tier it is in ({@code kv.tier_weights}). */
    private double weighted(int i) {
        return matched[i] * knobs.tierWeights().of(tiers[i]);
    }

    private void watchdog(EndpointState[] c, RouteEvent r, long nowNs) {
        boolean inventory = false;
        for (EndpointState e : c) {
            inventory |= index.blocks(e.id()) > 0;
        }
        if (!inventory) {
            stats.zeroHitStreak = 0;
            return;
        }
        if (++stats.zeroHitStreak == watchdogStreak) {
            stats.watchdogFired();
            if (!stats.watchdogWarned) {
                stats.watchdogWarned = true;
                System.err.println("kvgate: WARNING rule '" + ruleName + "': " + watchdogStreak
                    + " consecutive KV lookups matched nothing while the engines hold blocks: check that block_size, "
                    + "hash_seed (PYTHONHASHSEED), hash_algo, tokenizer and chat template match the engines "
                    + "(run the parity probe: ./kvgate ctl parity)");
            }
        }
    }

    private EndpointState fallback(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why, MissReason reason) {
        stats.miss(reason);
        stats.tier(Tier.FALLBACK);
        EndpointState ep = fallback.choose(c, r, nowNs, why);
        if (r.explain()) {
            why.append("tier=fallback(").append(reason.label).append(")");
            if (reason == MissReason.NO_MATCH || reason == MissReason.BELOW_MIN_MATCH || reason == MissReason.OVER_LOAD_BOUND) {
                appendScores(why, c);
            }
        }
        return ep;
    }

    private void explain(RouteEvent r, StringBuilder why, EndpointState[] c, int n, String reason) {
        if (!r.explain()) {
            return;
        }
        why.append("tier=kv_exact; prompt_blocks=").append(n).append("; ").append(reason);
        appendScores(why, c);
    }

    private void appendScores(StringBuilder why, EndpointState[] c) {
        why.append("; matched=");
        for (int i = 0; i < c.length; i++) {
            why.append(i == 0 ? "" : ",").append(c[i].key()).append(':').append(matched[i]);
            if (matched[i] > 0) {
                why.append('@').append(Holders.tierName(tiers[i]));
            }
        }
        why.append("; load=");
        for (int i = 0; i < c.length; i++) {
            why.append(i == 0 ? "" : ",").append(c[i].key()).append(':');
            c[i].explainLoad(why);
        }
        if (tokenWeight > 0) {
            why.append("; prefill_token_weight=").append(tokenWeight);
        }
    }
}
