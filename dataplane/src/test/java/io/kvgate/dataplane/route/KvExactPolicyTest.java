package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.dataplane.route.RuleStats.Tier;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * kv_exact against a real block index filled with the keys the engines would publish: bounded and soft modes,
 * fallbacks, cold re-admission, the zero-hit watchdog, the speculative overlay, and the H4 hashing bound.
 */
class KvExactPolicyTest {
    private static final int BLOCK = 16;
    private final ManualClock clock = new ManualClock();
    private BlockIndex index;

    @AfterEach
    void closeIndex() {
        if (index != null) {
            index.close();
        }
    }

    private Rule rule(String kvKnobs, int maxPromptBlocks) {
        index = new BlockIndex(new BlockIndexConfig(4096, 8, 2, maxPromptBlocks, 1024));
        return ruleOn(index, kvKnobs);
    }

    /** The rule over an existing index (a reload builds the rule again over the same one). */
    private Rule ruleOn(BlockIndex index, String kvKnobs) {
        String[] eps = new String[3];
        for (int i = 0; i < 3; i++) {
            eps[i] = "url: http://127.0.0.1:" + (20000 + i) + "\n        kv_events: tcp://127.0.0.1:" + (30000 + i);
        }
        return table(config("", RouteFixtures.rule("kv", "    policy: kv_exact\n    fallback: least_outstanding\n"
            + "    block_size: 16\n    hash_seed: \"0\"\n    hash_algo: sha256_cbor\n    kv: {" + kvKnobs + "}\n", eps)), index, clock)
            .ruleByName("kv");
    }

    private Rule rule(String kvKnobs) {
        return rule("speculative_ttl_ms: 0, " + kvKnobs, 8192);
    }

    private static int[] prompt(int blocks, int seed) {
        int[] t = new int[blocks * BLOCK];
        for (int i = 0; i < t.length; i++) {
            t[i] = seed * 100_003 + i;
        }
        return t;
    }

    /** Publishes the first {@code blocks} block keys of {@code tokens} as cached on {@code ep}. */
    private void cache(Rule r, EndpointState ep, int[] tokens, int blocks) {
        long[] keys = new long[tokens.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(tokens, null, keys);
        for (int b = 0; b < blocks; b++) {
            index.stored(ep.id(), 0, keys[b]);
        }
    }

    private static RouteEvent request(Rule r, int[] tokens) {
        return RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, false);
    }

    private EndpointState ep(Rule r, int i) {
        return r.endpoints().get(i);
    }

    @Test
    void theLongestCachedPrefixWins() {
        Rule r = rule("mode: bounded");
        int[] p = prompt(8, 1);
        cache(r, ep(r, 1), p, 6);
        cache(r, ep(r, 2), p, 2);
        assertSame(ep(r, 1), decide(r, request(r, p), clock.nanoTime()));
        assertEquals(1, r.stats().tierCount(Tier.KV_EXACT));
        assertEquals(6, r.stats().matchedBlocks());
        assertEquals(8, r.stats().promptBlocks());
    }

    /**
     * LoRA under kv_exact: an engine's adapter blocks are keyed with the adapter name (vLLM extra keys), so a request
     * for the adapter matches them and a base-model request with the same tokens does not (and vice versa).
     */
    @Test
    void adapterRequestsMatchAdapterBlocksAndBaseRequestsNeverDo() {
        Rule r = rule("mode: bounded, min_match_fraction: 0"); // the base request's 3 of 8 blocks must count
        int[] p = prompt(8, 21);
        long[] adapterKeys = new long[8];
        new RuleHasher(r.config(), 0).hash(p, null, "sql-lora", adapterKeys, 8);
        for (long k : adapterKeys) {
            index.stored(ep(r, 1).id(), 0, k);
        }
        cache(r, ep(r, 2), p, 3);

        RouteEvent adapter = request(r, p);
        adapter.lora = "sql-lora";
        assertSame(ep(r, 1), decide(r, adapter, clock.nanoTime()));
        assertEquals(8, r.stats().matchedBlocks());

        assertSame(ep(r, 2), decide(r, request(r, p), clock.nanoTime()));
        assertEquals(8 + 3, r.stats().matchedBlocks(), "the base request matched its 3 base blocks, none of the adapter's");

        RouteEvent other = request(r, p);
        other.lora = "other-lora";
        decide(r, other, clock.nanoTime());
        assertEquals(8 + 3, r.stats().matchedBlocks(), "another adapter matches neither");
    }

