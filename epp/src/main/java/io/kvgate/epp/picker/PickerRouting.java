package io.kvgate.epp.picker;

import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.SessionKeys;

/**
 * The picker's one call into the routing stage: a request's routing inputs as the HTTP front door's exchanges hand
 * them over, one decision per role (a P/D rule asks for its prefill pod first, then its decode pod), and the report
 * of how the request ended on the endpoints it was charged to. All of it on the stream's event loop: decisions come
 * back on the loop that published them ({@link io.kvgate.dataplane.route.RouterPort}'s contract), through the same
 * per-loop port the HTTP front door uses, so the picker adds no thread hand-off of its own.
 * This class is the only place the picker touches the routing seam ({@link RouteInputs} in, one {@link Decision} back).
 */
final class PickerRouting implements RouteCallback {
    /** Where a decision goes (the stream): on the event loop. */
    interface Decided {
        void routed(Role role, EndpointState endpoint, String why);

        void shed(String message);
    }

    private final ExchangeRouting routing;
    private final Rule rule;
    private final RoutingInputs inputs;
    private final String lora;
    /** Endpoints the decode (or only) decision may take: the route's and adapter's, narrowed by the subset hint. */
    private final int[] serving;
    /** Endpoints a P/D rule's prefill decision may take (the subset hint names decode pods: not applied). */
    private final int[] servingPrefill;
    private final PriorityClass priority;
    private final long tenant;
    private final Decided decided;
    private Role role = Role.ANY;
    /** Prefill tokens charged per role's endpoint, handed back once ({@link #firstBytes}). */
    private int chargedAny;
    private int chargedPrefill;
    private EndpointState routedAny;
    private EndpointState routedPrefill;
    private boolean released;

    PickerRouting(ExchangeRouting routing, Rule rule, RoutingInputs inputs, String lora, int[] serving,
                  int[] servingPrefill, PriorityClass priority, long tenant, Decided decided) {
        this.routing = routing;
        this.rule = rule;
        this.inputs = inputs;
        this.lora = lora;
        this.serving = serving;
        this.servingPrefill = servingPrefill;
        this.priority = priority;
        this.tenant = tenant;
        this.decided = decided;
    }

    /** Asks for {@code r}'s endpoint; false when the ring or the loop's inbox is full (the request is shed). */
    boolean route(Role r) {
        this.role = r;
        RouteInputs in = routing.inputs()
            .rule(rule)
            .role(r)
            .promptTokens(inputs.promptTokens())
            .cacheSalt(inputs.cacheSalt())
            .lora(lora)
            .servingEndpoints(r == Role.PREFILL ? servingPrefill : serving)
            .textPrefixKey(inputs.textPrefixKey())
            .sessionKeyHash(SessionKeys.hash(inputs.sessionKey()))
            .priority(priority)
            .tenant(tenant)
            // The picker sees the engine's first response bytes (response headers) and hands the charge back then.
            .tracksPrefill(true);
        return routing.tryRoute(in, this);
    }

    /** The endpoints the current role's decision may take (null: every endpoint of the rule). */
    int[] servingEndpoints() {
        return role == Role.PREFILL ? servingPrefill : serving;
    }

    /** The routing stage's decision for the current role, on the stream's event loop. */
    @Override
    public void onDecision(Decision d) {
        if (d.shed()) {
            if (!released) {
                decided.shed(d.explanation());
            }
            return;
        }
        EndpointState endpoint = d.endpoint();
        int charge = d.chargedPrefillTokens();
        if (released) {
            // The stream ended while this decision was on its way: its endpoint gets its load back at once.
            if (endpoint != null) {
                routing.prefillDone(endpoint, charge);
                routing.complete(endpoint, Outcome.RELEASED);
            }
            return;
        }
        if (endpoint != null) {
            if (role == Role.PREFILL) {
                routedPrefill = endpoint;
                chargedPrefill = charge;
            } else {
                routedAny = endpoint;
                chargedAny = charge;
            }
        }
        decided.routed(role, endpoint, d.explanation());
    }

    /** The engine's first response bytes: the prefill charged for this request is done. */
    void firstBytes() {
        if (routedAny != null) {
            routing.prefillDone(routedAny, chargedAny);
            chargedAny = 0;
        }
        if (routedPrefill != null) {
            routing.prefillDone(routedPrefill, chargedPrefill);
            chargedPrefill = 0;
        }
    }

    /**
     * How the request ended: {@code outcome} for the endpoint it was routed to (and the prefill pod of a P/D pick),
     * once. A request that never reached an engine is {@link Outcome#RELEASED}; a decision still on its way is
     * released when it arrives.
     */
    void end(Outcome outcome) {
        if (released) {
            return;
        }
        released = true;
        firstBytes();
        if (routedAny != null) {
            routing.complete(routedAny, outcome);
        }
        if (routedPrefill != null) {
            // A decode failure says nothing of the prefill pod (the sidecar hides it): released, not blamed.
            routing.complete(routedPrefill, outcome == Outcome.FAILURE ? Outcome.RELEASED : outcome);
        }
    }
}
