package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.relay.ClientResponse;
import io.kvgate.dataplane.relay.Relay;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.upstream.LegFailure;
import io.kvgate.dataplane.upstream.LegListener;
import io.kvgate.dataplane.upstream.UpstreamLeg;
import io.kvgate.dataplane.wire.EngineRequest;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.opentelemetry.api.trace.Span;
import java.util.ArrayList;
import java.util.List;

/**
 * The decode leg of a P/D request: the second {@link UpstreamLeg} of {@link PdExchange}, whose answer the request's
 * {@link Relay} carries to the client. It starts on a decode endpoint already chosen (SGLang's pair, conditional
 * P/D's local path) or routes itself (after a sequential prefill answered), and goes to another decode endpoint while
 * nothing reached the client (refused connection, engine loading, endpoint found down) within
 * {@code upstream.max_connect_attempts}. Everything that ends it is reported to the exchange
 * ({@link PdExchange#decodeEnded}), which owns the request's end; the leg itself never ends the client connection.
 *
 * <p>Event-loop only; the routing decision is delivered on the event loop too.
 */
final class DecodeLeg implements RouteCallback, LegListener {
    /** vLLM's and SGLang's DP rank pin, as on the plain path. */
    private static final String DP_RANK_HEADER = "x-data-parallel-rank";

    enum Phase { ROUTING, UPSTREAM, RELAYING, DONE }

    private final PdExchange exchange;
    private final GatewayContext gw;
    private final ChannelHandlerContext ctx;
    private final ExchangeRouting routing;
    private final HttpRequest request;
    private final Relay relay;
    private final ClientResponse client;
    private final String model;
    private final String upstreamRequestId;
    private final long firstByteTimeoutMs;
    private final long startNs;
    private final RequestTrace trace;
    private final List<EndpointState> tried = new ArrayList<>(2);
    private ByteBuf body;
    private Phase phase = Phase.ROUTING;
    private boolean sawEngineLoading;
    private String routedWhy;
    private EndpointState lastEndpoint;
    private UpstreamLeg leg;
    /** An endpoint the router counted for this leg that no UpstreamLeg has taken over yet. */
    private EndpointState heldEndpoint;
    private int heldPrefillTokens;
    private int heldDpRank = -1;
    private String decisionTier;
    private int reachableTokens = -1;
    private int predictedTokens = -1;
    private Span routeSpan;
    private Span legSpan;

    /**
     * @param body    the leg's body (this leg takes over the reference; the UpstreamLeg sends duplicates)
     */
    DecodeLeg(PdExchange exchange, GatewayContext gw, ChannelHandlerContext ctx, HttpRequest request, Relay relay, String model,
              String upstreamRequestId, long firstByteTimeoutMs, long startNs, ByteBuf body, RequestTrace trace) {
        this.exchange = exchange;
        this.gw = gw;
        this.ctx = ctx;
        this.routing = gw.routing(ctx.channel().eventLoop());
        this.request = request;
        this.relay = relay;
        this.client = relay.client();
        this.model = model;
        this.upstreamRequestId = upstreamRequestId;
        this.firstByteTimeoutMs = firstByteTimeoutMs;
        this.startNs = startNs;
        this.body = body;
        this.trace = trace;
    }

    /** Routes the leg; false when the ring is full (the leg is then ended without answering: the exchange answers). */
    boolean route() {
        phase = Phase.ROUTING;
        if (trace != null) {
            routeSpan = trace.child("kvgate.route", gw.clock().nanoTime());
        }
        RouteInputs in = exchange.decodeRouteInputs(routing.inputs()).role(Role.DECODE).needsAdmission(false).tracksPrefill(true).sendsDpRank(true);
        for (int i = 0; i < tried.size(); i++) {
            in.tried(tried.get(i));
        }
        if (routing.tryRoute(in, this)) {
            return true;
        }
        gw.metrics().shed("router_ring_full");
        release();
        phase = Phase.DONE;
        return false;
    }

    /** Starts on {@code ep}, which the routing stage already chose (and counted) for this request. */
    void startOn(EndpointState ep, String why) {
        this.routedWhy = why;
        connect(ep);
    }

