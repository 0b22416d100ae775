package io.kvgate.epp.picker;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The picker's routing call hands every endpoint's load back exactly once: at the request's end, with the charged
 * prefill first; a decision that arrives after the stream ended is released at once and never reaches the stream; a
 * P/D decode failure does not blame the prefill pod.
 */
class PickerRoutingTest {
    private static EndpointState endpoint(int id) {
        int port = 20000 + id;
        return new EndpointState("127.0.0.1:" + port, id,
            new EndpointConfig("http://127.0.0.1:" + port, "127.0.0.1", port, 1, null, false, null, 1, null, null, 0));
    }

    /** Records what the routing stage is told, and publishes nothing (decisions are delivered by the test). */
    private static final class Recorded implements ExchangeRouting {
        final List<String> calls = new ArrayList<>();

        private final RouteInputs inputs = new RouteInputs();

        @Override
        public RouteInputs inputs() {
            return inputs.clear();
        }

        @Override
        public boolean tryRoute(RouteInputs in, RouteCallback callback) {
            calls.add("route " + in.role());
            return true;
        }

        @Override
        public boolean tryRoutePair(RouteInputs in, RouteCallback callback) {
            throw new AssertionError("the picker routes its P/D roles one by one");
        }

        @Override
        public void complete(EndpointState endpoint, Outcome outcome) {
            calls.add("complete " + endpoint.id() + " " + outcome);
        }

        @Override
        public void prefillDone(EndpointState endpoint, int tokens) {
            calls.add("prefill " + endpoint.id() + " " + tokens);
        }
    }

    private static final class Decisions implements PickerRouting.Decided {
        final List<String> seen = new ArrayList<>();

        @Override
        public void routed(Role role, EndpointState endpoint, String why) {
            seen.add(role + " " + (endpoint == null ? "none" : endpoint.id()));
        }

        @Override
        public void shed(String message) {
            seen.add("shed");
        }
    }

    private static PickerRouting routing(Recorded r, Decisions d) {
        return new PickerRouting(r, null, RoutingInputs.NONE, null, null, null, PriorityClass.STANDARD, 0L, d);
    }

    @Test
    void theLoadIsHandedBackOnceWithThePrefillFirst() {
        Recorded r = new Recorded();
        Decisions d = new Decisions();
        PickerRouting p = routing(r, d);
        p.route(Role.ANY);
        p.onDecision(Decision.charged(endpoint(3), null, "why", 300));
        p.firstBytes();
        p.end(Outcome.SUCCESS);
        p.end(Outcome.FAILURE);
        assertEquals(List.of("ANY 3"), d.seen);
        assertEquals(List.of("route ANY", "prefill 3 300", "prefill 3 0", "complete 3 SUCCESS"), r.calls);
    }

    @Test
    void aDecisionArrivingAfterTheStreamEndedIsReleasedAtOnce() {
        Recorded r = new Recorded();
        Decisions d = new Decisions();
        PickerRouting p = routing(r, d);
        p.route(Role.ANY);
        p.end(Outcome.RELEASED); // Envoy reset the stream while the request waited for its decision
        p.onDecision(Decision.charged(endpoint(1), null, "why", 50));
        p.onDecision(Decision.shed(null, "late"));
        assertEquals(List.of(), d.seen, "nothing reaches a finished stream");
        assertEquals(List.of("route ANY", "prefill 1 50", "complete 1 RELEASED"), r.calls);
    }

    @Test
    void aPdDecodeFailureReleasesThePrefillPodWithoutBlamingIt() {
        Recorded r = new Recorded();
        Decisions d = new Decisions();
        PickerRouting p = routing(r, d);
        p.route(Role.PREFILL);
        p.onDecision(Decision.routed(endpoint(0), null, "prefill"));
        p.route(Role.DECODE);
        p.onDecision(Decision.routed(endpoint(1), null, "decode"));
        p.end(Outcome.FAILURE);
        assertEquals(List.of("PREFILL 0", "DECODE 1"), d.seen);
        assertEquals(List.of("route PREFILL", "route DECODE", "prefill 1 0", "prefill 0 0", "complete 1 FAILURE",
            "complete 0 RELEASED"), r.calls);
    }
}
