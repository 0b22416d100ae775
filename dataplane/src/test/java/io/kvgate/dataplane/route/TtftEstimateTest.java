package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.event;
import static io.kvgate.dataplane.route.RouteFixtures.finish;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The per-endpoint TTFT estimate (outlier avoidance, {@code load.ttft_aware}) on a manual clock: measurements, lower
 * bounds, the fleet's lower median, the fading excess, the load factor, and what least_outstanding and chwbl make of
 * it; the measurements reach it through the event loop's {@link RouterPort} counters.
 */
class TtftEstimateTest {
    private static final long MS = 1_000_000L;
    private final ManualClock clock = new ManualClock();

    private RouteTable table(String load, String policy, int endpoints) {
        return RouteFixtures.table(config(load, RouteFixtures.rule("r", "    policy: " + policy + "\n", endpoints(endpoints))),
            null, clock);
    }

    /** Every endpoint of {@code r} measured at {@code ttftMs[i]} (one sample each, now). */
    private void measure(Rule r, long... ttftMs) {
        for (int i = 0; i < ttftMs.length; i++) {
            r.endpoints().get(i).ttft().onMeasured(ttftMs[i] * MS, 1, clock.nanoTime());
        }
    }

    @Test
    void measurementsAverageWithTheWeightOfTheirCount_lowerBoundsOnlyRaiseIt() {
        TtftEstimate t = new TtftEstimate();
        assertTrue(Double.isNaN(t.averageNs()), "unmeasured");
        t.onMeasured(100 * MS, 1, 0);
        assertEquals(100 * MS, t.averageNs(), 1, "the first measurement is the average");
        t.onMeasured(400 * MS, 2, 0); // a batch of two, mean 200 ms
        double w2 = 1 - 0.7 * 0.7;
        assertEquals(100 * MS + w2 * 100 * MS, t.averageNs(), 1, "a batch of two weighs as two samples");
        double before = t.averageNs();
        t.onLowerBound(50 * MS, 1, 0);
        assertEquals(before, t.averageNs(), 1, "a bound below the average says nothing new");
        t.onLowerBound(1000 * MS, 1, 0);
        assertTrue(t.averageNs() > before, "a bound above it raises it");
        t.onMeasured(0, 0, 0);
        t.onLowerBound(0, 0, 0);
        assertTrue(t.averageNs() > before, "empty batches change nothing");
    }

    @Test
    void theExcessOverTheFleetFadesWithTheAgeOfTheLastMeasurement() {
        assertEquals(500.0, TtftEstimate.recentNs(500, 0, 50, 100), 1e-9, "fresh: the average");
        assertEquals(50 + 450 * Math.exp(-1), TtftEstimate.recentNs(500, 100, 50, 100), 1e-9, "one time constant");
        assertEquals(40.0, TtftEstimate.recentNs(40, 10_000, 50, 100), 1e-9, "faster than the fleet: its own value");
        assertTrue(Double.isNaN(TtftEstimate.recentNs(Double.NaN, 0, 50, 100)));
        assertEquals(500.0, TtftEstimate.recentNs(500, 10_000, Double.NaN, 100), 1e-9, "no fleet value: nothing to fade to");
    }

    @Test
    void theFleetIsTheLowerMedianOfTheMeasuredEndpoints() {
        Rule r = table("", "least_outstanding", 4).ruleByName("r");
        EndpointState[] eps = r.endpoints().toArray(EndpointState[]::new);
        double[] scratch = new double[4];
        assertTrue(Double.isNaN(TtftEstimate.fleetNs(eps, scratch)), "nothing measured");
        measure(r, 50, 500);
        assertEquals(50 * MS, TtftEstimate.fleetNs(eps, scratch), 1, "two measured: the lower one, not the straggler's pull");
        measure(r, 50, 500, 60, 55);
        assertEquals(55 * MS, TtftEstimate.fleetNs(eps, scratch), 1, "50, 55, 60, 500: the lower median");
    }

    @Test
    void anOutlierGetsALoadFactorOnlyWhenTtftAwareIsOn_andPublishesItsRecentTtftCappedAtTheFleet() {
        RouteTable off = table("", "least_outstanding", 4);
        Rule r = off.ruleByName("r");
        measure(r, 50, 50, 50, 500);
        new TtftFleets().apply(off, clock.nanoTime());
        EndpointState slow = r.endpoints().get(3);
        assertEquals(1.0, slow.ttft().loadFactor(), "load.ttft_aware off (the default): routing unchanged");
        assertEquals(50 * MS, slow.ttft().recentNs(), "the hedge's reference is capped at the fleet's");
        assertEquals(500 * MS, slow.ttft().ownRecentNs());

        RouteTable on = table("load: {ttft_aware: true, ttft_recover_ms: 100}\n", "least_outstanding", 4);
        Rule s = on.ruleByName("r");
        measure(s, 50, 50, 90, 500);
        new TtftFleets().apply(on, clock.nanoTime());
        assertEquals(10.0, s.endpoints().get(3).ttft().loadFactor(), 1e-9, "10x the fleet: weighed 10x");
        assertEquals(1.0, s.endpoints().get(2).ttft().loadFactor(), "1.8x the fleet is not an outlier");
        assertEquals(1.0, s.endpoints().get(0).ttft().loadFactor());
        assertEquals(9.0, TtftEstimate.weigh(0, 10.0), 1e-9, "idle at 10x compares like 9 in flight");
        assertEquals(3.0, TtftEstimate.weigh(3, 1.0), 1e-9);

        clock.advance(100, TimeUnit.MILLISECONDS);
        new TtftFleets().apply(on, clock.nanoTime());
        assertEquals((50 + 450 * Math.exp(-1)) / 50, s.endpoints().get(3).ttft().loadFactor(), 1e-6, "fading toward the fleet");
        clock.advance(200, TimeUnit.MILLISECONDS);
        new TtftFleets().apply(on, clock.nanoTime());
        assertEquals(1.0, s.endpoints().get(3).ttft().loadFactor(), "under 2x the fleet: no factor any more");
    }