    @Override
    public void onDecision(Decision d) {
        if (d.tier() != null) {
            decisionTier = d.tier();
            reachableTokens = d.reachableTokens();
            predictedTokens = d.predictedTokens();
        }
        heldPrefillTokens = d.chargedPrefillTokens();
        heldDpRank = d.dpRank();
        routedWhy = d.explanation();
        EndpointState ep = d.shed() ? null : d.endpoint(); // a decode leg is never gated by admission (needsAdmission false)
        if (routeSpan != null) {
            trace.decision(routeSpan, ep == null ? null : ep.key(), routedWhy, "decode");
            if (ep == null) {
                trace.fail(routeSpan, "no_healthy_endpoint", gw.clock().nanoTime());
            } else {
                trace.end(routeSpan, gw.clock().nanoTime());
            }
            routeSpan = null;
        }
        try {
            connect(ep);
        } catch (Throwable t) {
            exchange.abort(t);
        }
    }

    private void connect(EndpointState ep) {
        heldEndpoint = ep;
        if (phase == Phase.DONE) {
            returnHeldEndpoint(); // the exchange ended while this leg was routed
            return;
        }
        if (ep == null) {
            gw.metrics().shed("no_healthy_endpoint");
            String msg = tried.isEmpty() ? "No healthy decode endpoint for model '" + model + "'"
                : sawEngineLoading ? loadingMessage()
                : "Could not connect to any decode endpoint for model '" + model + "' (" + tried.size() + " tried)";
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, msg, "no_healthy_endpoint", true);
            return;
        }
        tried.add(ep);
        lastEndpoint = ep;
        phase = Phase.UPSTREAM;
        // A chosen DP rank goes to the engine as its header, replacing a client's own pin, if any.
        EngineRequest engineRequest = heldDpRank < 0
            ? new EngineRequest(request.method(), request.uri(), request.headers(), upstreamRequestId)
            : new EngineRequest(request.method(), request.uri(), request.headers(), upstreamRequestId, DP_RANK_HEADER,
                Integer.toString(heldDpRank));
        if (trace != null) {
            legSpan = trace.leg("kvgate.decode_leg", gw.clock().nanoTime(), ep.key(), tried.size());
            engineRequest = engineRequest.withTrace(RequestTrace.traceHeaders(legSpan)); // the engine's parent: this leg
        }
        leg = new UpstreamLeg(gw.connector(), ctx.channel().eventLoop(), ep, routing, gw.metrics(), engineRequest, body.retain(),
            UpstreamLeg.Timeouts.ofMillis(firstByteTimeoutMs, gw.config().upstream().idleTimeoutMs(),
                gw.config().limits().clientStallTimeoutMs()), this)
            .answers503WhileLoading(exchange.answers503WhileLoading()).prefillTokens(heldPrefillTokens).dpRank(heldDpRank);
        heldEndpoint = null; // the leg reports the endpoint's outcome from here on
        heldPrefillTokens = 0;
        heldDpRank = -1;
        leg.start();
    }

    private void returnHeldEndpoint() {
        EndpointState ep = heldEndpoint;
        int tokens = heldPrefillTokens;
        int rank = heldDpRank;
        heldEndpoint = null;
        heldPrefillTokens = 0;
        heldDpRank = -1;
        if (ep != null) {
            routing.prefillDone(ep, tokens, rank);
            routing.complete(ep, Outcome.RELEASED, rank);
        }
    }

    // ---- leg events ------------------------------------------------------------------------------------------

    @Override
    public void onHead(UpstreamLeg l, ResponseHead head) {
        if (phase != Phase.UPSTREAM) {
            return;
        }
        gw.metrics().timeToFirstByte(exchange.ruleName(), gw.clock().nanoTime() - startNs);
        exchange.decodeAnswered();
        if (relay.onHead(l, head, exchange.explanation(lastEndpoint, routedWhy, tried.size()))) {
            phase = Phase.RELAYING;
        }
    }

    @Override
    public void onContent(UpstreamLeg l, HttpContent content, boolean last) {
        if (phase != Phase.RELAYING) {
            content.release();
            return;
        }
        if (relay.onContent(l, content, last)) {
            finish(relay.status(), client.keepAlive());
        }
    }

    /** Read-after-write: flush what this batch wrote and read the next upstream batch once the client took it. */
    @Override
    public void onReadComplete(UpstreamLeg l) {
        if (phase != Phase.RELAYING) {
            l.read();
            return;
        }
        relay.onReadComplete(l);
    }

    @Override
    public void onAggregated(UpstreamLeg l, ResponseHead head, ByteBuf aggregated) {
        if (phase != Phase.UPSTREAM) {
            return;
        }
        relay.onAggregated(aggregated, exchange.explanation(lastEndpoint, routedWhy, tried.size()));
        finish(relay.status(), client.keepAlive());
    }

    @Override
    public void onFailure(UpstreamLeg l, LegFailure failure, Throwable cause) {
        if (l != leg || phase == Phase.DONE) {
            return;
        }
        leg = null;
        if (legSpan != null) {
            trace.fail(legSpan, failure.code(), gw.clock().nanoTime());
            legSpan = null;
        }
        boolean started = phase == Phase.RELAYING;
        switch (failure) {
            case CONNECT, ENGINE_LOADING -> retryElsewhere(failure);
            case ENDPOINT_DOWN -> {
                if (started) {
                    failMidStream(failure, "The decode leg stopped answering and was marked unhealthy");
                } else {
                    retryElsewhere(failure);
                }
            }
            case EARLY_CLOSE -> finishWithError(failure.clientStatus(), "The decode leg closed the connection before responding",
                failure.code(), false);
            case FIRST_BYTE_TIMEOUT -> finishWithError(failure.clientStatus(), "The decode leg did not answer within "
                + firstByteTimeoutMs + " ms", failure.code(), false);
            case MID_BODY, IDLE_TIMEOUT -> failMidStream(failure, failure == LegFailure.IDLE_TIMEOUT
                ? "The decode leg stopped sending for " + gw.config().upstream().idleTimeoutMs() + " ms"
                : "The decode leg failed in the middle of the response");
            case NO_PROGRESS -> failMidStream(failure, "The decode leg sent no complete event for "
                + gw.config().upstream().idleTimeoutMs() + " ms (only bytes of an unfinished one)");
            case RESPONSE_TOO_LARGE -> {
                int limit = relay.status() >= 400 ? gw.config().upstream().maxErrorBodyBytes() : gw.config().limits().maxBodyBytes();
                failMidStream(failure, "The decode leg's answer exceeds the gateway's limit of " + limit + " bytes");
            }
            case CLIENT_STALL -> {
                // The client took nothing for the stall timeout: it cannot be answered any more; free the connection.
                gw.metrics().badRequest("client_stalled");
                relay.errorCode("client_stalled");
                if (started) {
                    gw.metrics().responseIncomplete(failure.metricName()); // its head went out: counted under its status
                }
                phase = Phase.DONE;
                record(relay.status() == 0 ? 408 : relay.status());
                release();
                client.close();
                exchange.decodeEnded(false);
            }
            case INTERNAL -> exchange.abort(cause);
            case ENGINE_5XX, CANCELLED -> throw new IllegalStateException("a leg never fails with " + failure);
        }
    }

    /** Nothing reached the client: another decode endpoint while max_connect_attempts allows, else a retryable error. */
    private void retryElsewhere(LegFailure failure) {
        if (failure == LegFailure.ENGINE_LOADING) {
            sawEngineLoading = true;
        }
        if (tried.size() < gw.config().upstream().maxConnectAttempts()) {
            gw.metrics().connectRetries.increment();
            if (!route()) {
                exchange.fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
            }
            return;
        }
        finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, sawEngineLoading ? loadingMessage()
            : failure == LegFailure.ENDPOINT_DOWN ? "The decode endpoints tried for model '" + model + "' stopped answering ("
                + tried.size() + " tried)"
            : "Could not connect to any decode endpoint for model '" + model + "' (" + tried.size() + " tried)", failure.code(), true);
    }

    private String loadingMessage() {
        return "The decode engines tried for model '" + model + "' are still loading the model (" + tried.size() + " tried)";
    }

    private void failMidStream(LegFailure failure, String message) {
        if (phase != Phase.RELAYING) {
            finishWithError(failure.clientStatus(), message, failure.code(), false);
            return;
        }
        finish(relay.status(), relay.failMidStream(failure, message));
    }

    // ---- endings ---------------------------------------------------------------------------------------------

    private void finish(int status, boolean keepAlive) {
        phase = Phase.DONE;
        record(status);
        release();
        exchange.decodeEnded(keepAlive);
    }

    private void finishWithError(HttpResponseStatus st, String message, String code, boolean retryAfter) {
        if (phase == Phase.DONE) {
            return;
        }
        if (trace != null) {
            trace.error(code);
        }
        relay.errorCode(code);
        client.answerError(st, message, code, retryAfter ? gw.config().health().retryAfterSeconds() : -1,
            exchange.explanation(lastEndpoint, routedWhy, tried.size()));
        finish(st.code(), client.keepAlive());
    }

    private void record(int status) {
        relay.record(status, lastEndpoint == null ? null : lastEndpoint.key(), decisionTier, reachableTokens, predictedTokens,
            -1, null); // P/D legs are not in the routing-quality accounting (docs/routing.md)
    }

    private void release() {
        if (trace != null) {
            long now = gw.clock().nanoTime();
            if (legSpan != null) {
                trace.end(legSpan, now);
                legSpan = null;
            }
            if (routeSpan != null) {
                trace.fail(routeSpan, "client_gone", now);
                routeSpan = null;
            }
        }
        if (body != null && body.refCnt() > 0) {
            body.release();
        }
        body = null;
        client.discard();
    }

    /** Abandons the leg without answering the client (the exchange answers): cancels the engine call. */
    void abandon() {
        if (phase == Phase.DONE) {
            return;
        }
        phase = Phase.DONE;
        if (leg != null) {
            leg.cancel();
            leg = null;
        }
        returnHeldEndpoint();
        release();
    }

    /** The client went away: cancel the engine's work and write the request's line (499). */
    void onClientGone() {
        if (phase == Phase.DONE) {
            return;
        }
        gw.metrics().clientDisconnectsMidRequest.increment();
        boolean routed = phase != Phase.ROUTING;
        phase = Phase.DONE;
        if (leg != null) {
            leg.cancel();
            leg = null;
        }
        relay.errorCode("client_gone");
        if (routed) {
            record(499);
        } else {
            relay.logAccess(499, null, decisionTier, reachableTokens, predictedTokens, null);
        }
        release(); // while routing, connect() returns the endpoint when the decision arrives
    }

    /** The drain deadline passed: a live stream gets its error frame and {@code [DONE]}; anything earlier a 503. */
    void endDrained() {
        if (phase == Phase.DONE) {
            return;
        }
        if (leg != null) {
            leg.cancel();
            leg = null;
        }
        String msg = "The gateway is shutting down; retry the request.";
        relay.errorCode("shutting_down");
        if (phase == Phase.RELAYING) {
            gw.metrics().responseIncomplete(GatewayMetrics.INCOMPLETE_SHUTTING_DOWN);
            client.endStreamWithError(msg, "shutting_down");
            finish(relay.status(), false);
            return;
        }
        client.answerErrorAndClose(HttpResponseStatus.SERVICE_UNAVAILABLE, msg, "shutting_down");
        finish(503, false);
    }

    /** The watchdog: the exchange failed inside; the engine call is torn down without charging the endpoint. */
    void abortInternal() {
        if (phase == Phase.DONE) {
            return;
        }
        phase = Phase.DONE;
        if (leg != null) {
            leg.abortInternal();
            leg = null;
        }
        returnHeldEndpoint();
        relay.errorCode(LegFailure.INTERNAL.code());
        release();
    }

    /** The decode engine's response head went to the client (its status can no longer change). */
    boolean responseStarted() {
        return phase == Phase.RELAYING || (phase == Phase.UPSTREAM && leg != null && leg.answered());
    }

    boolean finished() {
        return phase == Phase.DONE;
    }
}
