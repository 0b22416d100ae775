package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * kv_exact over endpoints with several DP ranks: with {@code kv.dp_rank_hint} each rank is scored on its own
 * inventory and load and the request is pinned to the chosen rank; without the hint (or for a request that cannot
 * carry it) the endpoint's ranks are scored as their union, as before.
 */
class DpRankRoutingTest {
    private static final int BLOCK = 16;
    private static final long STALE_NS = TimeUnit.SECONDS.toNanos(2);
    private final ManualClock clock = new ManualClock();
    private BlockIndex index;

    @AfterEach
    void closeIndex() {
        if (index != null) {
            index.close();
        }
    }

    /** Endpoint 0 has two DP ranks, endpoint 1 one. */
    private Rule rule(String kvKnobs) {
        index = new BlockIndex(new BlockIndexConfig(4096, 8, 2, 8192, 1024));
        return table(config("", RouteFixtures.rule("kv", "    policy: kv_exact\n    fallback: least_outstanding\n"
            + "    block_size: 16\n    hash_seed: \"0\"\n    kv: {cold_readmit_every: 0, " + kvKnobs + "}\n",
            "url: http://127.0.0.1:20000\n        kv_events: tcp://127.0.0.1:30000\n        dp_ranks: 2",
            "url: http://127.0.0.1:20001\n        kv_events: tcp://127.0.0.1:30010")), index, clock).ruleByName("kv");
    }

    private static int[] prompt(int blocks, int seed) {
        int[] t = new int[blocks * BLOCK];
        for (int i = 0; i < t.length; i++) {
            t[i] = seed * 100_003 + i;
        }
        return t;
    }

    private void cache(Rule r, EndpointState ep, int rank, int[] tokens, int blocks) {
        long[] keys = new long[tokens.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(tokens, null, keys);
        for (int b = 0; b < blocks; b++) {
            index.stored(ep.id(), rank, keys[b]);
        }
    }

    private static RouteEvent request(Rule r, int[] tokens, boolean explain) {
        return RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, explain, false).sendsDpRank(true)
            .tracksPrefill(true);
    }

    /** Decides as the routing stage does: charge and pin. */
    private static EndpointState decide(Rule r, RouteEvent e, StringBuilder why, long now) {
        e.uncachedTokens = 0;
        e.chosenRank = -1;
        EndpointState ep = r.policy().choose(r.candidates(Role.ANY), e, now, why);
        ep.onRouted(now, e.uncachedTokens, e.sendsDpRank ? e.chosenRank : -1);
        return ep;
    }

    @Test
    void theRankHoldingThePrefixIsChosenAndPinned() {
        Rule r = rule("speculative_ttl_ms: 0");
        EndpointState dp = r.endpoints().get(0);
        EndpointState single = r.endpoints().get(1);
        int[] p = prompt(8, 1);
        cache(r, dp, 1, p, 8);
        cache(r, dp, 0, p, 2);
        cache(r, single, 0, p, 5);
        StringBuilder why = new StringBuilder();
        RouteEvent e = request(r, p, true);
        assertSame(dp, decide(r, e, why, clock.nanoTime()));
        assertEquals(1, e.chosenRank(), "rank 1 holds all 8 blocks, rank 0 only 2");
        assertEquals(0, e.uncachedTokens());
        assertEquals(1, dp.rankLoad().outstanding(1));
        assertEquals(0, dp.rankLoad().outstanding(0));
        String w = why.toString();
        assertTrue(w.contains("matched=127.0.0.1:20000#0:2@GPU,127.0.0.1:20000#1:8@GPU,127.0.0.1:20001:5@GPU"), w);
        assertTrue(w.contains("127.0.0.1:20000#1:1(engine=unknown local=1)") || w.contains("127.0.0.1:20000#1:0(engine=unknown local=0)"), w);
        assertTrue(w.endsWith("; dp_rank=1"), w);

        // A single-rank endpoint is one slot, as before, and takes no hint.
        int[] q = prompt(8, 2);
        cache(r, dp, 0, q, 2);
        cache(r, single, 0, q, 4);
        RouteEvent e2 = request(r, q, false);
        assertSame(single, decide(r, e2, new StringBuilder(), clock.nanoTime()));
        assertEquals(-1, e2.chosenRank(), "a single-rank endpoint takes no hint");
    }

