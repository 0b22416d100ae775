package io.kvgate.dataplane.route;

import io.kvgate.control.log.Log;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.Holders;
import io.kvgate.index.block.SpeculativeOverlay;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.PrefixHashCache;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.dataplane.quality.LossCause;
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
    // Slots: what the decision compares, one per candidate endpoint, or one per DP rank of an endpoint whose ranks
    // are scored separately (kv.dp_rank_hint, a request that can carry the hint, dp_ranks > 1).
    private int slotCount;
    private int[] slotCand = new int[16];
    /** The slot's DP rank, -1 when it is the endpoint as a whole (the engine places the request). */
    private int[] slotRank = new int[16];
    private int[] slotMatched = new int[16];
    private int[] slotTier = new int[16];
    private boolean[] slotEligible = new boolean[16];
    /** The slot's load for this decision (request estimate + token term), computed once per decision. */
    private double[] slotLoad = new double[16];
    private final int[] rankDepth = new int[EngineReading.MAX_RANKS];
    /** The slot the decision took, -1 when none (fallback before the lookup). */
    private int chosenSlot;
    private final double tokenWeight;
    private final boolean rankHints;
    /**
     * Speculation per rank: the speculative overlay records endpoints, not ranks, so the rank a prompt family (its
     * first block) was pinned to moments ago is remembered here for the overlay's TTL; the family's next request
     * finds its speculative blocks on that rank. Direct-mapped, routing stage only.
     */
    private final long[] specKey;
    private final int[] specHolder;
    private final long[] specUntil;
    private final long specTtlNs;
    private long decisions;
    /** State of the draw among equal candidates: per process, so replicas of one configuration draw differently. */
    private long tieState = ChwblPolicy.mix(System.nanoTime() ^ ProcessHandle.current().pid() * 0x9E3779B97F4A7C15L) | 1;
    private final NanoClock clock;
    private final StageTimers stages;
    /** {@code kv.spread}: how a request no cached prefix pins is placed. */
    private final RuleConfig.Spread spread;
    /** Recent new blocks per endpoint ({@code kv.spread: recent_work}), null otherwise; a reload keeps it. */
    private RecentWork recentWork;

    KvExactPolicy(RuleConfig rule, BlockIndex index, RoutingPolicy fallback, RuleStats stats, NanoClock clock, StageTimers stages) {
        this.clock = clock;
        this.stages = stages;
        this.knobs = rule.kvExact();
        this.rule = rule;
        this.soft = "soft".equals(knobs.mode());
        // Every structure below is sized from the rule's configuration (review B-7): its lookup depth from
        // max_prompt_tokens, its reader from its endpoint count, its hash memo and overlay from kv_capacity_blocks.
        // MemoryBudget states the same sizes for `serve --check`.
        this.maxPromptBlocks = index == null ? 0 : lookupDepthBlocks(rule, index.config());
        this.keys = new long[Math.max(1, maxPromptBlocks)];
        this.fallback = fallback;
        this.stats = stats;
        this.index = index;
        this.reader = index == null ? null : index.newReader(readerCandidates(rule), maxPromptBlocks);
        this.overlay = index == null || knobs.speculativeTtlMs() == 0 ? null
            : new SpeculativeOverlay(SpeculativeOverlay.entriesFor(rule.kvCapacityBlocks()),
                knobs.speculativeTtlMs() * 1_000_000L, clock);
        this.blockSize = rule.blockSize();
        this.ruleName = rule.name();
        this.watchdogStreak = knobs.watchdogZeroHitStreak();
        this.hasher = new RuleHasher(rule, index == null ? 0 : PrefixHashCache.entriesFor(rule.kvCapacityBlocks()));
        this.tokenWeight = knobs.prefillTokenWeight();
        this.rankHints = knobs.dpRankHint();
        boolean spec = overlay != null && rankHints;
        this.specKey = new long[spec ? SPEC_SLOTS : 0];
        this.specHolder = new int[spec ? SPEC_SLOTS : 0];
        this.specUntil = new long[spec ? SPEC_SLOTS : 0];
        this.specTtlNs = knobs.speculativeTtlMs() * 1_000_000L;
        this.spread = knobs.spreadKind();
        this.recentWork = index != null && spread == RuleConfig.Spread.RECENT_WORK
            ? new RecentWork(index.config().maxEndpoints(), knobs.recentWorkWindowMs() * 1_000_000L) : null;
        if (recentWork != null) {
            long now = clock.nanoTime();
            for (int id = 0; id < index.config().maxEndpoints(); id++) {
                recentWork.watch(id, index.blocksAdded(id), now);
            }
        }
    }

    private static final int SPEC_SLOTS = 4096;

    /** Blocks of a prompt the rule hashes and looks up: its longest admitted prompt, at most the index's limit. */
    static int lookupDepthBlocks(RuleConfig rule, BlockIndexConfig index) {
        return index.lookupDepthBlocks(rule.maxPromptTokens(), rule.blockSize());
    }

    /** Candidates one lookup scores: the rule's endpoints (a reload with more builds a new policy). */
    static int readerCandidates(RuleConfig rule) {
        return Math.max(1, rule.endpoints().size());
    }

    /**
     * Heap bytes (array payloads) of a kv_exact rule's routing state on an index of {@code index}: what the
     * constructor allocates for {@code rule} ({@link #heapBytes()} once built).
     */
    static long heapBytesFor(RuleConfig rule, BlockIndexConfig index) {
        int depth = lookupDepthBlocks(rule, index);
        long bytes = (long) depth * Long.BYTES // keys
            + BlockIndexReader.heapBytesFor(index, readerCandidates(rule), depth);
        BlockHashSpec spec = RuleHasher.spec(rule);
        if (spec != null) {
            bytes += PrefixHashCache.heapBytesFor(spec, PrefixHashCache.entriesFor(rule.kvCapacityBlocks()));
        }
        if (rule.kvExact().speculativeTtlMs() > 0) {
            bytes += SpeculativeOverlay.heapBytesFor(SpeculativeOverlay.entriesFor(rule.kvCapacityBlocks()));
            if (rule.kvExact().dpRankHint()) {
                bytes += SPEC_SLOTS * (2L * Long.BYTES + Integer.BYTES);
            }
        }
        if (rule.kvExact().spreadKind() == RuleConfig.Spread.RECENT_WORK) {
            bytes += RecentWork.heapBytesFor(index.maxEndpoints());
        }
        return bytes;
    }

    /** Heap bytes (array payloads) of this policy's sized structures, from what it allocated (tests: B-7). */
    long heapBytes() {
        return (long) keys.length * Long.BYTES + (reader == null ? 0 : reader.heapBytes()) + hasher.cacheHeapBytes()
            + (long) (specKey.length + specUntil.length) * Long.BYTES + (long) specHolder.length * Integer.BYTES
            + (overlay == null ? 0 : overlay.heapBytes())
            + (recentWork == null ? 0 : RecentWork.heapBytesFor(index.config().maxEndpoints()));
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
        if (p.recentWork != null && recentWork != null && p.index == index
            && p.knobs.recentWorkWindowMs() == knobs.recentWorkWindowMs()) {
            recentWork = p.recentWork; // the work placed lately did not go away with the reload
        }
    }

    @Override
    public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
        lookedUp = false;
        slotCount = 0;
        chosenSlot = -1;
        cap = Double.POSITIVE_INFINITY;
        missed = null;
        if (recentWork != null) {
            // Every decision reads the engines' block counts, not only the unpinned ones: blocks count from when a
            // decision first sees them, so between two unpinned requests they are dated by the traffic in between.
            for (EndpointState e : c) {
                recentWork.update(e.id(), index.blocksAdded(e.id()), nowNs);
            }
        }
        EndpointState ep = decide(c, r, nowNs, why);
        if (ep != null) {
            r.uncachedTokens = uncachedOn(r.promptTokens());
            account(c, r, ep, nowNs);
            if (r.explain() && r.predictedTokens >= 0) {
                why.append("; reachable_tokens=").append(r.reachableTokens).append("; predicted_tokens=")
                    .append(r.predictedTokens).append(" (confirmed ").append(r.confirmedTokens).append(')');
                if (r.routeLoss != null) {
                    why.append("; passed_over=").append(r.routeLoss.label);
                }
            }
            if (r.chosenRank >= 0 && r.explain()) {
                why.append("; dp_rank=").append(r.chosenRank);
            }
        }
        if (ep != null && overlay != null && lastBlocks > 0 && !r.dryRun()) {
            overlay.recordRouted(ep.id(), keys, lastBlocks);
            if (r.chosenRank >= 0 && specKey.length > 0) {
                int slot = specSlot(keys[0]);
                specKey[slot] = keys[0];
                specHolder[slot] = ep.id() * EngineReading.MAX_RANKS + r.chosenRank;
                specUntil[slot] = nowNs + specTtlNs;
            }
        }
        return ep;
    }

    private static int specSlot(long key) {
        return (int) ChwblPolicy.mix(key) & (SPEC_SLOTS - 1);
    }

    private int lastBlocks;
    /** Whether the slots hold this decision's lookup. */
    private boolean lookedUp;
    /** This decision's load bound (hard mode; +infinity before it is computed) and its fallback's reason, if any. */
    private double cap;
    private MissReason missed;

    /**
     * Routing-quality accounting ({@code io.kvgate.dataplane.quality}): writes the decision's reachable, predicted and
     * confirmed prompt tokens into the event, and why the longest holder was passed over when it was. A prompt too
     * short for one block has nothing any endpoint could hold: 0 reachable. Without a lookup all stay -1. The
     * confirmed part costs a lookup of the chosen endpoint's ranks in the index alone, only when the speculative
     * overlay is on and the endpoint matched something.
     */
    private void account(EndpointState[] c, RouteEvent r, EndpointState ep, long nowNs) {
        if (!lookedUp) {
            if (missed == MissReason.SHORT_PROMPT) {
                r.reachableTokens = 0;
                r.predictedTokens = 0;
                r.confirmedTokens = 0;
            }
            return;
        }
        int holder = -1;
        for (int s = 0; s < slotCount; s++) {
            if (!r.serves(c[slotCand[s]])) {
                continue;
            }
            if (holder < 0 || slotMatched[s] > slotMatched[holder]
                || (slotMatched[s] == slotMatched[holder] && (s == chosenSlot || (slotEligible[s] && !slotEligible[holder] && holder != chosenSlot)))) {
                holder = s;
            }
        }
        int predicted = chosenSlot >= 0 ? slotMatched[chosenSlot] : 0;
        int reachable = holder >= 0 ? Math.max(predicted, slotMatched[holder]) : predicted;
        int confirmed = predicted;
        if (overlay != null && predicted > 0) {
            int ranks = Math.max(1, ep.ranks());
            reader.rankDepths(keys, predicted, ep.id(), ranks, rankDepth);
            confirmed = 0;
            for (int rk = 0; rk < Math.min(ranks, rankDepth.length); rk++) {
                if (r.chosenRank < 0 || rk == r.chosenRank) {
                    confirmed = Math.max(confirmed, rankDepth[rk]);
                }
            }
        }
        r.reachableTokens = reachable * blockSize;
        r.predictedTokens = predicted * blockSize;
        r.confirmedTokens = Math.min(confirmed, predicted) * blockSize;
        if (reachable > predicted) {
            r.routeLoss = lossCause(c, r, holder, nowNs);
        }
    }

    /** Why {@code holder}, which held more of the prompt than the chosen slot, did not get the request. */
    private LossCause lossCause(EndpointState[] c, RouteEvent r, int holder, long nowNs) {
        EndpointState h = c[slotCand[holder]];
        if (!slotEligible[holder]) {
            if (h.drained()) {
                return LossCause.DRAINING;
            }
            if (!h.available(nowNs)) {
                return LossCause.UNAVAILABLE;
            }
            if (r.alreadyTried(h)) {
                return LossCause.RETRY;
            }
            return LossCause.ADMISSION;
        }
        if (chosenSlot >= 0 && slotCand[chosenSlot] == slotCand[holder]) {
            return LossCause.DP_RANK;
        }
        if (r.tier == Tier.KV_COLD_READMIT) {
            return LossCause.COLD_READMIT;
        }
        if (r.tier == Tier.KV_EXACT) {
            return soft || slotLoad[holder] + 1 > cap ? LossCause.LOAD_BOUND : LossCause.TIER;
        }
        if (missed == MissReason.OVER_LOAD_BOUND) {
            return LossCause.LOAD_BOUND;
        }
        return missed == MissReason.BELOW_MIN_MATCH ? LossCause.MIN_MATCH : LossCause.FALLBACK;
    }

    /** The prompt tokens the chosen slot must prefill: all of them, less its matched blocks when the lookup ran. */
    private int uncachedOn(int[] tokens) {
        if (tokens == null) {
            return 0;
        }
        int cached = lookedUp && chosenSlot >= 0 ? slotMatched[chosenSlot] * blockSize : 0;
        return Math.max(0, tokens.length - cached);
    }

    /** Builds the slots of this decision from the per-endpoint lookup; DP ranks scored separately when hinted. */
    private void buildSlots(EndpointState[] c, RouteEvent r, long nowNs, boolean byRank) {
        int max = 0;
        for (EndpointState e : c) {
            max += byRank ? e.ranks() : 1;
        }
        if (slotCand.length < max) {
            slotCand = new int[max];
            slotRank = new int[max];
            slotMatched = new int[max];
            slotTier = new int[max];
            slotEligible = new boolean[max];
            slotLoad = new double[max];
        }
        int s = 0;
        for (int i = 0; i < c.length; i++) {
            EndpointState e = c[i];
            boolean elig = RoutingPolicy.eligible(e, r, nowNs);
            int ranks = byRank ? e.ranks() : 1;
            if (ranks <= 1) {
                slotCand[s] = i;
                slotRank[s] = -1;
                slotMatched[s] = matched[i];
                slotTier[s] = tiers[i];
                slotEligible[s] = elig;
                slotLoad[s] = elig ? e.cost(tokenWeight) : 0;
                s++;
                continue;
            }
            reader.rankDepths(keys, matched[i], e.id(), ranks, rankDepth);
            if (specKey.length > 0 && matched[i] > 0) {
                int slot = specSlot(keys[0]);
                int holder = specHolder[slot];
                if (specKey[slot] == keys[0] && nowNs - specUntil[slot] < 0 && holder / EngineReading.MAX_RANKS == e.id()) {
                    int rk = holder % EngineReading.MAX_RANKS;
                    if (rk < ranks) {
                        rankDepth[rk] = matched[i]; // its speculative blocks went to this rank
                    }
                }
            }
            for (int rk = 0; rk < ranks; rk++) {
                slotCand[s] = i;
                slotRank[s] = rk;
                slotMatched[s] = rankDepth[rk];
                slotTier[s] = tiers[i];
                slotEligible[s] = elig;
                slotLoad[s] = elig ? e.rankLoad().cost(rk, tokenWeight) : 0;
                s++;
            }
        }
        slotCount = s;
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
        if (hasher.seedUnresolved()) {
            return fallback(c, r, nowNs, why, MissReason.SEED_UNRESOLVED);
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
        }
        for (int i = 0; i < c.length; i++) {
            ids[i] = c[i].id();
        }
        reader.longestPrefix(keys, n, ids, c.length, matched, tiers, overlay);
        buildSlots(c, r, nowNs, rankHints && r.sendsDpRank);
        lookedUp = true;
        stages.recordNs(StageTimers.Stage.LOOKUP, clock.nanoTime() - t1);
        stats.lookup(n);

        int eligible = 0;
        double totalLoad = 0;
        int bestMatched = 0;
        for (int s = 0; s < slotCount; s++) {
            if (slotEligible[s]) {
                eligible++;
                totalLoad += slotLoad[s];
                bestMatched = Math.max(bestMatched, slotMatched[s]);
            }
        }
        if (eligible == 0) {
            return null;
        }
        decisions++;
        double mean = (totalLoad + 1) / eligible;
        if (knobs.coldReadmitEvery() > 0 && decisions % knobs.coldReadmitEvery() == 0) {
            for (int s = 0; s < slotCount; s++) {
                if (slotEligible[s] && index.blocks(c[slotCand[s]].id()) == 0 && slotLoad[s] <= mean) {
                    stats.tier(r.decidedBy(Tier.KV_COLD_READMIT));
                    explain(r, why, c, n, "cold endpoint re-admitted");
                    return take(c, r, s);
                }
            }
        }
        if (bestMatched == 0) {
            watchdog(c, r, nowNs);
        } else {
            stats.zeroHitStreak = 0;
        }
        if (bestMatched < Math.max(1, knobs.minMatchBlocks())) {
            MissReason reason = bestMatched == 0 ? MissReason.NO_MATCH : MissReason.BELOW_MIN_MATCH;
            if (spread != RuleConfig.Spread.LEAST_LOADED) {
                // Nothing pins it: placed as a weak match is (kv.spread), not by the rule's fallback policy.
                return spreadByLoad(c, r, nowNs, why, reason, n, bestMatched);
            }
            return fallback(c, r, nowNs, why, reason);
        }
        if (bestMatched < knobs.minMatchFraction() * n) {
            // A match this short saves little prefill, and where it pins a request its follow-ups stay: a conversation's
            // first turn that matches only the shared system prompt would take its whole conversation to whichever
            // engine first cached that prompt (replicas herd there together). It goes where the load is lowest.
            return spreadByLoad(c, r, nowNs, why, MissReason.WEAK_MATCH, n, bestMatched);
        }
        int best = -1;
        int ties = 0;
        if (soft) {
            double bestCost = Double.MAX_VALUE;
            for (int s = 0; s < slotCount; s++) {
                if (!slotEligible[s]) {
                    continue;
                }
                double cost = (n - weighted(s)) + knobs.lambda() * slotLoad[s];
                if (best < 0 || cost < bestCost || (cost == bestCost && slotLoad[s] < slotLoad[best])) {
                    bestCost = cost;
                    best = s;
                }
            }
        } else {
            // Relative bound with an absolute slack: at low load one request in flight must not count as "hot".
            cap = Math.max(knobs.loadCapFactor() * mean, mean + knobs.loadSlack());
            for (int s = 0; s < slotCount; s++) {
                if (!slotEligible[s] || slotLoad[s] + 1 > cap) {
                    continue;
                }
                if (best < 0 || weighted(s) > weighted(best) || (weighted(s) == weighted(best) && slotLoad[s] < slotLoad[best])) {
                    best = s;
                    ties = 1;
                } else if (weighted(s) == weighted(best) && slotLoad[s] == slotLoad[best] && tieWins(++ties)) {
                    best = s;
                }
            }
            if (best >= 0 && slotMatched[best] < Math.max(1, knobs.minMatchBlocks())) {
                // Every endpoint that holds the prefix is over the bound: spread the load instead.
                return fallback(c, r, nowNs, why, MissReason.OVER_LOAD_BOUND);
            }
        }
        if (best < 0) {
            return fallback(c, r, nowNs, why, MissReason.OVER_LOAD_BOUND);
        }
        stats.tier(r.decidedBy(Tier.KV_EXACT));
        stats.matched(slotMatched[best]);
        if (r.explain()) {
            explain(r, why, c, n, "longest cached prefix " + slotMatched[best] + "/" + n + " blocks (tier "
                + Holders.tierName(slotTier[best]) + ", weight " + knobs.tierWeights().of(slotTier[best]) + ")");
        }
        return take(c, r, best);
    }

    /**
     * A request no cached prefix pins (a weak match; with {@code kv.spread} other than least_loaded also no match):
     * the slot {@code kv.spread} picks, counted as a fallback with {@code reason}.
     */
    private EndpointState spreadByLoad(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why, MissReason reason,
                                       int n, int bestMatched) {
        int s = switch (spread) {
            case LEAST_LOADED -> leastLoadedSlot();
            case TWO_CHOICES -> twoChoicesSlot();
            case RECENT_WORK -> leastRecentWorkSlot(c, nowNs);
        };
        if (recentWork != null && s >= 0) {
            recentWork.routed(c[slotCand[s]].id(), n - slotMatched[s]);
        }
        missed = reason;
        stats.miss(reason);
        stats.tier(r.decidedBy(Tier.FALLBACK));
        if (r.explain()) {
            why.append("tier=fallback(").append(reason.label).append("); best match ").append(bestMatched)
                .append('/').append(n).append(" blocks");
            if (reason == MissReason.WEAK_MATCH) {
                why.append(" < min_match_fraction ").append(knobs.minMatchFraction());
            }
            why.append("; spread=").append(knobs.spread());
            appendScores(why, c);
            if (recentWork != null) {
                why.append("; recent_blocks=");
                for (int k = 0; k < slotCount; k++) {
                    slotName(why.append(k == 0 ? "" : ","), c, k).append(':').append(Math.round(slotRecent[k]));
                }
            }
        }
        return take(c, r, s);
    }

    /**
     * Power of two choices: two distinct eligible slots drawn at random, the less loaded one (then the longer weighted
     * match, then the first drawn). Replicas that all read the same stale loads would all take the same least loaded
     * endpoint; two random candidates de-correlate them, and the known result for stale load information
     * (Mitzenmacher, "How useful is old information?") is that the least loaded choice herds where two choices do not.
     */
    private int twoChoicesSlot() {
        int eligible = 0;
        for (int s = 0; s < slotCount; s++) {
            if (slotEligible[s]) {
                eligible++;
            }
        }
        if (eligible <= 2) {
            return leastLoadedSlot();
        }
        int i = (int) Long.remainderUnsigned(nextRandom(), eligible);
        int j = (int) Long.remainderUnsigned(nextRandom(), eligible - 1);
        if (j >= i) {
            j++;
        }
        int a = eligibleSlot(i);
        int b = eligibleSlot(j);
        if (slotLoad[b] < slotLoad[a] || (slotLoad[b] == slotLoad[a] && weighted(b) > weighted(a))) {
            return b;
        }
        return a;
    }

    /** The {@code ordinal}-th eligible slot (0-based). */
    private int eligibleSlot(int ordinal) {
        for (int s = 0; s < slotCount; s++) {
            if (slotEligible[s] && ordinal-- == 0) {
                return s;
            }
        }
        throw new IllegalStateException("fewer eligible slots than counted");
    }

    /** Recent new blocks of each slot's endpoint in the last recent_work decision (explain output). */
    private double[] slotRecent = new double[16];

    /**
     * Among the eligible slots at most one request above the least load, the one whose endpoint stored the fewest
     * blocks lately ({@link RecentWork}: every gateway's placements, through the engines' KV events, and this
     * gateway's own from the moment it sends them); then the lower load, the longer weighted match, and exact ties
     * drawn at random. The load is only a coarse gate: requests here live shorter than a scrape, so the in-flight
     * count at one instant says little about how many conversations an engine is home to, and the blocks it stored
     * in the last window say more (an engine whose conversation just ended stores less, whatever it runs right now).
     */
    private int leastRecentWorkSlot(EndpointState[] c, long nowNs) {
        if (slotRecent.length < slotCount) {
            slotRecent = new double[slotCand.length];
        }
        double min = Double.MAX_VALUE;
        for (int s = 0; s < slotCount; s++) {
            int id = c[slotCand[s]].id();
            // Compared in whole blocks, as explain output shows them: a residue of blocks long faded must not decide
            // over the load.
            slotRecent[s] = Math.rint(recentWork.update(id, index.blocksAdded(id), nowNs));
            if (slotEligible[s]) {
                min = Math.min(min, slotLoad[s]);
            }
        }
        int best = -1;
        int ties = 0;
        for (int s = 0; s < slotCount; s++) {
            if (!slotEligible[s] || slotLoad[s] > min + 1) {
                continue;
            }
            if (best < 0 || slotRecent[s] < slotRecent[best]
                || (slotRecent[s] == slotRecent[best] && (slotLoad[s] < slotLoad[best]
                    || (slotLoad[s] == slotLoad[best] && weighted(s) > weighted(best))))) {
                best = s;
                ties = 1;
            } else if (slotRecent[s] == slotRecent[best] && slotLoad[s] == slotLoad[best] && weighted(s) == weighted(best)
                && tieWins(++ties)) {
                best = s;
            }
        }
        return best;
    }

    /**
     * The eligible slot with the lowest load, then the longest weighted match; exact ties drawn at random (see
     * {@link #tieWins}).
     */
    private int leastLoadedSlot() {
        int best = -1;
        int ties = 0;
        for (int s = 0; s < slotCount; s++) {
            if (!slotEligible[s]) {
                continue;
            }
            if (best < 0 || slotLoad[s] < slotLoad[best] || (slotLoad[s] == slotLoad[best] && weighted(s) > weighted(best))) {
                best = s;
                ties = 1;
            } else if (slotLoad[s] == slotLoad[best] && weighted(s) == weighted(best) && tieWins(++ties)) {
                best = s;
            }
        }
        return best;
    }

    /**
     * Whether the {@code k}-th of {@code k} exactly equal candidates replaces the one kept so far (reservoir sampling:
     * each of them is kept with probability 1/k). Equal candidates are drawn at random rather than taken in the order
     * of the rule's endpoints: replicas of the gateway see the same index and nearly the same loads, and a fixed order
     * sends all of them to the same engine at once. Xorshift on a per-process seed ({@link #seedTies} in tests).
     */
    private boolean tieWins(int k) {
        return Long.remainderUnsigned(nextRandom(), k) == 0;
    }

    /** The next draw of the per-process xorshift (equal candidates, {@code kv.spread: two_choices}). */
    private long nextRandom() {
        long x = tieState;
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        tieState = x;
        return x;
    }

    /** Seeds the draw among equal candidates (tests: decisions repeatable under a seed). */
    void seedTies(long seed) {
        tieState = seed == 0 ? 0x9E3779B97F4A7C15L : seed;
    }

    /** The decision is slot {@code s}: its endpoint, pinned to its rank when it is one. */
    private EndpointState take(EndpointState[] c, RouteEvent r, int s) {
        chosenSlot = s;
        r.chosenRank = slotRank[s];
        return c[slotCand[s]];
    }

    /** A slot's match weighed by the memory tier it is in ({@code kv.tier_weights}). */
    private double weighted(int s) {
        return slotMatched[s] * knobs.tierWeights().of(slotTier[s]);
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
                Log.warn("rule '" + ruleName + "': " + watchdogStreak
                    + " consecutive KV lookups matched nothing while the engines hold blocks: check that block_size, "
                    + "hash_seed (PYTHONHASHSEED; 'vllm-none-hash' for a sha256_cbor vLLM started without it, or 'auto'), "
                    + "hash_algo, tokenizer and chat template match the engines (run the parity probe: ./kvgate ctl parity)");
            }
        }
    }

    private EndpointState fallback(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why, MissReason reason) {
        missed = reason;
        stats.miss(reason);
        stats.tier(r.decidedBy(Tier.FALLBACK));
        EndpointState ep = fallback.choose(c, r, nowNs, why);
        if (ep != null && rankHints && r.sendsDpRank && ep.ranks() > 1) {
            pinFallbackRank(c, ep);
            r.chosenRank = chosenSlot >= 0 ? slotRank[chosenSlot] : leastLoadedRank(ep);
        }
        if (ep != null && chosenSlot < 0 && lookedUp) {
            for (int s = 0; s < slotCount; s++) {
                if (c[slotCand[s]] == ep && slotRank[s] < 0) {
                    chosenSlot = s;
                }
            }
        }
        if (r.explain()) {
            why.append("tier=fallback(").append(reason.label).append(")");
            if (reason == MissReason.NO_MATCH || reason == MissReason.BELOW_MIN_MATCH || reason == MissReason.OVER_LOAD_BOUND) {
                appendScores(why, c);
            } else if (reason == MissReason.SEED_UNRESOLVED) {
                why.append("; hash_seed auto: the parity probe has not yet found the seed the engines hash with"
                    + " (see /admin/v1/inventory), so the rule is routed without KV scores");
            }
        }
        return ep;
    }

    /**
     * The fallback chose an endpoint whose ranks are scored separately: it takes the rank with the longest match
     * (weighted), then the least loaded one (the slots, when the lookup ran; otherwise {@link #leastLoadedRank}).
     */
    private void pinFallbackRank(EndpointState[] c, EndpointState ep) {
        if (!lookedUp) {
            return;
        }
        int best = -1;
        for (int s = 0; s < slotCount; s++) {
            if (c[slotCand[s]] != ep || slotRank[s] < 0) {
                continue;
            }
            if (best < 0 || weighted(s) > weighted(best) || (weighted(s) == weighted(best) && slotLoad[s] < slotLoad[best])) {
                best = s;
            }
        }
        chosenSlot = best;
    }

    private int leastLoadedRank(EndpointState ep) {
        int best = 0;
        double bestCost = Double.MAX_VALUE;
        for (int rk = 0; rk < ep.ranks(); rk++) {
            double cost = ep.rankLoad().cost(rk, tokenWeight);
            if (cost < bestCost) {
                bestCost = cost;
                best = rk;
            }
        }
        return best;
    }

    private void explain(RouteEvent r, StringBuilder why, EndpointState[] c, int n, String reason) {
        if (!r.explain()) {
            return;
        }
        why.append("tier=kv_exact; prompt_blocks=").append(n).append("; ").append(reason);
        appendScores(why, c);
    }

    /** {@code matched=} and {@code load=} per slot: {@code host:port} for an endpoint, {@code host:port#rank} for a rank. */
    private void appendScores(StringBuilder why, EndpointState[] c) {
        why.append("; matched=");
        for (int s = 0; s < slotCount; s++) {
            slotName(why.append(s == 0 ? "" : ","), c, s).append(':').append(slotMatched[s]);
            if (slotMatched[s] > 0) {
                why.append('@').append(Holders.tierName(slotTier[s]));
            }
        }
        why.append("; load=");
        for (int s = 0; s < slotCount; s++) {
            slotName(why.append(s == 0 ? "" : ","), c, s).append(':');
            EndpointState e = c[slotCand[s]];
            if (slotRank[s] < 0) {
                e.loadEstimate().explain(why);
            } else {
                e.rankLoad().explain(slotRank[s], why);
            }
        }
        if (tokenWeight > 0) {
            why.append("; prefill_token_weight=").append(tokenWeight);
        }
    }

    private StringBuilder slotName(StringBuilder why, EndpointState[] c, int s) {
        why.append(c[slotCand[s]].key());
        if (slotRank[s] >= 0) {
            why.append('#').append(slotRank[s]);
        }
        return why;
    }
}
