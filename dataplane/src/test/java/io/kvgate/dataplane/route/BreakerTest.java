package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.event;
import static io.kvgate.dataplane.route.RouteFixtures.finish;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The circuit breaker's closed → open → half-open cycle on a manual clock (threshold 3, open 1 s, as
 * {@link RouteFixtures#finish} applies them), and what counts as a failure.
 */
class BreakerTest {
    private final ManualClock clock = new ManualClock();
    private final Rule rule = table(config("", RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(1))), null, clock)
        .ruleByName("r");
    private final EndpointState ep = rule.endpoints().get(0);

    private void request(Outcome outcome) {
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()));
        finish(ep, outcome, clock.nanoTime());
    }

    @Test
    void consecutiveFailuresOpenTheBreakerAndNothingIsRoutedWhileOpen() {
        request(Outcome.FAILURE);
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.CLOSED, ep.breaker().state());
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.OPEN, ep.breaker().state());
        assertEquals(1, ep.breaker().opens());
        assertNull(decide(rule, event(rule), clock.nanoTime()));
        clock.advance(999, TimeUnit.MILLISECONDS);
        assertNull(decide(rule, event(rule), clock.nanoTime()), "still open 1 ms before the period ends");
    }

    @Test
    void aSuccessBetweenFailuresResetsTheCountAndClientErrorsAreSuccesses() {
        request(Outcome.FAILURE);
        request(Outcome.FAILURE);
        request(Outcome.SUCCESS); // e.g. a 4xx: the engine answered
        request(Outcome.FAILURE);
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.CLOSED, ep.breaker().state());
        request(Outcome.RELEASED); // client went away: no verdict, no reset either
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.OPEN, ep.breaker().state());
    }

    @Test
    void afterTheOpenPeriodOneTrialIsLetThroughAndItsSuccessCloses() {
        openBreaker();
        clock.advance(1, TimeUnit.SECONDS);
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()), "the trial request");
        assertEquals(Breaker.State.HALF_OPEN, ep.breaker().state());
        assertNull(decide(rule, event(rule), clock.nanoTime()), "only one trial at a time");
        finish(ep, Outcome.SUCCESS, clock.nanoTime());
        assertEquals(Breaker.State.CLOSED, ep.breaker().state());
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()));
    }

    @Test
    void aFailedTrialReopensForAnotherFullPeriod() {
        openBreaker();
        clock.advance(1, TimeUnit.SECONDS);
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.OPEN, ep.breaker().state());
        assertEquals(2, ep.breaker().opens());
        clock.advance(999, TimeUnit.MILLISECONDS);
        assertNull(decide(rule, event(rule), clock.nanoTime()));
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()));
    }

    @Test
    void aReleasedTrialSaysNothingAndTheNextRequestTriesAgain() {
        openBreaker();
        clock.advance(1, TimeUnit.SECONDS);
        request(Outcome.RELEASED);
        assertEquals(Breaker.State.HALF_OPEN, ep.breaker().state());
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()), "a new trial");
    }

    @Test
    void aPassingProbeLetsATrialThroughBeforeThePeriodEnds() {
        openBreaker();
        ep.reportProbe(true);
        assertEquals(Breaker.State.OPEN, ep.breaker().state(), "a probe report changes nothing until the routing stage applies it");
        ep.breaker().applyProbeReport();
        assertEquals(Breaker.State.HALF_OPEN, ep.breaker().state());
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()));
    }

    @Test
    void aFailingProbeTakesTheEndpointOutUntilAPassingOne() {
        ep.reportProbe(false);
        ep.breaker().applyProbeReport();
        assertFalse(ep.probeHealthy());
        assertNull(decide(rule, event(rule), clock.nanoTime()));
        ep.reportProbe(true);
        ep.breaker().applyProbeReport();
        assertTrue(ep.probeHealthy());
        assertSame(ep, decide(rule, event(rule), clock.nanoTime()));
    }

    @Test
    void outcomesOfRequestsRoutedBeforeTheBreakerOpenedChangeNothingWhileOpen() {
        long now = clock.nanoTime();
        ep.onRouted(now);
        ep.onRouted(now);
        openBreaker();
        finish(ep, Outcome.SUCCESS, clock.nanoTime());
        assertEquals(Breaker.State.OPEN, ep.breaker().state(), "a late success from before the opening does not close it");
        finish(ep, Outcome.FAILURE, clock.nanoTime());
        assertEquals(0, ep.outstanding());
    }

    private void openBreaker() {
        request(Outcome.FAILURE);
        request(Outcome.FAILURE);
        request(Outcome.FAILURE);
        assertEquals(Breaker.State.OPEN, ep.breaker().state());
    }
}
