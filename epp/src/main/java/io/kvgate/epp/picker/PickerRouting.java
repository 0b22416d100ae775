package io.kvgate.epp.picker;

import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.route.RouteRequest;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.SessionKeys;

/**
 * The picker's one call into the routing stage: a request's routing inputs as the HTTP front door's exchanges hand
 * them over, one decision per role (a P/D rule asks for its prefill pod first, then its decode pod), and the report
 * of how the request ended on the endpoints it was charged to. All of it on the stream's event loop: decisions come
 * back on the loop that published them ({@link io.kvgate.dataplane.route.RouterPort}'s contract), through the same
 * per-loop port the HTTP front door uses, so the picker adds no thread hand-off of its own.
 *
 * <p>The routing seam is being reshaped on main (a decision value instead of {@link RouteRequest}'s callbacks): this
 * class is the only place the picker touches it.
 */
final class PickerRouting implements RouteRequest {
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
    private int pendingCharge;
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
        return routing.tryRoute(this);
    }

    @Override
    public Role role() {
        return role;
    }

    @Override
    public Rule rule() {
        return rule;
    }

    @Override
    public int[] promptTokens() {
        return inputs.promptTokens();
    }

    @Override
    public String cacheSalt() {
        return inputs.cacheSalt();
    }

    @Override
    public String lora() {
        return lora;
    }

    @Override
    public int[] servingEndpoints() {
        return role == Role.PREFILL ? servingPrefill : serving;
    }

    @Override
    public long textPrefixKey() {
        return inputs.textPrefixKey();
    }

    @Override
    public long sessionKeyHash() {
        return SessionKeys.hash(inputs.sessionKey());
    }

    @Override
    public PriorityClass priority() {
        return priority;
    }

    @Override
    public long tenant() {
        return tenant;
    }

    /** The picker sees the engine's first response bytes (response headers) and hands the charge back then. */
    @Override
    public boolean tracksPrefill() {
        return true;
    }

    @Override
    public void prefillCharged(int tokens) {
        this.pendingCharge = tokens;
    }

    @Override
    public void onShed(Rule decidedBy, String message) {
        if (!released) {
            decided.shed(message);
        }
    }

    @Override
    public void onRouted(EndpointState endpoint, Rule decidedBy, String why) {
        if (released) {
            // The stream ended while this decision was on its way: its endpoint gets its load back at once.
            if (endpoint != null) {
                routing.prefillDone(endpoint, pendingCharge);
                routing.complete(endpoint, Outcome.RELEASED);
            }
            pendingCharge = 0;
            return;
        }
        if (endpoint != null) {
            if (role == Role.PREFILL) {
                routedPrefill = endpoint;
                chargedPrefill = pendingCharge;
            } else {
                routedAny = endpoint;
                chargedAny = pendingCharge;
            }
        }
        pendingCharge = 0;
        decided.routed(role, endpoint, why);
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