    /** Publishes the first {@code blocks} block keys of {@code tokens} as cached on {@code ep} in {@code tier}. */
    private void cacheInTier(Rule r, EndpointState ep, int[] tokens, int blocks, int tier) {
        long[] keys = new long[tokens.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(tokens, null, keys);
        for (int b = 0; b < blocks; b++) {
            index.stored(ep.id(), 0, keys[b], tier);
        }
    }

    @Test
    void memoryTiersWeighTheMatchByTheTierOfItsLastBlock() {
        Rule r = rule("mode: bounded");
        int[] p = prompt(8, 11);
        cacheInTier(r, ep(r, 1), p, 8, io.kvgate.index.block.Holders.TIER_DISK); // 8 x 0.5 = 4
        cacheInTier(r, ep(r, 2), p, 6, io.kvgate.index.block.Holders.TIER_GPU);  // 6 x 1.0 = 6
        assertSame(ep(r, 2), decide(r, request(r, p), clock.nanoTime()), "6 blocks on GPU beat 8 on disk");

        index.close(); // each rule() builds its own index
        Rule cheapDisk = rule("mode: bounded, tier_weights: {DISK: 0.9}");
        cacheInTier(cheapDisk, ep(cheapDisk, 1), p, 8, io.kvgate.index.block.Holders.TIER_DISK); // 7.2
        cacheInTier(cheapDisk, ep(cheapDisk, 2), p, 6, io.kvgate.index.block.Holders.TIER_GPU);  // 6
        assertSame(ep(cheapDisk, 1), decide(cheapDisk, request(cheapDisk, p), clock.nanoTime()));

        index.close();
        Rule soft = rule("mode: soft, lambda: 0.0");
        cacheInTier(soft, ep(soft, 1), p, 8, io.kvgate.index.block.Holders.TIER_CPU); // 8 x 0.8 = 6.4
        cacheInTier(soft, ep(soft, 2), p, 6, io.kvgate.index.block.Holders.TIER_GPU); // 6
        assertSame(ep(soft, 1), decide(soft, request(soft, p), clock.nanoTime()), "cost 8 - 6.4 < 8 - 6");
    }

    @Test
    void anEndpointOverTheLoadBoundIsPassedOverForTheNextBestPrefix() {
        Rule r = rule("mode: bounded, load_cap_factor: 1.5, load_slack: 2");
        int[] p = prompt(8, 2);
        cache(r, ep(r, 1), p, 6);
        cache(r, ep(r, 2), p, 2);
        for (int i = 0; i < 10; i++) {
            ep(r, 1).onRouted(clock.nanoTime());
        }
        // mean (10 + 1) / 3 = 3.67; cap = max(1.5 × 3.67, 3.67 + 2) = 5.67 < 11
        assertSame(ep(r, 2), decide(r, request(r, p), clock.nanoTime()));
    }

    @Test
    void whenOnlyOverloadedEndpointsHoldThePrefixTheLoadIsSpread() {
        Rule r = rule("mode: bounded");
        int[] p = prompt(8, 3);
        cache(r, ep(r, 1), p, 8);
        for (int i = 0; i < 10; i++) {
            ep(r, 1).onRouted(clock.nanoTime());
        }
        EndpointState chosen = decide(r, request(r, p), clock.nanoTime());
        assertNotSame(ep(r, 1), chosen);
        assertEquals(1, r.stats().missCount(MissReason.OVER_LOAD_BOUND));
    }

    @Test
    void softModeTradesMissedBlocksAgainstLoad() {
        Rule r = rule("mode: soft, lambda: 1.0");
        int[] p = prompt(8, 4);
        cache(r, ep(r, 0), p, 4);
        cache(r, ep(r, 1), p, 2);
        for (int i = 0; i < 3; i++) {
            ep(r, 0).onRouted(clock.nanoTime()); // cost (8-4) + 3 = 7
        }
        ep(r, 1).onRouted(clock.nanoTime()); // cost (8-2) + 1 = 7: tie, broken by the lower load
        ep(r, 2).onRouted(clock.nanoTime());
        ep(r, 2).onRouted(clock.nanoTime()); // cost 8 + 2 = 10
        assertSame(ep(r, 1), decide(r, request(r, p), clock.nanoTime()));
        // now ep1 has load 2: cost 8; ep0 (7) is cheapest
        assertSame(ep(r, 0), decide(r, request(r, p), clock.nanoTime()));
    }

    @Test
    void aMatchBelowMinMatchFractionDoesNotPinTheRequest() {
        Rule r = rule("mode: bounded, min_match_fraction: 0.5");
        int[] p = prompt(10, 11);
        cache(r, ep(r, 0), p, 4); // the shared system prompt of a conversation's first turn: 4 of 10 blocks
        ep(r, 0).onRouted(clock.nanoTime());
        ep(r, 1).onRouted(clock.nanoTime());
        StringBuilder why = new StringBuilder();
        RouteEvent e = RouteEvent.of(r, Role.ANY, p, null, SessionKeys.NONE, true, false);
        assertSame(ep(r, 2), r.policy().choose(r.candidates(Role.ANY), e, clock.nanoTime(), why),
            "4/10 < 0.5: the least loaded endpoint, not the holder");
        assertEquals(1, r.stats().missCount(MissReason.WEAK_MATCH));
        assertTrue(why.toString().startsWith("tier=fallback(weak_match); best match 4/10 blocks"), why.toString());

        cache(r, ep(r, 0), p, 5); // 5/10: pins again
        assertSame(ep(r, 0), decide(r, request(r, p), clock.nanoTime()));
        assertEquals(1, r.stats().tierCount(Tier.KV_EXACT));
    }

    @Test
    void aWeakMatchTakesTheHolderAmongTheLeastLoaded() {
        Rule r = rule("mode: bounded, min_match_fraction: 0.5");
        int[] p = prompt(10, 12);
        cache(r, ep(r, 1), p, 4);
        assertSame(ep(r, 1), decide(r, request(r, p), clock.nanoTime()), "all idle: the 4 blocks still count");
    }

    @Test
    void equalCandidatesAreDrawnAtRandomAndRepeatablyUnderASeed() {
        int[] p = prompt(8, 13);
        int[][] picks = new int[2][60];
        for (int run = 0; run < 2; run++) {
            Rule r = rule("mode: bounded, load_cap_factor: 100");
            ((KvExactPolicy) r.policy()).seedTies(35);
            for (int i = 0; i < 3; i++) {
                cache(r, ep(r, i), p, 8);
            }
            for (int d = 0; d < picks[run].length; d++) {
                EndpointState chosen = decide(r, request(r, p), clock.nanoTime());
                picks[run][d] = r.endpoints().indexOf(chosen);
                chosen.onCompleted(1, 0, 0, 5, 1, clock.nanoTime()); // loads stay equal
            }
            index.close();
        }
        index = null;
        assertTrue(java.util.Arrays.equals(picks[0], picks[1]), "the same seed draws the same endpoints");
        int[] counts = new int[3];
        for (int x : picks[0]) {
            counts[x]++;
        }
        // Each endpoint is drawn with probability 1/3: 60 draws put fewer than 8 on one with probability < 0.1 %.
        for (int c : counts) {
            assertTrue(c >= 8, "an endpoint drawn " + c + " of 60 times: " + java.util.Arrays.toString(counts));
        }
    }

    @Test
    void fallbacksAreCountedByReason() {
        Rule r = rule("mode: bounded, min_match_blocks: 3");
        cache(r, ep(r, 0), prompt(4, 9), 4); // a non-empty inventory
        decide(r, request(r, null), clock.nanoTime());
        decide(r, request(r, new int[BLOCK - 1]), clock.nanoTime());
        decide(r, request(r, prompt(4, 5)), clock.nanoTime());
        int[] p = prompt(4, 6);
        cache(r, ep(r, 2), p, 2);
        decide(r, request(r, p), clock.nanoTime());
        assertEquals(1, r.stats().missCount(MissReason.NO_TOKENS));
        assertEquals(1, r.stats().missCount(MissReason.SHORT_PROMPT));
        assertEquals(1, r.stats().missCount(MissReason.NO_MATCH));
        assertEquals(1, r.stats().missCount(MissReason.BELOW_MIN_MATCH));
        assertEquals(4, r.stats().tierCount(Tier.FALLBACK));
    }

    @Test
    void withoutAnIndexEveryDecisionFallsBack() {
        Rule r = table(config("", RouteFixtures.rule("kv", "    policy: kv_exact\n    fallback: round_robin\n",
            RouteFixtures.endpoints(2))), null, clock).ruleByName("kv");
        assertSame(r.endpoints().get(0), decide(r, request(r, prompt(4, 1)), clock.nanoTime()));
        assertSame(r.endpoints().get(1), decide(r, request(r, prompt(4, 1)), clock.nanoTime()));
        assertEquals(2, r.stats().missCount(MissReason.NO_KV_EVENTS));
    }

    @Test
    void aColdEndpointIsReadmittedEveryNthDecision() {
        Rule r = rule("mode: bounded, cold_readmit_every: 3");
        int[] p = prompt(8, 7);
        cache(r, ep(r, 0), p, 8);
        cache(r, ep(r, 1), p, 8);
        // ep2 holds nothing: cold
        EndpointState first = decide(r, request(r, p), clock.nanoTime());
        assertTrue(first == ep(r, 0) || first == ep(r, 1), "an equal prefix on ep0 and ep1, equal loads: either");
        assertSame(first == ep(r, 0) ? ep(r, 1) : ep(r, 0), decide(r, request(r, p), clock.nanoTime()),
            "equal prefixes: the less loaded");
        assertSame(ep(r, 2), decide(r, request(r, p), clock.nanoTime()), "the third decision re-admits the cold endpoint");
        assertEquals(1, r.stats().tierCount(Tier.KV_COLD_READMIT));
        assertNotSame(ep(r, 2), decide(r, request(r, p), clock.nanoTime()));
    }

    @Test
    void theZeroHitWatchdogFiresOnAStreakOfMissesAgainstANonEmptyInventory() {
        Rule r = rule("mode: bounded, watchdog_zero_hit_streak: 3");
        decide(r, request(r, prompt(4, 1)), clock.nanoTime());
        decide(r, request(r, prompt(4, 2)), clock.nanoTime());
        decide(r, request(r, prompt(4, 3)), clock.nanoTime());
        assertEquals(0, r.stats().watchdogFirings(), "an empty inventory explains the misses");
        int[] cached = prompt(4, 10);
        cache(r, ep(r, 0), cached, 4);
        decide(r, request(r, prompt(4, 11)), clock.nanoTime());
        decide(r, request(r, prompt(4, 12)), clock.nanoTime());
        decide(r, request(r, cached), clock.nanoTime()); // a hit resets the streak
        decide(r, request(r, prompt(4, 13)), clock.nanoTime());
        decide(r, request(r, prompt(4, 14)), clock.nanoTime());
        assertEquals(0, r.stats().watchdogFirings());
        decide(r, request(r, prompt(4, 15)), clock.nanoTime());
        assertEquals(1, r.stats().watchdogFirings());
    }

    @Test
    void aRoutedPromptCountsAsCachedOnItsEndpointUntilTheSpeculativeTtlPasses() {
        Rule r = rule("mode: bounded, speculative_ttl_ms: 1000", 8192);
        cache(r, ep(r, 0), prompt(2, 99), 2); // inventory not empty
        int[] p = prompt(8, 8);
        EndpointState first = decide(r, request(r, p), clock.nanoTime());
        assertEquals(1, r.stats().missCount(MissReason.NO_MATCH));
        assertSame(first, decide(r, request(r, p), clock.nanoTime()), "the overlay remembers where the prefix went");
        assertEquals(1, r.stats().tierCount(Tier.KV_EXACT));
        clock.advance(1001, TimeUnit.MILLISECONDS);
        decide(r, request(r, p), clock.nanoTime());
        assertEquals(2, r.stats().missCount(MissReason.NO_MATCH), "after the TTL only the index counts");
    }

    /**
     * Routing-quality accounting (issue #35 item 1): the decision writes reachable (the longest holder's prefix),
     * predicted (the chosen endpoint's) and, when they differ, why the holder was passed over.
     */
    @Test
    void theDecisionAccountsReachableAndPredictedTokensAndWhyTheHolderWasPassedOver() {
        Rule r = rule("mode: bounded, load_cap_factor: 1.5, load_slack: 2, min_match_fraction: 0"); // ep2's 2 of 8 blocks must pin
        int[] p = prompt(8, 31);
        cache(r, ep(r, 1), p, 6);
        cache(r, ep(r, 2), p, 2);
        RouteEvent best = request(r, p);
        assertSame(ep(r, 1), decide(r, best, clock.nanoTime()));
        assertEquals(6 * BLOCK, best.reachableTokens);
        assertEquals(6 * BLOCK, best.predictedTokens);
        assertEquals(6 * BLOCK, best.confirmedTokens, "no overlay: all of it from KV events");
        assertNull(best.routeLoss, "nothing was passed over");
        for (int i = 0; i < 10; i++) {
            ep(r, 1).onRouted(clock.nanoTime());
        }
        RouteEvent bounded = request(r, p);
        assertSame(ep(r, 2), decide(r, bounded, clock.nanoTime()));
        assertEquals(6 * BLOCK, bounded.reachableTokens, "the holder over the bound still counts as reachable");
        assertEquals(2 * BLOCK, bounded.predictedTokens);
        assertSame(io.kvgate.dataplane.quality.LossCause.LOAD_BOUND, bounded.routeLoss);

        ep(r, 1).drained(true);
        RouteEvent drained = request(r, p);
        assertSame(ep(r, 2), decide(r, drained, clock.nanoTime()));
        assertSame(io.kvgate.dataplane.quality.LossCause.DRAINING, drained.routeLoss);
        ep(r, 1).drained(false);

        RouteEvent retried = request(r, p).tried(ep(r, 1));
        decide(r, retried, clock.nanoTime());
        assertSame(io.kvgate.dataplane.quality.LossCause.RETRY, retried.routeLoss);
    }

    @Test
    void theAccountingSaysWhenNoLookupRanAndWhenNothingCouldBeHeld() {
        Rule r = rule("mode: bounded, min_match_blocks: 3");
        int[] p = prompt(4, 32);
        cache(r, ep(r, 0), p, 2);
        ep(r, 0).onRouted(clock.nanoTime()); // the fallback (least_outstanding) then goes elsewhere
        RouteEvent below = request(r, p);
        assertNotSame(ep(r, 0), decide(r, below, clock.nanoTime()));
        assertEquals(2 * BLOCK, below.reachableTokens);
        assertEquals(0, below.predictedTokens);
        assertSame(io.kvgate.dataplane.quality.LossCause.MIN_MATCH, below.routeLoss);
        RouteEvent noTokens = request(r, null);
        decide(r, noTokens, clock.nanoTime());
        assertEquals(-1, noTokens.reachableTokens, "no lookup: unknown");
        assertEquals(-1, noTokens.predictedTokens);
        RouteEvent tooShort = request(r, new int[BLOCK - 1]);
        decide(r, tooShort, clock.nanoTime());
        assertEquals(0, tooShort.reachableTokens, "less than a block: no endpoint can hold any of it");
        assertEquals(0, tooShort.predictedTokens);
    }

    @Test
    void blocksPredictedFromTheSpeculativeOverlayAloneAreNotConfirmed() {
        Rule r = rule("mode: bounded, speculative_ttl_ms: 1000", 8192);
        cache(r, ep(r, 0), prompt(2, 99), 2);
        int[] p = prompt(8, 33);
        EndpointState first = decide(r, request(r, p), clock.nanoTime());
        cache(r, first, p, 3); // KV events for the first 3 blocks arrived; the rest only routed
        RouteEvent again = request(r, p);
        assertSame(first, decide(r, again, clock.nanoTime()));
        assertEquals(8 * BLOCK, again.predictedTokens);
        assertEquals(3 * BLOCK, again.confirmedTokens);
        assertEquals(8 * BLOCK, again.reachableTokens);
    }

    /**
     * Regression for reliability review H4: a prompt far longer than the index's lookup limit used to be hashed in
     * full on the routing thread (4M tokens ≈ 0.4–0.9 s while every rule waited). Only the blocks the lookup uses are
     * hashed now, and the decision is the same as for the truncated prompt.
     */
    @Test
    void neverHashesMoreBlocksThanTheLookupUses() {
        Rule r = rule("speculative_ttl_ms: 0", 64);
        int[] huge = prompt(64 * 200, 1); // 12,800 blocks, 204,800 tokens
        cache(r, ep(r, 2), java.util.Arrays.copyOf(huge, 64 * BLOCK), 64);
        assertSame(ep(r, 2), decide(r, request(r, huge), clock.nanoTime()));
        KvExactPolicy p = (KvExactPolicy) r.policy();
        assertEquals(64, p.lastHashedBlocks());
        assertEquals(64, r.stats().promptBlocks());
        assertEquals(64, r.stats().matchedBlocks());
        assertTrue(r.stats().tierCount(Tier.KV_EXACT) == 1);
    }

    /**
     * kv.spread: recent_work. A request no cached prefix pins goes, among the endpoints less than one request above
     * the least load, to the one that came to hold the fewest blocks lately: blocks stored by other gateways'
     * requests (here: published straight into the index) count, and they decay on the injected clock.
     */
    @Test
    void recentWorkPlacesAnUnpinnedRequestWhereTheFewestBlocksLandedLately() {
        Rule r = rule("mode: bounded, spread: recent_work");
        decide(r, request(r, prompt(4, 40)), clock.nanoTime()).onCompleted(1, 0, 0, 5, 1, clock.nanoTime()); // watch starts
        clock.advance(1000, TimeUnit.SECONDS); // what that request sent has faded
        cache(r, ep(r, 0), prompt(6, 41), 6); // other replicas' conversations landed on ep0 and ep1
        cache(r, ep(r, 1), prompt(3, 42), 3);
        clock.advance(10, TimeUnit.MILLISECONDS);
        StringBuilder why = new StringBuilder();
        RouteEvent e = RouteEvent.of(r, Role.ANY, prompt(8, 43), null, SessionKeys.NONE, true, false);
        EndpointState first = r.policy().choose(r.candidates(Role.ANY), e, clock.nanoTime(), why);
        assertSame(ep(r, 2), first, why.toString());
        assertEquals(2, r.stats().missCount(MissReason.NO_MATCH), "the first request and this one");
        assertTrue(why.toString().startsWith("tier=fallback(no_match)"), why.toString());
        assertTrue(why.toString().contains("; spread=recent_work"), why.toString());
        assertTrue(why.toString().contains("recent_blocks=127.0.0.1:20000:6,127.0.0.1:20001:3,127.0.0.1:20002:0"),
            why.toString());
        first.onRouted(clock.nanoTime());
        // ep2's 8 blocks count from the moment they were sent (before its KV events): the next one goes to ep1 (3).
        assertSame(ep(r, 1), decide(r, request(r, prompt(8, 44)), clock.nanoTime()));

        // A weak match (the shared system prompt: 4 of 10 blocks) is placed the same way.
        ep(r, 1).onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        int[] turn = prompt(10, 45);
        cache(r, ep(r, 1), turn, 4); // confirms 4 of the 8 sent to ep1: 3 + 8 there, ep0 6, ep2 8
        assertSame(ep(r, 0), decide(r, request(r, turn), clock.nanoTime()));
        assertEquals(1, r.stats().missCount(MissReason.WEAK_MATCH));
    }

    /**
     * Issue #35, three gateways: a replica's first unpinned request comes after the other replicas placed theirs. Their
     * blocks landed after this gateway started and are recent work, though this policy had not decided anything yet
     * (it used to start counting at its first decision, and took the engines the others had just filled for idle).
     */
    @Test
    void recentWorkCountsWhatOtherReplicasPlacedBeforeThisGatewaysFirstDecision() {
        for (int seed = 1; seed <= 12; seed++) {
            Rule r = rule("mode: bounded, spread: recent_work");
            ((KvExactPolicy) r.policy()).seedTies(seed);
            cache(r, ep(r, 0), prompt(10, 80), 10);
            cache(r, ep(r, 1), prompt(10, 81), 10);
            clock.advance(5, TimeUnit.MILLISECONDS);
            assertSame(ep(r, 2), decide(r, request(r, prompt(8, 82)), clock.nanoTime()), "seed " + seed);
            index.close();
        }
        index = null;
    }

    /** A reload (the rule built again, same index and window) keeps the recent work placed before it. */
    @Test
    void recentWorkOutlivesAReload() {
        for (int seed = 1; seed <= 12; seed++) {
            Rule before = rule("mode: bounded, spread: recent_work");
            cache(before, ep(before, 0), prompt(10, 90), 10);
            cache(before, ep(before, 1), prompt(10, 91), 10);
            clock.advance(5, TimeUnit.MILLISECONDS);
            assertSame(ep(before, 2), decide(before, request(before, prompt(16, 92)), clock.nanoTime()));
            Rule after = ruleOn(index, "speculative_ttl_ms: 0, mode: bounded, spread: recent_work");
            after.policy().carryOver(before.policy());
            ((KvExactPolicy) after.policy()).seedTies(seed);
            EndpointState chosen = decide(after, request(after, prompt(8, 93)), clock.nanoTime());
            assertNotSame(ep(after, 2), chosen, "seed " + seed + ": the 16 blocks sent to ep2 before the reload count");
            index.close();
        }
        index = null;
    }

    @Test
    void recentWorkFadesWithinSecondsAndThenTheLoadDecides() {
        Rule r = rule("mode: bounded, spread: recent_work");
        ((KvExactPolicy) r.policy()).seedTies(7);
        decide(r, request(r, prompt(4, 50)), clock.nanoTime()).onCompleted(1, 0, 0, 5, 1, clock.nanoTime());
        clock.advance(1000, TimeUnit.SECONDS); // what the first request sent has faded
        cache(r, ep(r, 1), prompt(40, 51), 40);
        clock.advance(1, TimeUnit.MILLISECONDS);
        ep(r, 0).onRouted(clock.nanoTime());
        ep(r, 0).onRouted(clock.nanoTime());
        assertSame(ep(r, 2), decide(r, request(r, prompt(8, 52)), clock.nanoTime()),
            "ep0 two requests above the least load, ep1 busy lately");
        clock.advance(1000, TimeUnit.SECONDS); // every recent block has faded: the lower load decides (ep1 0, ep2 1)
        assertSame(ep(r, 1), decide(r, request(r, prompt(8, 53)), clock.nanoTime()));
    }

    /**
     * kv.spread: two_choices. Two distinct endpoints drawn at random, the less loaded taken: the most loaded of three
     * is never taken, the other two are, and a seed repeats the draws.
     */
    @Test
    void twoChoicesNeverTakesTheMostLoadedAndRepeatsUnderASeed() {
        int[][] picks = new int[2][60];
        for (int run = 0; run < 2; run++) {
            Rule r = rule("mode: bounded, spread: two_choices");
            ((KvExactPolicy) r.policy()).seedTies(35);
            ep(r, 1).onRouted(clock.nanoTime());
            ep(r, 2).onRouted(clock.nanoTime());
            ep(r, 2).onRouted(clock.nanoTime());
            for (int d = 0; d < picks[run].length; d++) {
                StringBuilder why = new StringBuilder();
                RouteEvent e = RouteEvent.of(r, Role.ANY, prompt(8, 60 + d), null, SessionKeys.NONE, true, false);
                EndpointState chosen = r.policy().choose(r.candidates(Role.ANY), e, clock.nanoTime(), why);
                assertTrue(why.toString().contains("; spread=two_choices"), why.toString());
                picks[run][d] = r.endpoints().indexOf(chosen);
            }
            index.close();
        }
        index = null;
        assertTrue(java.util.Arrays.equals(picks[0], picks[1]), "the same seed draws the same endpoints");
        int[] counts = new int[3];
        for (int x : picks[0]) {
            counts[x]++;
        }
        assertEquals(0, counts[2], java.util.Arrays.toString(counts));
        // ep1 wins only when the draw is {ep1, ep2}: a third of the time; fewer than 8 of 60 has probability < 1 %.
        assertTrue(counts[1] >= 8 && counts[0] >= 30, java.util.Arrays.toString(counts));
    }

    @Test
    void leastLoadedSpreadLeavesAnUnmatchedRequestToTheFallbackPolicy() {
        Rule r = rule("mode: bounded");
        StringBuilder why = new StringBuilder();
        RouteEvent e = RouteEvent.of(r, Role.ANY, prompt(8, 70), null, SessionKeys.NONE, true, false);
        r.policy().choose(r.candidates(Role.ANY), e, clock.nanoTime(), why);
        assertTrue(why.toString().contains("tier=fallback(no_match)"), why.toString());
        assertTrue(!why.toString().contains("spread="), why.toString());
    }
}