    /** A reading of {@code ep}'s two ranks taken now, taken up by the routing stage. */
    private void engineSays(EndpointState ep, int rank0, int rank1) {
        long now = clock.nanoTime();
        ep.loadEstimate().publishReading(new EngineReading(now, ep.loadEstimate().routedTotal(), ep.loadEstimate().completedTotal(), new long[0], new long[0],
            new int[] {rank0, rank1}, new int[] {0, 0}, new double[] {0.1, 0.1}));
        ep.loadEstimate().refresh(now, STALE_NS);
    }

    @Test
    void aRanksPeersPartAgesOverTheMeasuredLifetimeAsTheEndpointsDoes() {
        Rule r = rule("speculative_ttl_ms: 0, mode: bounded, load_cap_factor: 1.5, load_slack: 2");
        EndpointState dp = r.endpoints().get(0);
        engineSays(dp, 0, 0);
        for (int i = 0; i < 8; i++) { // this gateway's requests live 50 ms; scrapes every 250 ms see nobody else's
            dp.onRouted(clock.nanoTime());
            clock.advance(50, TimeUnit.MILLISECONDS);
            RouteFixtures.finish(dp, Outcome.SUCCESS, clock.nanoTime());
            clock.advance(200, TimeUnit.MILLISECONDS);
            engineSays(dp, 0, 0);
        }
        clock.advance(250, TimeUnit.MILLISECONDS);
        engineSays(dp, 8, 0); // another gateway's burst on rank 0 at the scrape
        assertEquals(8, dp.rankLoad().load(0), "a reading just taken counts in full");
        clock.advance(150, TimeUnit.MILLISECONDS); // three lifetimes
        dp.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        double keep = Math.exp(-250.0 / 2_000);
        double mean = (1 - keep) * 8;
        assertEquals(Math.round(mean + (8 - mean) * Math.exp(-3)), dp.rankLoad().load(0));
        assertEquals(mean + (8 - mean) * Math.exp(-3), dp.rankLoad().cost(0, 0), 1e-6, "the rank's mean plus its aged sample");
        assertEquals(0, dp.rankLoad().load(1));
        dp.loadEstimate().refresh(clock.nanoTime(), STALE_NS, false); // load.peer_decay: none
        assertEquals(8, dp.rankLoad().load(0));
    }

    @Test
    void eachRankIsJudgedOnItsOwnLoad() {
        Rule r = rule("speculative_ttl_ms: 0, mode: bounded, load_cap_factor: 1.5, load_slack: 2");
        EndpointState dp = r.endpoints().get(0);
        int[] p = prompt(8, 3);
        cache(r, dp, 0, p, 8);
        cache(r, dp, 1, p, 8);
        long now = clock.nanoTime();
        // The engine says rank 0 runs 9 requests (another gateway's), rank 1 none.
        dp.loadEstimate().publishReading(new EngineReading(now, dp.loadEstimate().routedTotal(), dp.loadEstimate().completedTotal(), new long[0], new long[0],
            new int[] {9, 0}, new int[] {0, 0}, new double[] {0.5, 0.1}));
        dp.loadEstimate().refresh(now, STALE_NS);
        assertEquals(9, dp.rankLoad().load(0));
        assertEquals(0, dp.rankLoad().load(1));
        assertEquals(9, dp.load(), "the endpoint as a whole");
        RouteEvent e = request(r, p, false);
        assertSame(dp, decide(r, e, new StringBuilder(), now));
        assertEquals(1, e.chosenRank());
        assertEquals(1, dp.rankLoad().load(1), "the pinned request counts on its rank at once");
        assertEquals(10, dp.load());
    }

    @Test
    void withoutTheHintOrForARequestThatCannotCarryItTheRanksAreOneEndpoint() {
        Rule off = rule("speculative_ttl_ms: 0, dp_rank_hint: false");
        EndpointState dp = off.endpoints().get(0);
        int[] p = prompt(8, 4);
        cache(off, dp, 1, p, 8);
        StringBuilder why = new StringBuilder();
        RouteEvent e = request(off, p, true);
        assertSame(dp, decide(off, e, why, clock.nanoTime()));
        assertEquals(-1, e.chosenRank(), "kv.dp_rank_hint: false scores the union and pins nothing");
        assertTrue(why.toString().contains("matched=127.0.0.1:20000:8@GPU,"), why.toString());
        index.close();
        index = null;

        Rule on = rule("speculative_ttl_ms: 0");
        EndpointState dp2 = on.endpoints().get(0);
        cache(on, dp2, 1, p, 8);
        RouteEvent pd = RouteEvent.of(on, Role.ANY, p, null, SessionKeys.NONE, false, false);
        assertSame(dp2, decide(on, pd, new StringBuilder(), clock.nanoTime()));
        assertEquals(-1, pd.chosenRank(), "a request that cannot send the hint (a P/D prefill leg) is scored on the union");
    }

