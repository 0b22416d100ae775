package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.decideCharging;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.event;
import static io.kvgate.dataplane.route.RouteFixtures.finish;
import static io.kvgate.dataplane.route.RouteFixtures.reading;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.LoadEstimate.LoadSource;
import io.kvgate.dataplane.route.RuleStats.MissReason;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The load estimate (engine-reported running + waiting plus this gateway's requests since the scrape, or the local
 * in-flight count when the reading is stale) in every load-aware policy and in admission control, and the
 * token-aware term of kv_exact (uncached prompt tokens still in prefill). Policies are driven directly on an injected
 * clock; the readings are what the scraper would publish.
 */
class EngineLoadRoutingTest {
    private static final long STALE_NS = TimeUnit.MILLISECONDS.toNanos(2_000);
    private static final int BLOCK = 16;
    private final ManualClock clock = new ManualClock();
    private BlockIndex index;

    @AfterEach
    void closeIndex() {
        if (index != null) {
            index.close();
        }
    }

    private Rule rule(String settings, int n) {
        return table(config("", RouteFixtures.rule("r", settings, endpoints(n))), null, clock).ruleByName("r");
    }

    /** Publishes a reading of {@code ep} taken now and lets the routing stage take it up. */
    private void engineSays(EndpointState ep, int running, int waiting) {
        ep.loadEstimate().publishReading(reading(ep, clock.nanoTime(), running, waiting));
        ep.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
    }

    private static String explain(Rule r) {
        RouteEvent e = RouteEvent.of(r, Role.ANY, null, null, SessionKeys.NONE, true, true);
        StringBuilder why = new StringBuilder();
        r.policy().choose(r.candidates(Role.ANY), e, 0, why);
        return why.toString();
    }

