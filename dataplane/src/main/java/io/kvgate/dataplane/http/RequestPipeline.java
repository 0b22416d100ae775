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
     * A generation request, after its body: ready for routing (inputs set, body as the engine gets it) or refused. Its
     * reservation is decided in this replica's memory (the endpoint picker's way, which cannot wait for a store); the
     * front door uses {@link #beforeLimits} and {@link #reserve}.
     */
    public Refusal routable(RequestContext rc, ByteBufAllocator alloc) {
        Refusal r;
        if ((r = beforeLimits(rc, alloc)) != null) return r;
        return TenantStage.reserve(rc, tenants); // last: nothing after it refuses, so a grant is always handed off
    }

    /**
     * The front door's way: the stages of {@link #routable} up to the limits ({@link #beforeLimits}), then the
     * reservation, which waits for the shared rate-limit store when one is configured: {@code then} gets it on
     * {@code loop} (null for a tenant without limits). The caller turns it into a refusal
     * ({@link TenantStage#refusal}) and sets it on the request.
     */
    public void reserve(RequestContext rc, io.kvgate.dataplane.tenant.Loop loop,
                        java.util.function.Consumer<io.kvgate.dataplane.tenant.Reservation> then) {
        TenantStage.reserve(rc, tenants, loop, then);
    }

    /** The stages of {@link #routable} before the limits: the request ready for routing but not yet reserved. */
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
