package io.kvgate.dataplane.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.LoadEstimate.LoadSource;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The load estimator alone, on a manual clock: this gateway's in-flight count, an engine reading plus what this
 * gateway did since it, staleness, Little's-law lifetime, the peers' part aged toward its mean, prefill charges, and
 * the per-rank estimate built on the same reading. No rule, policy or routing stage.
 */
class LoadEstimateTest {
    private static final long STALE_NS = TimeUnit.MILLISECONDS.toNanos(1000);
    private static final long SCRAPE_NS = TimeUnit.MILLISECONDS.toNanos(250);

    private final ManualClock clock = new ManualClock();
    private final LoadEstimate load = new LoadEstimate();

    private long now() {
        return clock.nanoTime();
    }

    /** A one-rank reading taken now with this estimate's totals as its baselines (what the scraper does). */
    private EngineReading readingNow(int running, int waiting) {
        return new EngineReading(now(), load.routedTotal(), load.completedTotal(), new int[] {running}, new int[] {waiting},
            new double[] {Double.NaN});
    }

    private void publishAndRefresh(int running, int waiting) {
        load.publishReading(readingNow(running, waiting));
        load.refresh(now(), STALE_NS);
    }

    @Test
    void withoutAReadingTheEstimateIsThisGatewaysInFlightCount() {
        load.refresh(now(), STALE_NS);
        assertEquals(LoadSource.UNKNOWN, load.loadSource());
        load.onRouted(now(), 0);
        load.onRouted(now(), 0);
        load.onRouted(now(), 0);
        assertEquals(3, load.load());
        load.onCompleted(2, now());
        assertEquals(1, load.load());
        assertEquals(1, load.outstanding());
        load.onCompleted(5, now());
        assertEquals(0, load.outstanding(), "more completions than requests never go below zero");
        assertEquals(3, load.routedTotal());
        assertEquals(7, load.completedTotal());
    }

    @Test
    void aFreshReadingCountsTheEngineAndThisGatewaysRequestsSinceThenButNeverLessThanItsOwn() {
        load.onRouted(now(), 0); // one of ours in flight when the scrape is sent
        publishAndRefresh(5, 2);
        assertEquals(LoadSource.ENGINE, load.loadSource());
        assertEquals(7, load.load(), "engine running + waiting, ours included");
        load.onRouted(now(), 0);
        load.onRouted(now(), 0);
        assertEquals(9, load.load(), "+2 routed since the scrape");
        load.onCompleted(1, now());
        assertEquals(8, load.load(), "-1 finished since");

        publishAndRefresh(0, 0); // the engine says idle, yet two of ours are in flight
        assertEquals(2, load.load(), "never below this gateway's own in-flight count");
    }

    @Test
    void anOldReadingFallsBackToTheOwnCountAndAWithdrawnOneIsUnknown() {
        publishAndRefresh(9, 0);
        assertEquals(9, load.load());
        clock.advance(STALE_NS + 1, TimeUnit.NANOSECONDS);
        load.refresh(now(), STALE_NS);
        assertEquals(LoadSource.STALE, load.loadSource());
        assertNull(load.freshReading());
        assertEquals(0, load.load());
        load.publishReading(null); // scraping turned off
        load.refresh(now(), STALE_NS);
        assertEquals(LoadSource.UNKNOWN, load.loadSource());
        assertNull(load.lastReading());
    }

    /** {@code n} requests of ours, one after another, each in flight {@code lifeNs}, a scrape after each. */
    private void ownRequestsLive(int n, long lifeNs, int peers) {
        publishAndRefresh(peers, 0);
        for (int i = 0; i < n; i++) {
            load.onRouted(now(), 0);
            clock.advance(lifeNs, TimeUnit.NANOSECONDS);
            load.onCompleted(1, now());
            clock.advance(SCRAPE_NS - lifeNs, TimeUnit.NANOSECONDS);
            publishAndRefresh(peers, 0);
        }
    }