    @Test
    void leastOutstandingAvoidsTheStragglerButTriesItAgainOnceItsExcessFaded() {
        RouteTable t = table("load: {ttft_aware: true, ttft_recover_ms: 100}\n", "least_outstanding", 4);
        Rule r = t.ruleByName("r");
        measure(r, 50, 50, 50, 500);
        TtftFleets fleets = new TtftFleets();
        fleets.apply(t, clock.nanoTime());
        EndpointState slow = r.endpoints().get(3);
        StringBuilder why = new StringBuilder();
        RouteEvent explained = RouteEvent.of(r, Role.ANY, null, null, SessionKeys.NONE, true, true);
        r.policyFor(Role.ANY).choose(r.candidates(Role.ANY), explained, clock.nanoTime(), why);
        assertTrue(why.toString().contains(slow.key() + ":0(engine=unknown local=0)*ttft_x10.0"), why.toString());
        int toSlow = 0;
        for (int i = 0; i < 12; i++) { // 4 in flight on each fast endpoint: still less than the straggler's weight
            toSlow += decide(r, event(r), clock.nanoTime()) == slow ? 1 : 0;
        }
        assertEquals(0, toSlow, "an idle 10x straggler compares like 9 in flight");
        for (int i = 0; i < 3; i++) {
            for (int k = 0; k < 3; k++) {
                finish(r.endpoints().get(k), io.kvgate.dataplane.route.Outcome.SUCCESS, clock.nanoTime());
            }
        }
        clock.advance(200, TimeUnit.MILLISECONDS); // 2 time constants: 50 + 450 e^-2 = 111 ms, 2.2x the fleet
        fleets.apply(t, clock.nanoTime());
        assertTrue(slow.ttft().loadFactor() > 2.0, "still an outlier");
        assertTrue(decide(r, event(r), clock.nanoTime()) != slow, "1 in flight x 1 is lighter than 0 in flight x 2.2");
        clock.advance(100, TimeUnit.MILLISECONDS);
        fleets.apply(t, clock.nanoTime());
        assertEquals(1.0, slow.ttft().loadFactor(), "faded under 2x: no longer avoided");
        assertEquals(slow, decide(r, event(r), clock.nanoTime()), "the idle endpoint is tried again (and re-measured)");
    }

    @Test
    void chwblWalksPastAnOutlierOverItsBound() {
        RouteTable t = table("load: {ttft_aware: true}\n", "chwbl", 2);
        Rule r = t.ruleByName("r");
        RouteEvent e = RouteEvent.of(r, Role.ANY, new int[] {1, 2, 3, 4}, null, SessionKeys.NONE, false, false);
        EndpointState owner = decide(r, e, clock.nanoTime());
        finish(owner, io.kvgate.dataplane.route.Outcome.SUCCESS, clock.nanoTime());
        EndpointState other = r.endpoints().get(0) == owner ? r.endpoints().get(1) : r.endpoints().get(0);
        owner.ttft().onMeasured(500 * MS, 1, clock.nanoTime());
        other.ttft().onMeasured(50 * MS, 1, clock.nanoTime());
        new TtftFleets().apply(t, clock.nanoTime());
        RouteEvent again = RouteEvent.of(r, Role.ANY, new int[] {1, 2, 3, 4}, null, SessionKeys.NONE, false, false);
        assertEquals(other, decide(r, again, clock.nanoTime()), "the key's owner is 10x slow: over the bound, walked past");
    }

    @Test
    void measurementsReachTheEstimateThroughThePortCounters() {
        Rule r = table("", "least_outstanding", 2).ruleByName("r");
        EndpointState ep = r.endpoints().get(1);
        EndpointState[] byId = new EndpointState[ep.id() + 1];
        byId[ep.id()] = ep;
        RouterPort port = new RouterPort(null, Runnable::run, 16);
        port.firstToken(ep, 100 * MS);
        port.firstToken(ep, 300 * MS);
        port.applyCompletions(byId, 3, 1, clock.nanoTime());
        assertEquals(200 * MS, ep.ttft().averageNs(), 1, "the first batch's mean");
        port.applyCompletions(byId, 3, 1, clock.nanoTime());
        assertEquals(200 * MS, ep.ttft().averageNs(), 1, "nothing new: nothing folded twice");
        port.noFirstTokenAfter(ep, 1000 * MS);
        port.applyCompletions(byId, 3, 1, clock.nanoTime());
        assertEquals(200 * MS + 0.3 * 800 * MS, ep.ttft().averageNs(), 1, "a lower bound above the average raises it");
        port.firstToken(ep, -1); // a clock that went backwards is not a measurement
        port.applyCompletions(byId, 3, 1, clock.nanoTime());
        assertEquals(440 * MS, ep.ttft().averageNs(), 1);
    }
}