    @Test
    void aFallbackDecisionIsPinnedToTheLeastLoadedRank() {
        Rule r = rule("speculative_ttl_ms: 0");
        EndpointState dp = r.endpoints().get(0);
        EndpointState single = r.endpoints().get(1);
        long now = clock.nanoTime();
        single.onRouted(now); // one request in flight there: least_outstanding prefers the dp endpoint
        single.onRouted(now);
        dp.onRouted(now, 0, 0); // one pinned to rank 0
        RouteEvent e = request(r, prompt(4, 5), false);
        assertSame(dp, decide(r, e, new StringBuilder(), now));
        assertEquals(1, r.stats().missCount(MissReason.NO_MATCH));
        assertEquals(1, e.chosenRank(), "nothing cached anywhere: the idle rank");
        assertEquals(64, e.uncachedTokens());
    }

    @Test
    void aPromptFamilyFollowsItsSpeculativeBlocksToTheRankItWasPinnedTo() {
        Rule r = rule("speculative_ttl_ms: 2000");
        EndpointState dp = r.endpoints().get(0);
        EndpointState single = r.endpoints().get(1);
        long now = clock.nanoTime();
        single.onRouted(now);
        single.onRouted(now);
        dp.onRouted(now, 0, 1);
        int[] p = prompt(8, 6);
        RouteEvent first = request(r, p, false);
        assertSame(dp, decide(r, first, new StringBuilder(), now));
        assertEquals(0, first.chosenRank(), "a miss: the idle rank 0");
        // No KV event yet: only the speculative overlay knows rank 0 is computing these blocks.
        StringBuilder why = new StringBuilder();
        RouteEvent sibling = request(r, p, true);
        assertSame(dp, decide(r, sibling, why, now));
        assertEquals(0, sibling.chosenRank(), why.toString());
        assertTrue(why.toString().contains("tier=kv_exact"), why.toString());
        assertTrue(why.toString().contains("127.0.0.1:20000#0:8@GPU,127.0.0.1:20000#1:0"), why.toString());

        clock.advance(2_001, TimeUnit.MILLISECONDS); // the speculation expired with the overlay's TTL
        RouteEvent late = request(r, p, false);
        decide(r, late, new StringBuilder(), clock.nanoTime());
        assertEquals(2, r.stats().missCount(MissReason.NO_MATCH), "expired with the overlay: a miss again");
    }

    @Test
    void pinnedCompletionsAndPrefillReturnPerRankThroughThePort() {
        Rule r = rule("speculative_ttl_ms: 0");
        EndpointState dp = r.endpoints().get(0);
        RouterPort port = new RouterPort(null, Runnable::run, 16);
        EndpointState[] byId = new EndpointState[dp.id() + 1];
        byId[dp.id()] = dp;
        long now = clock.nanoTime();
        dp.onRouted(now, 300, 1);
        dp.onRouted(now, 200, 0);
        dp.onRouted(now, 0, -1); // placed by the engine
        assertEquals(1, dp.rankLoad().outstanding(1));
        port.prefillDone(dp, 300, 1);
        port.complete(dp, Outcome.SUCCESS, 1);
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(0, dp.rankLoad().outstanding(1));
        assertEquals(1, dp.rankLoad().outstanding(0));
        assertEquals(2, dp.outstanding());
        assertEquals(200, dp.loadEstimate().prefillTokens());
        assertEquals(1, dp.rankLoad().completedTotal(1));
        assertEquals(0, dp.rankLoad().completedTotal(0));
        port.complete(dp, Outcome.RELEASED, -1);
        port.complete(dp, Outcome.FAILURE, 0); // ended without handing its prefill back
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(0, dp.outstanding());
        assertEquals(0, dp.rankLoad().outstanding(0));
        assertEquals(0, dp.loadEstimate().prefillTokens());
        assertEquals(0.0, dp.rankLoad().cost(0, 1.0), "nothing pinned in flight: no prefill left on the rank");
    }
}
