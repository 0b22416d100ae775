package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.decide;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static io.kvgate.dataplane.route.RouteFixtures.event;
import static io.kvgate.dataplane.route.RouteFixtures.finish;
import static io.kvgate.dataplane.route.RouteFixtures.rule;
import static io.kvgate.dataplane.route.RouteFixtures.table;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.control.clock.ManualClock;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** round_robin, weighted and least_outstanding, with scripted requests on a manual clock. */
class LoadPoliciesTest {
    private final ManualClock clock = new ManualClock();

    private Rule rule(String policy, String... endpointLines) {
        return table(config("", RouteFixtures.rule("r", "    policy: " + policy + "\n", endpointLines)), null, clock).ruleByName("r");
    }

    private List<String> picks(Rule r, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            EndpointState ep = decide(r, event(r), clock.nanoTime());
            out.add(ep == null ? "none" : String.valueOf(ep.config().port() - 20000));
        }
        return out;
    }

    @Test
    void roundRobinRotatesAndSkipsUnavailableAndTriedEndpoints() {
        Rule r = rule("round_robin", endpoints(3));
        assertEquals(List.of("0", "1", "2", "0", "1", "2"), picks(r, 6));
        EndpointState second = r.endpoints().get(1);
        second.reportProbe(false);
        second.breaker().applyProbeReport();
        assertEquals(List.of("0", "2", "0", "2"), picks(r, 4));
        RouteEvent retry = event(r).tried(r.endpoints().get(0));
        assertSame(r.endpoints().get(2), decide(r, retry, clock.nanoTime()), "a connect retry never goes back to a tried endpoint");
        retry.tried(r.endpoints().get(2));
        assertNull(decide(r, retry, clock.nanoTime()), "every endpoint tried or down: no decision");
    }

    @Test
    void weightedIsSmoothAndExact() {
        Rule r = rule("weighted", "url: http://127.0.0.1:20000\n        weight: 5", "url: http://127.0.0.1:20001",
            "url: http://127.0.0.1:20002");
        // nginx's smooth weighted round robin for weights 5,1,1: a, a, b, a, c, a, a per cycle of 7.
        assertEquals(List.of("0", "0", "1", "0", "2", "0", "0", "0", "0", "1", "0", "2", "0", "0"), picks(r, 14));
    }

    @Test
    void leastOutstandingPicksTheLeastLoadedPerWeight() {
        Rule r = rule("least_outstanding", "url: http://127.0.0.1:20000\n        weight: 2", "url: http://127.0.0.1:20001");
        EndpointState heavy = r.endpoints().get(0);
        EndpointState light = r.endpoints().get(1);
        long now = clock.nanoTime();
        heavy.onRouted(now);
        heavy.onRouted(now);
        light.onRouted(now);
        // 2/2 == 1/1: a tie; one more on `light` makes it 2/1 > 2/2.
        light.onRouted(now);
        assertSame(heavy, decide(r, event(r), now));
        assertEquals(3, heavy.outstanding());
        finish(heavy, Outcome.SUCCESS, now);
        finish(heavy, Outcome.SUCCESS, now);
        assertSame(heavy, decide(r, event(r), now), "1/2 beats 2/1");
    }

    @Test
    void leastOutstandingTiesRotateSoEqualEndpointsShareEvenly() {
        Rule r = rule("least_outstanding", endpoints(3));
        int[] counts = new int[3];
        long now = clock.nanoTime();
        for (int i = 0; i < 300; i++) {
            EndpointState ep = decide(r, event(r), now);
            counts[ep.config().port() - 20000]++;
            finish(ep, Outcome.SUCCESS, now); // always idle again: every decision is a three-way tie
        }
        assertEquals(100, counts[0]);
        assertEquals(100, counts[1]);
        assertEquals(100, counts[2]);
    }

    @Test
    void allEndpointsDownIsNoDecision() {
        Rule r = rule("least_outstanding", endpoints(2));
        for (EndpointState ep : r.endpoints()) {
            ep.reportProbe(false);
            ep.breaker().applyProbeReport();
        }
        assertNull(decide(r, event(r), clock.nanoTime()));
    }
}