    @Test
    void leastOutstandingAvoidsAnEngineBusyWithOtherGatewaysTraffic() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        engineSays(a, 5, 2); // another gateway's requests: this one has none in flight there
        engineSays(b, 1, 0);
        assertEquals(7, a.load());
        assertEquals(0, a.outstanding());
        for (int i = 0; i < 6; i++) {
            assertSame(b, decide(r, event(r), clock.nanoTime()), "request " + i + ": b is lighter until it reaches 7");
        }
        assertEquals(7, b.load(), "1 reported + 6 routed by this gateway since the scrape");
        String why = explain(r);
        assertTrue(why.startsWith("tier=least_outstanding; load="), why);
        assertTrue(why.contains(a.key() + ":7(engine=7 local=+0)"), why);
        assertTrue(why.contains(b.key() + ":7(engine=1 local=+6)"), why);
    }

    @Test
    void requestsSinceTheScrapeCountUntilTheyFinishAndTheOwnInFlightCountIsTheFloor() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        long now = clock.nanoTime();
        a.onRouted(now);
        a.onRouted(now);
        a.onRouted(now);
        engineSays(a, 1, 0); // the engine has not seen two of this gateway's three requests yet
        assertEquals(3, a.load(), "never below this gateway's own requests in flight");
        finish(a, Outcome.SUCCESS, now);
        assertEquals(2, a.load());
        a.onRouted(now); // a burst after the scrape is visible at once
        a.onRouted(now);
        assertEquals(4, a.load());
        finish(a, Outcome.SUCCESS, now);
        finish(a, Outcome.RELEASED, now);
        assertEquals(2, a.outstanding());
        assertEquals(2, a.load(), "1 reported + 2 routed - 3 finished since, floored at the 2 in flight");
        engineSays(a, 9, 3);
        assertEquals(12, a.load(), "a new scrape: the engine's numbers, nothing since");
    }

    @Test
    void aStaleReadingFallsBackToTheLocalCountOnTheInjectedClock() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        assertEquals(LoadSource.UNKNOWN, a.loadEstimate().loadSource(), "never scraped");
        engineSays(a, 10, 0);
        assertEquals(LoadSource.ENGINE, a.loadEstimate().loadSource());
        assertSame(b, decide(r, event(r), clock.nanoTime()));
        assertSame(b, decide(r, event(r), clock.nanoTime()));

        clock.advance(2_000, TimeUnit.MILLISECONDS); // exactly load.stale_ms old: still fresh
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        b.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(LoadSource.ENGINE, a.loadEstimate().loadSource());
        assertEquals(10, a.load());

        clock.advance(1, TimeUnit.MILLISECONDS);
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(LoadSource.STALE, a.loadEstimate().loadSource());
        assertEquals(0, a.load(), "stale: this gateway's own in-flight count (none)");
        assertEquals(2, b.load());
        assertSame(a, decide(r, event(r), clock.nanoTime()), "0 vs 2 in flight: the stale engine is judged on local counts");
        String why = explain(r);
        assertTrue(why.contains(a.key() + ":1(engine=stale local=1)"), why);
        assertTrue(why.contains(b.key() + ":2(engine=unknown local=2)"), why);

        a.loadEstimate().publishReading(reading(a, clock.nanoTime(), 0, 0)); // a reading without the request counts is no reading
        a.loadEstimate().publishReading(new EngineReading(clock.nanoTime(), 0, 0, new int[] {-1}, new int[] {-1}, new double[] {0.5}));
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(LoadSource.UNKNOWN, a.loadEstimate().loadSource());
    }

    @Test
    void theChwblBoundIsAppliedToTheEstimate() {
        Rule r = rule("    policy: chwbl\n    fallback: round_robin\n    block_size: 16\n"
            + "    chwbl: {prefix_blocks: 1, virtual_nodes: 64, load_factor: 0.25}\n", 4);
        int[] tokens = new int[32];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = 7 + i;
        }
        RouteEvent e = RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, true);
        EndpointState owner = r.policy().choose(r.candidates(Role.ANY), e, 0, new StringBuilder());
        engineSays(owner, 20, 4); // busy with another gateway's requests: far over (1 + 0.25) x mean
        StringBuilder why = new StringBuilder();
        RouteEvent x = RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, true, true);
        EndpointState chosen = r.policy().choose(r.candidates(Role.ANY), x, 0, why);
        assertFalse(chosen == owner, "the bound walks past the busy owner");
        assertTrue(why.toString().contains("owner=" + owner.key() + " (over bound or unavailable: walked clockwise)"), why.toString());
        assertTrue(why.toString().contains("load=0(engine=unknown local=0)"), why.toString());
    }

    // ---- kv_exact ---------------------------------------------------------------------------------------------

    private Rule kvRule(String kvKnobs) {
        index = new BlockIndex(new BlockIndexConfig(4096, 8, 2, 8192, 1024));
        String[] eps = new String[2];
        for (int i = 0; i < 2; i++) {
            eps[i] = "url: http://127.0.0.1:" + (20000 + i) + "\n        kv_events: tcp://127.0.0.1:" + (30000 + i);
        }
        return table(config("", RouteFixtures.rule("kv", "    policy: kv_exact\n    fallback: least_outstanding\n"
            + "    block_size: 16\n    hash_seed: \"0\"\n    hash_algo: sha256_cbor\n    kv: {speculative_ttl_ms: 0, "
            + kvKnobs + "}\n", eps)), index, clock).ruleByName("kv");
    }

    private static int[] prompt(int blocks, int seed) {
        int[] t = new int[blocks * BLOCK];
        for (int i = 0; i < t.length; i++) {
            t[i] = seed * 100_003 + i;
        }
        return t;
    }

    private void cache(Rule r, EndpointState ep, int[] tokens, int blocks) {
        long[] keys = new long[tokens.length / BLOCK];
        new RuleHasher(r.config(), 0).hash(tokens, null, keys);
        for (int b = 0; b < blocks; b++) {
            index.stored(ep.id(), 0, keys[b]);
        }
    }

    private static RouteEvent request(Rule r, int[] tokens) {
        return RouteEvent.of(r, Role.ANY, tokens, null, SessionKeys.NONE, false, false).tracksPrefill(true);
    }

    @Test
    void kvExactLeavesTheOnlyHolderOfThePrefixWhenItsEngineIsOverTheBound() {
        Rule r = kvRule("mode: bounded, load_cap_factor: 1.5, load_slack: 2");
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        int[] p = prompt(8, 1);
        cache(r, a, p, 8);
        assertSame(a, decide(r, request(r, p), clock.nanoTime()), "idle: the holder of the prefix");
        finish(a, Outcome.SUCCESS, clock.nanoTime());
        engineSays(a, 10, 0); // another gateway loaded it: mean (10 + 0 + 1) / 2, cap max(8.25, 7.5)
        assertSame(b, decide(r, request(r, p), clock.nanoTime()), "over the bound: spread instead");
        assertEquals(1, r.stats().missCount(MissReason.OVER_LOAD_BOUND));
        engineSays(a, 3, 0);
        assertSame(a, decide(r, request(r, p), clock.nanoTime()), "within the bound again: the prefix wins");
    }

    @Test
    void kvExactSoftCostWeighsTheEstimate() {
        Rule r = kvRule("mode: soft, lambda: 1.0");
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        int[] p = prompt(8, 2);
        cache(r, a, p, 4); // a saves 4 blocks: worth 4 requests of load at lambda 1
        engineSays(a, 3, 0);
        assertSame(a, decide(r, request(r, p), clock.nanoTime()), "8 - 4 + 3 < 8 + 0");
        finish(a, Outcome.SUCCESS, clock.nanoTime());
        engineSays(a, 5, 0);
        assertSame(b, decide(r, request(r, p), clock.nanoTime()), "8 - 4 + 5 > 8 + 0");
    }

    @Test
    void tokenAwareCostPrefersTheEndpointWithFewerUncachedTokensInPrefill() {
        Rule r = kvRule("mode: bounded, prefill_token_weight: 0.001");
        int[] shared = prompt(4, 3);
        cache(r, r.endpoints().get(0), shared, 4);
        cache(r, r.endpoints().get(1), shared, 4);
        // One long prompt that nobody holds: 50,000 uncached tokens in prefill wherever it goes.
        int[] huge = new int[50_000];
        for (int i = 0; i < huge.length; i++) {
            huge[i] = 900_000 + i;
        }
        RouteEvent big = request(r, huge);
        EndpointState a = decideCharging(r, big, clock.nanoTime());
        EndpointState b = a == r.endpoints().get(0) ? r.endpoints().get(1) : r.endpoints().get(0);
        assertEquals(50_000, big.uncachedTokens(), "nothing of it is cached anywhere");
        assertEquals(50_000, a.loadEstimate().prefillTokens());
        assertEquals(1, a.load(), "by request count the two are nearly equal");
        // Four short requests, each fully cached on both: the request counts alone would send the next one to b, then
        // alternate; the 50,000 tokens in prefill count 50 requests, so all of them go to b.
        for (int i = 0; i < 4; i++) {
            RouteEvent small = request(r, shared);
            assertSame(b, decideCharging(r, small, clock.nanoTime()), "short request " + i);
            assertEquals(0, small.uncachedTokens(), "fully cached: nothing to prefill");
        }
        StringBuilder why = new StringBuilder();
        RouteEvent x = RouteEvent.of(r, Role.ANY, shared, null, SessionKeys.NONE, true, true);
        r.policy().choose(r.candidates(Role.ANY), x, 0, why);
        assertTrue(why.toString().contains(a.key() + ":1(engine=unknown local=1 prefill_tokens=50000)"), why.toString());
        assertTrue(why.toString().contains("prefill_token_weight=0.001"), why.toString());
        // The first bytes of the long request came back: its prefill is over.
        a.loadEstimate().onPrefillDone(50_000);
        assertEquals(0, a.loadEstimate().prefillTokens());
        assertSame(a, decideCharging(r, request(r, shared), clock.nanoTime()), "1 vs 4 requests: a again");
    }

    @Test
    void withoutTheTokenWeightOnlyRequestsCountAndAPartialMatchChargesTheRest() {
        Rule r = kvRule("mode: bounded, prefill_token_weight: 0");
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        int[] p = prompt(10, 4);
        cache(r, a, p, 6);
        cache(r, b, p, 6);
        RouteEvent first = request(r, p);
        EndpointState got = decideCharging(r, first, clock.nanoTime());
        assertEquals(10 * BLOCK - 6 * BLOCK, first.uncachedTokens(), "the prompt minus its 6 matched blocks");
        assertEquals(64, got.loadEstimate().prefillTokens());
        EndpointState other = got == a ? b : a;
        assertSame(other, decideCharging(r, request(r, p), clock.nanoTime()), "1 vs 0 requests: the tokens weigh nothing");

        assertEquals(64, other.loadEstimate().prefillTokens());
        RouteEvent untracked = RouteEvent.of(r, Role.ANY, p, null, SessionKeys.NONE, false, false);
        decideCharging(r, untracked, clock.nanoTime());
        assertEquals(64, untracked.uncachedTokens(), "the policy found them...");
        assertEquals(128, a.loadEstimate().prefillTokens() + b.loadEstimate().prefillTokens(), "...but a request that cannot report its prefill's end is charged nothing");
    }

    @Test
    void chargedTokensReturnThroughThePortAndNeverOutliveTheRequests() {
        Rule r = kvRule("mode: bounded");
        EndpointState a = r.endpoints().get(0);
        RouterPort port = new RouterPort(null, Runnable::run, 16);
        EndpointState[] byId = new EndpointState[a.id() + 2];
        byId[a.id()] = a;
        long now = clock.nanoTime();
        a.onRouted(now, 1_000);
        a.onRouted(now, 500);
        assertEquals(1_500, a.loadEstimate().prefillTokens());
        port.prefillDone(a, 1_000); // the first request's first bytes
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(500, a.loadEstimate().prefillTokens());
        port.complete(a, Outcome.SUCCESS);
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(500, a.loadEstimate().prefillTokens(), "one request still in flight");
        port.complete(a, Outcome.FAILURE); // ended without handing its charge back
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(0, a.outstanding());
        assertEquals(0, a.loadEstimate().prefillTokens(), "nothing in flight, nothing in prefill");
        port.prefillDone(a, 500); // a late hand-back cannot go below zero
        port.applyCompletions(byId, 3, 1, now);
        assertEquals(0, a.loadEstimate().prefillTokens());
    }

    // ---- the other gateways' part of a reading, as it ages (load.peer_decay) ----------------------------------

    private static final long SCRAPE_NS = TimeUnit.MILLISECONDS.toNanos(250);

    /**
     * Eight scrape intervals in which this gateway sends each of {@code eps} one request that lives {@code lifeMs},
     * each interval ending with a reading of every endpoint in which the engine counts {@code peers[i]} requests of
     * other gateways: the lifetime is then known (Little's law: {@code lifeMs}) and the peers' means have their samples.
     */
    private void ownRequestsLive(long lifeMs, int[] peers, EndpointState... eps) {
        for (int e = 0; e < eps.length; e++) {
            engineSays(eps[e], peers[e], 0);
        }
        for (int i = 0; i < 8; i++) {
            for (EndpointState ep : eps) {
                ep.onRouted(clock.nanoTime());
            }
            clock.advance(lifeMs, TimeUnit.MILLISECONDS);
            for (EndpointState ep : eps) {
                finish(ep, Outcome.SUCCESS, clock.nanoTime());
            }
            clock.advance(SCRAPE_NS - TimeUnit.MILLISECONDS.toNanos(lifeMs), TimeUnit.NANOSECONDS);
            for (int e = 0; e < eps.length; e++) {
                engineSays(eps[e], peers[e], 0);
            }
        }
        clock.advance(SCRAPE_NS, TimeUnit.NANOSECONDS); // the next scrape is due
    }

    /** The weight the peers' mean keeps of itself from one scrape to the next. */
    private static final double KEEP = Math.exp(-(double) SCRAPE_NS / LoadEstimate.PEER_MEAN_WINDOW_NS);

    @Test
    void withoutAKnownLifetimeTheSampleCountsInFull() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState b = r.endpoints().get(1);
        engineSays(b, 0, 0);
        b.onRouted(clock.nanoTime());
        clock.advance(100, TimeUnit.MILLISECONDS);
        engineSays(b, 5, 0); // this gateway's 1 and 4 of other gateways'
        clock.advance(200, TimeUnit.MILLISECONDS);
        b.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(-1, b.loadEstimate().lifetimeNs(), 1e-9, "no completion yet: the lifetime is unknown");
        assertEquals(1.0, b.loadEstimate().sampleWeight(), "unknown lifetime: the sample counts in full, as before");
        assertEquals(5, b.load());
    }

    @Test
    void thePeersSampleRevertsToTheirMeanAsTheReadingAgesOverTheMeasuredLifetime() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        ownRequestsLive(100, new int[] {0}, a); // no other gateway's requests so far: their mean is 0
        assertEquals(TimeUnit.MILLISECONDS.toNanos(100), a.loadEstimate().lifetimeNs(), 1, "Little's law over this gateway's requests");
        engineSays(a, 4, 0); // a burst of other gateways' requests at the scrape
        double mean = (1 - KEEP) * 4;
        assertEquals(1.0, a.loadEstimate().sampleWeight(), "a reading just taken counts in full");
        assertEquals(4, a.load());

        clock.advance(100, TimeUnit.MILLISECONDS); // one lifetime later
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(Math.exp(-1), a.loadEstimate().sampleWeight(), 1e-9);
        double expected = mean + (4 - mean) * Math.exp(-1);
        assertEquals(expected, a.loadEstimate().estimate(), 1e-6, "the peers' mean plus the aged part of their sample");
        assertEquals(Math.round(expected), a.load());
        String why = explain(r);
        assertTrue(why.contains(a.key() + ":" + Math.round(expected) + "(engine=4 local=+0 peers=4->1.77 mean=0.47 weight=0.37)"), why);

        clock.advance(200, TimeUnit.MILLISECONDS); // three lifetimes: the burst has most likely finished
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(mean + (4 - mean) * Math.exp(-3), a.loadEstimate().estimate(), 1e-6);
        assertEquals(1, a.load());
        a.onRouted(clock.nanoTime());
        a.onRouted(clock.nanoTime());
        assertEquals(2 + mean + (4 - mean) * Math.exp(-3), a.loadEstimate().estimate(), 1e-6, "this gateway's own part stays exact");

        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS, false); // load.peer_decay: none
        assertEquals(1.0, a.loadEstimate().sampleWeight());
        assertEquals(6, a.load(), "the sample in full until stale: 4 + this gateway's 2 since");
    }

    @Test
    void requestsThatLiveLongerThanTheScrapeIntervalKeepTheSampleNearlyInFull() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        ownRequestsLive(240, new int[] {0}, a);
        assertEquals(TimeUnit.MILLISECONDS.toNanos(240), a.loadEstimate().lifetimeNs(), 1);
        engineSays(a, 30, 0);
        clock.advance(24, TimeUnit.MILLISECONDS);
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(Math.exp(-0.1), a.loadEstimate().sampleWeight(), 1e-9);
        assertTrue(a.loadEstimate().estimate() > 27, "a tenth of a lifetime old: still mostly the sample, " + a.loadEstimate().estimate());
    }

    @Test
    void anEngineLastinglyBusyWithAnotherGatewaysTrafficStaysAvoidedWhenItsReadingsAge() {
        Rule r = rule("    policy: least_outstanding\n", 2);
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        ownRequestsLive(50, new int[] {6, 0}, a, b); // every scrape sees 6 of another gateway's requests on a
        engineSays(a, 6, 0);
        engineSays(b, 0, 0);
        clock.advance(240, TimeUnit.MILLISECONDS); // almost five lifetimes: the sample itself says little now
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        b.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertTrue(a.loadEstimate().sampleWeight() < 0.01, "weight " + a.loadEstimate().sampleWeight());
        assertEquals(6, a.load(), "but the peers' mean is 6: their load is lasting");
        for (int i = 0; i < 6; i++) {
            assertSame(b, decide(r, event(r), clock.nanoTime()), "request " + i);
        }
    }

    @Test
    void kvExactStaysOnTheHolderWhenAnotherGatewaysBurstHasAgedOut() {
        Rule r = kvRule("mode: bounded, load_cap_factor: 1.5, load_slack: 2");
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        int[] p = prompt(8, 5);
        cache(r, a, p, 8);
        ownRequestsLive(50, new int[] {0, 0}, a, b);
        engineSays(a, 10, 0); // another gateway's burst at the scrape: over the bound (cap max(8.25, 7.5))
        engineSays(b, 0, 0);
        assertSame(b, decide(r, request(r, p), clock.nanoTime()), "a fresh burst: spread");
        finish(b, Outcome.SUCCESS, clock.nanoTime());
        clock.advance(200, TimeUnit.MILLISECONDS); // four lifetimes: the burst's requests have finished by now
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        b.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertEquals(1, a.load(), "the burst's 10 aged to ~0.2, on a mean of ~1.2");
        assertSame(a, decide(r, request(r, p), clock.nanoTime()), "the prefix wins again before the next scrape");

        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS, false); // load.peer_decay: none, the behaviour before
        b.loadEstimate().refresh(clock.nanoTime(), STALE_NS, false);
        assertSame(b, decide(r, request(r, p), clock.nanoTime()), "the 200 ms-old burst still counted in full: walks");
    }

    // ---- admission control ------------------------------------------------------------------------------------

    @Test
    void admissionJudgesTheEngineQueueOnFreshReadingsOnly() {
        Rule r = rule("    policy: least_outstanding\n    admission: {max_waiting: 3, max_kv_usage: 0.9}\n", 1);
        EndpointState a = r.endpoints().get(0);
        Admission adm = new Admission("r", r.config().admission());
        adm.engineLoad = EngineLoad.SCRAPED;
        assertTrue(adm.admits(a, PriorityClass.STANDARD), "no reading: unknown never saturates");
        engineSays(a, 8, 4);
        assertFalse(adm.admits(a, PriorityClass.STANDARD), "4 waiting > max_waiting 3");
        a.loadEstimate().publishReading(new EngineReading(clock.nanoTime(), 0, 0, new int[] {8}, new int[] {0}, new double[] {0.95}));
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertFalse(adm.admits(a, PriorityClass.STANDARD), "KV usage 0.95 > 0.9");
        clock.advance(3, TimeUnit.SECONDS);
        a.loadEstimate().refresh(clock.nanoTime(), STALE_NS);
        assertTrue(adm.admits(a, PriorityClass.STANDARD), "stale: unknown again");
    }
}
