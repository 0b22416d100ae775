package io.kvgate.dataplane.http;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.prompt.PromptStage;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.request.Refusal;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.http.HttpContent;

/**
 * What happens to a client request, in order. Each stage reads and writes the connection's {@link RequestContext}
 * and returns the {@link Refusal} that answers the request, or null to go on:
 * <ol>
 *   <li>{@link HeadStage head}: drain, route, method, API key, Content-Type, declared length;</li>
 *   <li>{@link BodyStage body}: the body assembled piece by piece (a whole body in one read is borrowed, not copied);</li>
 *   <li>{@link ValidateStage validate}: one in-place scan into typed fields, the rule of the model, the contract's
 *       checks;</li>
 *   <li>{@link PromptStage prompt}: the rule's routing inputs (tokens, salt, session key) and its context bound;</li>
 *   <li>{@link TenantStage#salt cache salt}: the tenant's gateway-owned salt in the body and the routing inputs;</li>
 *   <li>{@link ForwardBody forward body}: the body in the engine's dialect;</li>
 *   <li>{@link TenantStage limits}: a limited tenant's reservation, or its 429;</li>
 *   <li>the exchange: {@link ClientConnection} hands {@link RequestContext#handOff()} to the exchange layer.</li>
 * </ol>
 * The connection drives the first two as the head and the body's pieces arrive, then {@link #routable} runs the
 * rest. Nothing here needs a channel, so another front door (an endpoint picker) runs the same stages and stops at
 * the routing inputs. Event-loop only; one per listener (stateless apart from its collaborators).
 */
public final class RequestPipeline {
    private final HeadStage head;
    private final ValidateStage validate;
    private final ForwardBody forward;
    private final GatewayMetrics metrics;
    private final NanoClock clock;
    private final io.kvgate.dataplane.tenant.Tenants tenants;

    public RequestPipeline(GatewayContext gw, DrainState drain) {
        this.head = new HeadStage(drain, gw::tracing);
        this.validate = new ValidateStage(gw.metrics(), gw.clock(), (table, model) -> gw.router().adapters().lookup(table, model));
        this.forward = new ForwardBody(gw.metrics());
        this.metrics = gw.metrics();
        this.clock = gw.clock();
        this.tenants = gw.tenants();
    }

    /** A complete head, in a context {@link RequestContext#begin begun} with it: null reads the body. */
    public Refusal head(RequestContext rc) {
        return head.run(rc);
    }

    /** One piece of the body (the caller keeps and releases it). */
    public Refusal body(RequestContext rc, HttpContent piece, ByteBufAllocator alloc) {
        return BodyStage.append(rc, piece, alloc);
    }

    /** A render route's request, after its body: validated, with its rule. */
    public Refusal renderable(RequestContext rc) {
        return validate.rule(rc);
    }

    /**
     * A generation request's reservation, after {@link #beforeLimits}, in the store the configuration names: it waits
     * for the shared rate-limit store when one is configured, and {@code then} gets it on {@code loop} (null for a
     * tenant without limits). The front door and the endpoint picker alike; the caller hands it to {@link #reserved}
     * if the request is still there, else settles it released.
     */
    public void reserve(RequestContext rc, io.kvgate.dataplane.tenant.Loop loop,
                        java.util.function.Consumer<io.kvgate.dataplane.tenant.Reservation> then) {
        TenantStage.reserve(rc, tenants, loop, then);
    }

    /** A decided reservation set on the request: what it answers, a 429 over a limit, a 503 when the store could not decide, or null to go on. */
    public static Refusal reserved(RequestContext rc, io.kvgate.dataplane.tenant.Reservation r) {
        rc.reservation(r);
        return TenantStage.refusal(r);
    }

    /** A generation request, after its body: every stage before the limits, the request ready for routing but not yet reserved. */
    public Refusal beforeLimits(RequestContext rc, ByteBufAllocator alloc) {
        Refusal r;
        if ((r = validate.rule(rc)) != null) return r;
        return forwardable(rc, alloc);
    }

    /** A request whose rule is validated ({@link #renderable}) that goes to an engine: the rest of the stages. */
    public Refusal forwardable(RequestContext rc, ByteBufAllocator alloc) {
        Refusal r;
        if ((r = validate.generation(rc)) != null) return r;
        forward.stripEngineFields(rc); // before the prompt stage reads the body: engines' fields are not the prompt's
        if ((r = PromptStage.run(rc, metrics, clock)) != null) return r;
        if ((r = TenantStage.salt(rc)) != null) return r; // after the prompt stage read the client's salt
        forward.run(rc, alloc); // after the prompt stage: a clamped budget was written at the scan's offsets
        return null;
    }
}
