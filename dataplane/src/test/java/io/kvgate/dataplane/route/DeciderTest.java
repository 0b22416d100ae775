package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import org.junit.jupiter.api.Test;

/**
 * The decision alone, without a ring, a port or a thread: inputs and a rule in, a filled {@link Decision} out, the
 * chosen endpoints counted (or, for a dry run or a refusal, nothing).
 */
class DeciderTest {
    private final ManualClock clock = new ManualClock();
    private final Decider decider = new Decider();

    private Rule plain(int endpointCount) {
        return RouteFixtures.table(config("", RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(endpointCount))), null, clock)
            .ruleByName("r");
    }

    private Rule pd() {
        String[] eps = {"url: http://127.0.0.1:20000\n        role: prefill", "url: http://127.0.0.1:20002\n        role: decode"};
        return RouteFixtures.table(config("", RouteFixtures.rule("p", "    policy: pd\n", eps)), null, clock).ruleByName("p");
    }

    @Test
    void aDecisionNamesTheEndpointItCounted() {
        Rule r = plain(2);
        RouteEvent e = RouteFixtures.event(r);
        Decision d = new Decision();
        assertEquals(1, decider.decide(r, e, clock.nanoTime(), d));
        assertNotNull(d.endpoint());
        assertSame(r, d.rule());
        assertEquals(1, d.endpoint().outstanding());
        assertNull(d.explanation(), "not explained: no string built");
        assertFalse(d.shed());
        assertEquals(-1, d.dpRank());
    }

    @Test
    void aDryRunIsDecidedButCountsNothing() {
        Rule r = plain(2);
        RouteEvent e = RouteEvent.of(r, Role.ANY, null, null, SessionKeys.NONE, true, true);
        Decision d = new Decision();
        assertEquals(0, decider.decide(r, e, clock.nanoTime(), d));
        assertNotNull(d.endpoint());
        assertEquals(0, d.endpoint().outstanding());
        assertEquals(-1, d.reachableTokens(), "no tier or cached tokens reported for a dry run");
    }

    @Test
    void noAvailableEndpointIsARefusalWithItsReason() {
        Rule r = plain(1);
        r.candidates(Role.ANY)[0].drained(true);
        Decision d = new Decision();
        assertEquals(0, decider.decide(r, RouteFixtures.event(r), clock.nanoTime(), d));
        assertNull(d.endpoint());
        assertEquals(Decider.NO_HEALTHY_ENDPOINT, d.explanation());
    }

    @Test
    void theAdmissionWaitTravelsWithTheDecision() {
        Rule r = plain(1);
        RouteEvent e = RouteFixtures.event(r);
        e.waitedForAdmission = true;
        e.admissionQueuedAtNs = 5;
        e.admissionAdmittedAtNs = 9;
        Decision d = new Decision();
        decider.decide(r, e, clock.nanoTime(), d);
        assertTrue(d.waitedForAdmission());
        assertEquals(5, d.admissionQueuedAtNs());
        assertEquals(9, d.admissionAdmittedAtNs());
    }

    @Test
    void aPairCountsBothOrNeither() {
        Rule r = pd();
        RouteEvent e = RouteEvent.of(r, Role.PREFILL, new int[64], null, SessionKeys.NONE, false, false);
        e.type = RouteEvent.ROUTE_PAIR;
        Decision d = new Decision();
        assertEquals(2, decider.decide(r, e, clock.nanoTime(), d));
        assertEquals(1, d.endpoint().outstanding());
        assertEquals(1, d.decodeEndpoint().outstanding());
        assertSame(Role.PREFILL, e.role(), "the event is the prefill's again after the decode was asked");
        assertEquals(64, e.promptTokens().length);

        r.candidates(Role.DECODE)[0].drained(true);
        Decision refused = new Decision();
        assertEquals(0, decider.decide(r, e, clock.nanoTime(), refused));
        assertNull(refused.endpoint());
        assertNull(refused.decodeEndpoint());
        assertSame(Role.DECODE, refused.unserved());
        assertEquals(1, r.candidates(Role.PREFILL)[0].outstanding(), "the refused pair charged its prefill nothing");
    }
}