    @Test
    void theLifetimeIsLittlesLawOverThisGatewaysRequestsOnceEnoughFinished() {
        long life = TimeUnit.MILLISECONDS.toNanos(100);
        ownRequestsLive(3, life, 0);
        assertEquals(-1, load.lifetimeNs(), "3 completions: below the minimum, unknown");
        assertEquals(-1, load.lifetimeSeconds());
        assertEquals(1.0, load.sampleWeight(), "unknown lifetime: the sample counts in full");
        ownRequestsLive(5, life, 0);
        assertEquals(life, load.lifetimeNs(), 1, "in-flight time over completions");
        assertEquals(0.1, load.lifetimeSeconds(), 1e-9, "published for metrics at the fold");
    }

    @Test
    void thePeersSampleAgesTowardTheirMeanAtTheLifetime() {
        long life = TimeUnit.MILLISECONDS.toNanos(100);
        ownRequestsLive(8, life, 0); // the other gateways had nothing here so far: their mean is 0
        clock.advance(SCRAPE_NS, TimeUnit.NANOSECONDS);
        publishAndRefresh(4, 0); // a burst of theirs at this scrape
        double keep = Math.exp(-(double) SCRAPE_NS / LoadEstimate.PEER_MEAN_WINDOW_NS);
        double mean = (1 - keep) * 4;
        assertEquals(4, load.load(), "a reading just taken counts in full");
        clock.advance(life, TimeUnit.NANOSECONDS);
        load.refresh(now(), STALE_NS);
        assertEquals(Math.exp(-1), load.sampleWeight(), 1e-9);
        assertEquals(mean + (4 - mean) * Math.exp(-1), load.estimate(), 1e-6);
        load.onRouted(now(), 0);
        assertEquals(1 + mean + (4 - mean) * Math.exp(-1), load.estimate(), 1e-6, "our own part stays exact");
        load.refresh(now(), STALE_NS, false); // load.peer_decay: none
        assertEquals(1.0, load.sampleWeight());
        assertEquals(5, load.load(), "the sample in full: their 4 and our 1 since");
    }

    @Test
    void prefillChargesAddToTheCostUntilHandedBackOrNothingIsInFlight() {
        load.onRouted(now(), 100);
        load.onRouted(now(), 50);
        assertEquals(150, load.prefillTokens());
        assertEquals(2 + 0.01 * 150, load.cost(0.01), 1e-9);
        assertEquals(2, load.cost(0), 1e-9);
        load.onPrefillDone(100);
        assertEquals(50, load.prefillTokens());
        load.onPrefillDone(500);
        assertEquals(0, load.prefillTokens(), "never negative");
        load.onRouted(now(), 30);
        load.onCompleted(3, now());
        assertEquals(0, load.prefillTokens(), "nothing in flight, nothing in prefill");
    }

    @Test
    void aRanksEstimateUsesTheEndpointsReadingAndItsOwnPinnedRequests() {
        RankLoad ranks = load.ranks;
        load.onRouted(now(), 0);
        ranks.onRouted(1, 40);
        EngineReading r = new EngineReading(now(), load.routedTotal(), load.completedTotal(),
            new long[] {0, ranks.routedTotal(1)}, new long[] {0, ranks.completedTotal(1)},
            new int[] {3, 5}, new int[] {0, 1}, new double[] {Double.NaN, Double.NaN});
        load.publishReading(r);
        load.refresh(now(), STALE_NS);
        assertSame(r, load.freshReading());
        assertEquals(3, ranks.load(0));
        assertEquals(6, ranks.load(1), "rank 1's running + waiting, our pinned request included");
        ranks.onRouted(1, 0);
        assertEquals(7, ranks.load(1), "+1 pinned since the scrape");
        assertEquals(7 + 0.5 * 40, ranks.cost(1, 0.5), 1e-9);
        ranks.onCompleted(1, 2);
        assertEquals(0, ranks.outstanding(1));
        assertEquals(5, ranks.load(1), "-2 finished since");
        assertEquals(7, ranks.cost(1, 0.5) + 2, 1e-9, "no pinned request in flight: the prefill charge is gone");
    }
}
