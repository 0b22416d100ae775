package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.relay.ClientResponse;
import io.kvgate.dataplane.relay.Relay;
import io.kvgate.dataplane.relay.StreamStitch;
import io.kvgate.dataplane.failover.FailoverRequest;
import io.kvgate.dataplane.failover.MigrationCause;
import io.kvgate.control.config.FailoverConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.request.RequestIds;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import io.kvgate.dataplane.quality.LossCause;
import io.kvgate.dataplane.exchange.ActiveExchange;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Admission;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.request.PriorityInputs;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.SessionKeys;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.upstream.LegFailure;
import io.kvgate.dataplane.upstream.LegListener;
import io.kvgate.dataplane.upstream.UpstreamLeg;
import io.kvgate.dataplane.wire.EngineRequest;
import io.kvgate.dataplane.wire.ResponseHead;
import io.kvgate.control.config.RuleConfig;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.ArrayList;
import java.util.List;

/**
 * One client request of a plain rule (no prefill/decode split): routed on the routing stage, sent through one
 * {@link UpstreamLeg} (re-routed on a connect failure) and carried back to the client by one {@link Relay}, on the
 * client connection's event loop. P/D requests have their own orchestrator ({@code pd.PdExchange}) over the same
 * two parts.
 *
 * <p><b>Phases</b> ({@link Phase}): {@code ROUTING} (waiting for the decision) → {@code UPSTREAM} (a leg is live, the
 * client has nothing yet) → {@code RELAYING} (the response head went to the client) → {@code DONE}. A connect failure
 * re-routes to another endpoint (nothing reached the client; the body is still whole, the leg sends duplicates).
 *
 * <p><b>Relay</b> (the client-facing writes live in {@link ClientResponse}): streams go to the client chunk by chunk
 * as the engine produces them, bytes never re-serialized; SSE is framed by {@link SseFramer} (partial events held back). The next upstream read waits until the client's
 * write of the previous batch completed ({@link UpstreamLeg#readAfter}). Error answers (and an answer the rule rewrites,
 * which must lose {@code kv_transfer_params}: {@link Relay}) are aggregated within a bound and re-emitted in the OpenAI shape; over
 * the bound the client gets a 502 naming the leg, never a truncated body. Once a stream has started, a failure is
 * one {@code data: {"error":…}} event plus {@code data: [DONE]}: a silent close looks like success to the SDKs.
 *
 * <p><b>Watchdog</b>: an exception anywhere in the exchange (routing decision, leg callbacks) ends it with a 500 or
 * an error frame, returns the endpoint's load and frees the connection ({@link #abort}); it never hangs.
 *
 * <p>Threading: event-loop only; the routing decision arrives on the event loop too ({@link #onDecision(Decision)}, delivered in
 * a batch by the loop's router port).
 */
public final class PlainExchange extends LiveExchanges.Entry implements RouteCallback, LegListener, ActiveExchange,
    HedgedFirstToken.Host {
    /** vLLM's and SGLang's DP rank pin (vLLM OpenAIServing._get_data_parallel_rank; SGLang reads it before the body). */
    static final String DP_RANK_HEADER = "x-data-parallel-rank";

    /** Where the exchange is; see the class comment. */
    public enum Phase { ROUTING, UPSTREAM, RELAYING, DONE }

    private final GatewayContext gw;
    private final ChannelHandlerContext ctx;
    private final ExchangeOwner owner;
    private final HttpRequest request;
    private final ExchangeRouting routing;
    private final String model;
    private final Rule rule;
    /**
     * The LoRA adapter the client's model names on this rule (kv_exact hashes its blocks under it), or null: any
     * client name of the rule that is not one of its base models is an adapter (configured or discovered).
     */
    private final String lora;
    /** The sorted ids of the only endpoints serving {@link #lora} (a discovered adapter), or null: any endpoint. */
    private int[] servingEndpoints;
    private final String ruleName;
    private final String requestId;
    private final boolean explain;
    private final long startNs;
    private final List<EndpointState> tried = new ArrayList<>(2);
    /** An endpoint tried for this request answered that its model is still loading (the client's error says so). */
    private boolean sawEngineLoading;
    private ByteBuf body;
    private final String upstreamRequestId;
    private final long firstByteTimeoutMs;
    private RoutingInputs inputs = RoutingInputs.NONE;
    /** Admission control's class of the request, resolved on first use (I/O thread). */
    private PriorityClass priority;
    private boolean listed;

    private String routedWhy;
    private long routedAtNs;
    private long dispatchNs;

    private Phase phase = Phase.ROUTING;
    private boolean clientGone;
    /** An endpoint the router counted for this request that no leg has taken over yet (the watchdog returns it). */
    private EndpointState heldEndpoint;
    /** Uncached prompt tokens the router charged {@link #heldEndpoint} (kv_exact), handed to the leg or returned. */
    private int heldPrefillTokens;
    /** The DP rank of {@link #heldEndpoint} the router pinned the request to, -1 for none. */
    private int heldDpRank = -1;
    private EndpointState lastEndpoint;
    private UpstreamLeg leg;
    /** Carries the engine's answer to the client and measures it; {@link #client} is its writer. */
    private final Relay relay;
    private final ClientResponse client;
    private long sentAtNs;
    /** The request's trace when it is sampled, else null (then none of the spans below exist). */
    private RequestTrace trace;
    /** The routing decision being waited for (admission wait included), and the engine request in progress. */
    private Span routeSpan;
    private Span legSpan;
    /** When admission control held the request (routing thread's writes, read after the decision): 0 when it did not. */
    private long admissionQueuedAtNs;
    private long admissionAdmittedAtNs;
    /** The routing decision's tier and the prompt tokens found cached on its endpoint ({@link #decision}). */
    private String decisionTier;
    private int reachableTokens = -1;
    private int predictedTokens = -1;
    private int confirmedTokens = -1;
    private LossCause routeLoss;
    /** The hedged-first-token race of the first leg (rules[].hedge, interactive requests), or null: not hedged. */
    private HedgedFirstToken hedging;
    /**
     * Mid-stream failover (issue #41; {@code rules[].failover}): the rule's settings, the request's side of it (null:
     * the rule has none), the stream's stitch (null: none), the migrations so far, the cause of the one in progress
     * (null: none: set from the failure until the next engine's head arrives) and the endpoints left, in order.
     */
    private final FailoverConfig failoverConfig;
    private FailoverRequest failover;
    private StreamStitch stitch;
    private int migrations;
    private MigrationCause migrating;
    private StringBuilder migratedFrom;
    /** When a started stream's engine was found failed, until the continuing engine's first output (0: none pending). */
    private long resumeFromNs;

    public PlainExchange(GatewayContext gw, ChannelHandlerContext ctx, ExchangeOwner owner, HttpRequest request, ByteBuf body,
                         RequestFields fields, Rule rule, String requestId, boolean explain, long startNs) {
        this.gw = gw;
        this.ctx = ctx;
        this.owner = owner;
        this.request = request;
        this.body = body;
        this.routing = gw.routing(ctx.channel().eventLoop());
        this.relay = new Relay(ctx, request, requestId, gw.configSupplier(), gw.metrics(), gw.clock(), gw.accessLog(),
            owner.accessRecord(), rule.name(), fields.model, startNs, fields.answerRewrite).accountingTo(gw.quality());
        this.client = relay.client();
        this.model = fields.model;
        this.rule = rule;
        this.lora = rule.config().entryFor(fields.model) == null ? fields.model : null;
        this.ruleName = rule.name();
        this.requestId = requestId;
        this.explain = explain || rule.config().explain();
        this.startNs = startNs;
        this.firstByteTimeoutMs = gw.config().upstream().firstByteTimeoutMs();
        // Two clients may send the same X-Request-Id: the engine gets a gateway-unique one, the client its own back.
        this.upstreamRequestId = requestId.equals(request.headers().get("x-request-id")) ? RequestIds.generate() : requestId;
        this.failoverConfig = rule.config().failover();
    }

    /**
     * Mid-stream failover: reads the request once (only on a rule that has it) and, unless the request can never be
     * continued, stitches its stream so a failed engine's generation can go on elsewhere.
     */
    private void setUpFailover() {
        if (failoverConfig == null || !failoverConfig.enabled() || body == null) {
            return;
        }
        byte[] bytes = new byte[body.readableBytes()];
        body.getBytes(body.readerIndex(), bytes);
        boolean chat = request.uri().startsWith("/v1/chat/");
        failover = FailoverRequest.of(bytes, chat, request.headers().get(FailoverRequest.OPT_OUT_HEADER),
            rule.profile().continuesAssistantMessage());
        if (failover.refusal() == null) {
            stitch = new StreamStitch(chat);
            client.stitch(stitch);
        }
    }

    /** The request's trace (null: not sampled): route, leg and connect spans; the engine gets the leg's context. */
    public PlainExchange withTrace(RequestTrace t) {
        this.trace = t;
        relay.withTrace(t);
        return this;
    }

    /**
     * The body for one attempt (the leg takes over the reference): the client's, or, on a llama.cpp session rule with
     * {@code session.pin_slot}, the client's plus the session's slot ({@link SlotPin}), within the chosen endpoint's
     * own slot count when the health checker read it ({@code GET /slots}), else within {@code session.slots}.
     */
    private ByteBuf legBody() {
        RuleConfig.SessionConfig s = rule.config().session();
        if (s.pinSlot() && inputs.sessionKey() != null && rule.config().policyKind() == RuleConfig.Policy.SESSION) {
            int known = lastEndpoint == null ? 0 : lastEndpoint.facts().engineSlots();
            return SlotPin.withIdSlot(body, SlotPin.slotOf(inputs.sessionKey(), known > 0 ? known : s.slots()), ctx.alloc());
        }
        return body.retain();
    }

    /** What KV-aware and affinity policies route on (computed by the I/O thread before the ring). */
    public PlainExchange withInputs(RoutingInputs in) {
        this.inputs = in;
        return this;
    }

    /**
     * The request's routing restriction and response warning from the front door: the sorted ids of the only
     * endpoints serving its discovered LoRA adapter (null: any endpoint), and the {@code X-Kvgate-Warning} value
     * (null: none).
     */
    public PlainExchange withRequestExtras(int[] serving, String warning) {
        this.servingEndpoints = serving;
        client.warning(warning);
        return this;
    }

    public Phase phase() {
        return phase;
    }

    // ---- routing --------------------------------------------------------------------------------------------

    /** This request's routing inputs, filled into the loop's reused value for one publish. */
    private RouteInputs routeInputs() {
        if (priority == null) {
            priority = PriorityInputs.priority(request.headers(), rule.config().admission());
        }
        RouteInputs in = routing.inputs()
            .rule(rule)
            .role(Role.ANY)
            .promptTokens(routedPromptTokens())
            .cacheSalt(inputs.cacheSalt())
            .lora(lora)
            .servingEndpoints(servingEndpoints)
            .sessionKeyHash(SessionKeys.hash(inputs.sessionKey()))
            .textPrefixKey(inputs.textPrefixKey())
            // A traced request is explained too: the policy's reason goes on its route span (the header still needs asking).
            .explain(explain || trace != null)
            .priority(priority)
            .tenant(PriorityInputs.tenant(request.headers()))
            // The leg hands the charge back at the engine's first response bytes (or its end), see UpstreamLeg#prefillTokens.
            .tracksPrefill(true)
            // The rank goes to the engine as X-data-parallel-rank (vLLM and SGLang pin the request to it).
            .sendsDpRank(true);
        for (int i = 0; i < tried.size(); i++) {
            in.tried(tried.get(i));
        }
        return in;
    }

    /**
     * The prompt tokens the policy routes on: the request's, and for a continuation (mid-stream failover) the request's
     * followed by the generated tokens' ids when the engine reported them, so kv_exact prefers the endpoint holding
     * most of prompt + generated; without ids the prompt's blocks alone route it.
     */
    private int[] routedPromptTokens() {
        int[] p = inputs.promptTokens();
        int[] generated = stitch == null || migrations == 0 ? null : stitch.generatedIds();
        if (p == null || p.length == 0 || generated == null) {
            return p;
        }
        int[] all = java.util.Arrays.copyOf(p, p.length + generated.length);
        System.arraycopy(generated, 0, all, p.length, generated.length);
        return all;
    }

    /**
     * The routing decision, on the event loop: admission control's refusal (429 + Retry-After), or an endpoint with
     * what the router charged it and pinned the request to (or none: 503).
     */
    @Override
    public void onDecision(Decision d) {
        if (d.waitedForAdmission()) {
            this.admissionQueuedAtNs = d.admissionQueuedAtNs();
            this.admissionAdmittedAtNs = d.admissionAdmittedAtNs();
        }
        if (d.shed()) {
            onShed(d.rule(), d.explanation());
            return;
        }
        if (d.tier() != null) {
            this.decisionTier = d.tier();
            this.reachableTokens = d.reachableTokens();
            this.predictedTokens = d.predictedTokens();
            this.confirmedTokens = d.confirmedTokens();
            this.routeLoss = d.routeLoss();
        }
        this.heldPrefillTokens = d.chargedPrefillTokens();
        this.heldDpRank = d.dpRank();
        this.routedWhy = d.explanation();
        onDecision(d.endpoint());
    }

    /** Admission control shed the request (queue full, or it waited admission.max_wait_ms): 429 + Retry-After. */
    private void onShed(Rule decidedBy, String message) {
        try {
            gw.metrics().stages.recordNs(Stage.ROUTE_QUEUE, gw.clock().nanoTime() - routedAtNs);
            endRouteSpan(null, message, "rate_limit_exceeded");
            if (phase == Phase.DONE) {
                return; // the client left while the request waited
            }
            gw.metrics().shed("admission");
            relay.errorCode("rate_limit_exceeded");
            client.answerError(HttpResponseStatus.TOO_MANY_REQUESTS, message, "rate_limit_exceeded",
                Admission.retryAfterSeconds(decidedBy.config().admission()), explanation());
            finish(429, client.keepAlive());
        } catch (Throwable t) {
            abort(t);
        }
    }

    // ---- start -----------------------------------------------------------------------------------------------

    /** Starts routing a plain rule's request; on a full ring the request is shed at once with 503. */
    public void start() {
        try {
            listed = true;
            setUpFailover();
            gw.live().add(ctx.channel().eventLoop(), this);
            routedAtNs = gw.clock().nanoTime();
            dispatchNs = routedAtNs;
            startRouteSpan();
            if (!routing.tryRoute(routeInputs(), this)) {
                gw.metrics().shed("router_ring_full");
                finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
            }
        } catch (Throwable t) {
            abort(t);
        }
    }

    private void onDecision(EndpointState ep) {
        heldEndpoint = ep;
        try {
            gw.metrics().stages.recordNs(Stage.ROUTE_QUEUE, gw.clock().nanoTime() - routedAtNs);
            endRouteSpan(ep, routedWhy, ep == null ? "no_healthy_endpoint" : null);
            if (phase == Phase.DONE) {
                returnHeldEndpoint(); // the client left (or the exchange ended) while routing
                return;
            }
            if (ep == null && migrating != null) {
                gw.metrics().streamMigration(ruleName, migrating.label, "failed");
                migrating = null;
            }
            if (ep == null) {
                gw.metrics().shed("no_healthy_endpoint");
                String msg = tried.isEmpty()
                    ? "No healthy endpoint is available for model '" + model + "'" + (routedWhy == null ? "" : " (" + routedWhy + ")")
                    : sawEngineLoading ? loadingMessage()
                    : "Could not connect to any endpoint for model '" + model + "' (" + tried.size() + " tried)";
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
                legSpan = trace.leg("kvgate.upstream", gw.clock().nanoTime(), ep.key(), tried.size());
                engineRequest = engineRequest.withTrace(RequestTrace.traceHeaders(legSpan)); // the engine's parent: this leg
            }
            // a leg that continues a migrated stream is not hedged: its first token is not the answer's
            hedging = tried.size() == 1 && migrations == 0 ? hedgingFor() : null;
            leg = newLeg(ep, engineRequest, heldPrefillTokens, heldDpRank, hedging != null ? hedging : this);
            heldEndpoint = null; // the leg reports the endpoint's outcome from here on
            heldPrefillTokens = 0;
            heldDpRank = -1;
            if (hedging != null) {
                hedging.start(leg);
            } else {
                leg.start();
            }
        } catch (Throwable t) {
            abort(t);
        }
    }

    private UpstreamLeg newLeg(EndpointState ep, EngineRequest engineRequest, int prefillTokens, int dpRank, LegListener listener) {
        var limits = gw.config().limits();
        long idleMs = gw.config().upstream().idleTimeoutMs();
        if (stitch != null && failoverConfig.stallMs() > 0) {
            idleMs = Math.min(idleMs, failoverConfig.stallMs()); // failover.stall_ms: a silent engine is left sooner
        }
        return new UpstreamLeg(gw.connector(), ctx.channel().eventLoop(), ep, routing, gw.metrics(), engineRequest, legBody(),
            UpstreamLeg.Timeouts.ofMillis(firstByteTimeoutMs, idleMs, limits.clientStallTimeoutMs()),
            listener).answers503WhileLoading(rule.profile().answers503WhileLoading()).prefillTokens(prefillTokens)
            .dpRank(dpRank);
    }

    // ---- hedged first token (docs/hedging.md; the race itself is HedgedFirstToken's) ---------------------------

    /** The race for this request's first leg when its rule hedges and it is interactive, else null. */
    private HedgedFirstToken hedgingFor() {
        RuleConfig.HedgeConfig h = rule.config().hedge();
        if (!h.enabled() || priority != PriorityClass.INTERACTIVE) {
            return null;
        }
        int[] prompt = inputs.promptTokens();
        // A rule that does not tokenize prompts: about four bytes of request body per token.
        int promptTokens = prompt != null ? prompt.length : body.readableBytes() / 4;
        return new HedgedFirstToken(this, ctx.channel().eventLoop(), routing, gw.metrics(), ruleName,
            gw.hedgeBudgets().forRule(ruleName, h.windowMs()), h, promptTokens);
    }

    @Override
    public boolean awaitingFirstToken() {
        return phase == Phase.UPSTREAM;
    }

    @Override
    public RouteInputs hedgeRouteInputs() {
        return routeInputs();
    }

    @Override
    public UpstreamLeg hedgeLeg(EndpointState ep, int prefillTokens, int dpRank, LegListener listener) {
        tried.add(ep);
        // Its own engine request id (two legs of one request on two engines), without the primary's trace context.
        EngineRequest engineRequest = dpRank < 0
            ? new EngineRequest(request.method(), request.uri(), request.headers(), RequestIds.generate())
            : new EngineRequest(request.method(), request.uri(), request.headers(), RequestIds.generate(), DP_RANK_HEADER,
                Integer.toString(dpRank));
        return newLeg(ep, engineRequest, prefillTokens, dpRank, listener);
    }

    @Override
    public void adoptLeg(UpstreamLeg l) {
        leg = l;
        lastEndpoint = l.endpoint();
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
    public void onSent(UpstreamLeg l, long connectNs) {
        long now = gw.clock().nanoTime();
        sentAtNs = now;
        if (connectNs > 0) {
            gw.metrics().stages.recordNs(Stage.UPSTREAM_CONNECT, connectNs);
            if (legSpan != null) {
                trace.end(trace.childOf(legSpan, "kvgate.connect", now - connectNs, SpanKind.INTERNAL), now);
            }
        }
        if (tried.size() == 1) {
            // Everything between the last request byte and the engine's socket, except opening a connection.
            gw.metrics().stages.recordNs(Stage.GATEWAY_ADDED, now - dispatchNs - connectNs);
        }
    }

    @Override
    public void onHead(UpstreamLeg l, ResponseHead head) {
        if (phase != Phase.UPSTREAM || l != leg) {
            return;
        }
        if (migrating != null && relay.relaying()) {
            onContinuationHead(l, head);
            return;
        }
        if (migrating != null) {
            gw.metrics().streamMigration(ruleName, migrating.label, "ok"); // a non-streamed request retried whole
            migrating = null;
        }
        long now = gw.clock().nanoTime();
        gw.metrics().timeToFirstByte(ruleName, now - startNs);
        gw.metrics().stages.recordNs(Stage.UPSTREAM_FIRST_BYTE, now - sentAtNs);
        if (relay.onHead(l, head, explanation())) {
            phase = Phase.RELAYING;
        }
    }

    /**
     * The head of the engine that continues a started stream: a stream goes on (no second head reaches the client);
     * anything else (the engine refused the continuation) ends the client's stream with an error frame.
     */
    private void onContinuationHead(UpstreamLeg l, ResponseHead head) {
        MigrationCause cause = migrating;
        migrating = null;
        if (head.status() < 300 && head.eventStream()) {
            gw.metrics().streamMigration(ruleName, cause.label, "ok");
            phase = Phase.RELAYING;
            return;
        }
        gw.metrics().streamMigration(ruleName, cause.label, "failed");
        leg = null;
        l.cancel();
        finish(relay.status(), relay.failMidStream(LegFailure.MID_BODY, "The stream's engine failed and the engine that"
            + " was to continue it answered " + head.status()));
    }

    /** The {@code X-Kvgate-Route} value, or null when the request did not ask for it. */
    private String explanation() {
        if (!explain) {
            return null;
        }
        String hedged = hedging == null ? null : hedging.describe();
        return "endpoint=" + (lastEndpoint == null ? "none" : lastEndpoint.key()) + "; rule=" + ruleName
            + (routedWhy == null ? "" : "; " + routedWhy) + "; attempts=" + tried.size() + (hedged == null ? "" : "; " + hedged)
            + (migratedFrom == null ? "" : "; migrated_from=" + migratedFrom);
    }

    @Override
    public void onContent(UpstreamLeg l, HttpContent content, boolean last) {
        if (phase != Phase.RELAYING || l != leg) {
            content.release();
            return;
        }
        boolean complete = relay.onContent(l, content, last);
        if (resumeFromNs != 0 && stitch.legHasOutput()) {
            gw.metrics().streamResumeGap(ruleName, gw.clock().nanoTime() - resumeFromNs);
            resumeFromNs = 0;
        }
        if (stitch != null && stitch.wantsContinuation()) {
            // The engine sent an error event or ended the stream before it finished: held back from the client.
            MigrationCause cause = stitch.engineError() ? MigrationCause.ENGINE_ERROR : MigrationCause.RESET;
            String why = stitch.engineError() ? "The engine failed in the middle of the response: " + stitch.engineErrorText()
                : "The engine ended the stream before it finished";
            leg = null;
            if (!complete) {
                l.cancel(); // its [DONE] and anything after the error are not wanted
            }
            if (!tryMigrate(cause, l.endpoint())) {
                finish(relay.status(), relay.failMidStream(LegFailure.MID_BODY, why));
            }
            return;
        }
        if (complete) {
            finish(relay.status(), client.keepAlive());
        }
    }

    /** Read-after-write: flush what this batch wrote and read the next upstream batch once the client took it. */
    @Override
    public void onReadComplete(UpstreamLeg l) {
        if (l != leg) {
            return;
        }
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
        relay.onAggregated(aggregated, explanation());
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
        MigrationCause moveCause = failover == null ? null : causeOf(failure, started);
        if (moveCause != null && tryMigrate(moveCause, l.endpoint())) {
            return;
        }
        switch (failure) {
            case CONNECT, ENGINE_LOADING -> retryElsewhere(failure, cause);
            case ENDPOINT_DOWN -> {
                if (started) {
                    failMidStream(failure, "The engine stopped answering and was marked unhealthy");
                    return;
                }
                retryElsewhere(failure, cause);
            }
            case EARLY_CLOSE -> {
                finishWithError(failure.clientStatus(), "The engine closed the connection before responding", failure.code(), false);
            }
            case FIRST_BYTE_TIMEOUT -> finishWithError(failure.clientStatus(), "The engine did not answer within "
                + firstByteTimeoutMs + " ms", failure.code(), false);
            case MID_BODY, IDLE_TIMEOUT -> {
                String why = failure == LegFailure.IDLE_TIMEOUT
                    ? "The engine stopped sending for " + gw.config().upstream().idleTimeoutMs() + " ms"
                    : "The engine failed in the middle of the response";
                failMidStream(failure, why);
            }
            case NO_PROGRESS -> failMidStream(failure, "The engine sent no complete event for "
                + gw.config().upstream().idleTimeoutMs() + " ms (only bytes of an unfinished one)");
            case RESPONSE_TOO_LARGE -> {
                int limit = relay.status() >= 400 ? gw.config().upstream().maxErrorBodyBytes() : gw.config().limits().maxBodyBytes();
                failMidStream(failure, "The engine's answer exceeds the gateway's limit of " + limit + " bytes");
            }
            case CLIENT_STALL -> {
                // The client took nothing for the stall timeout: it cannot be answered any more; free the connection.
                gw.metrics().badRequest("client_stalled");
                relay.errorCode("client_stalled");
                if (phase == Phase.RELAYING) {
                    gw.metrics().responseIncomplete(failure.metricName()); // its head went out: counted under its status
                }
                phase = Phase.DONE;
                record(relay.status() == 0 ? 408 : relay.status());
                release();
                client.close();
                owner.onExchangeDone(false);
            }
            case INTERNAL -> abort(cause);
            case ENGINE_5XX, CANCELLED -> throw new IllegalStateException("a leg never fails with " + failure);
        }
    }

    /**
     * Which failures mid-stream failover acts on, by whether this leg's head had arrived: an engine that closed or
     * timed out before answering (the request goes again whole, or the continuation goes on elsewhere), a connection
     * lost or an endpoint found down mid-answer, and silence ({@code stall_ms}, or the idle timeout). Connect
     * failures are the connect retries' (the engine saw nothing).
     */
    private static MigrationCause causeOf(LegFailure failure, boolean headArrived) {
        return switch (failure) {
            case EARLY_CLOSE, FIRST_BYTE_TIMEOUT -> MigrationCause.CONNECT_FAILED;
            case MID_BODY -> MigrationCause.RESET;
            case ENDPOINT_DOWN -> headArrived ? MigrationCause.RESET : null;
            case IDLE_TIMEOUT, NO_PROGRESS -> MigrationCause.STALL;
            default -> null;
        };
    }

    /**
     * Mid-stream failover: continues the request on another endpoint chosen by the rule's policy (the failed one
     * excluded) — a started stream with the original prompt plus what was generated and the remaining budget
     * ({@link FailoverRequest#continuation}), a request that has not answered yet whole. Returns false when it cannot
     * (refused, budget used, no continuation form): the caller ends the request as it would without failover. Every
     * decision is counted in {@code kvgate_stream_migrations_total}.
     */
    private boolean tryMigrate(MigrationCause cause, EndpointState failed) {
        boolean midStream = relay.relaying();
        String refusal = failover.refusal();
        if (refusal == null && midStream) {
            refusal = !client.sse() ? "not_a_stream" : stitch.toolCallOpen() ? "tool_call" : stitch.finished() ? "finished" : null;
        }
        if (refusal != null) {
            gw.metrics().streamMigration(ruleName, cause.label, "refused");
            return false;
        }
        if (migrations >= failoverConfig.maxMigrations()) {
            gw.metrics().streamMigration(ruleName, cause.label, "exhausted");
            return false;
        }
        if (midStream) {
            byte[] next = failover.continuation(stitch.generatedText(), stitch.promptIds(), stitch.generatedIds(),
                stitch.generatedTokens());
            if (next == null) {
                gw.metrics().streamMigration(ruleName, cause.label, "refused");
                return false;
            }
            client.continueOnNextLeg();
            if (resumeFromNs == 0) {
                resumeFromNs = gw.clock().nanoTime(); // kept across a continuation that fails before its first output
            }
            if (body != null && body.refCnt() > 0) {
                body.release();
            }
            body = io.netty.buffer.Unpooled.wrappedBuffer(next);
        }
        migrations++;
        migratedFrom = (migratedFrom == null ? new StringBuilder() : migratedFrom.append(',')).append(failed.key());
        owner.accessRecord().migratedFrom = migratedFrom.toString();
        migrating = cause;
        tried.clear();
        tried.add(failed); // the policy chooses again, without the endpoint that failed
        phase = Phase.ROUTING;
        routedAtNs = gw.clock().nanoTime();
        startRouteSpan();
        if (!routing.tryRoute(routeInputs(), this)) {
            gw.metrics().streamMigration(ruleName, cause.label, "failed");
            migrating = null;
            gw.metrics().shed("router_ring_full");
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
        }
        return true;
    }

    /**
     * The endpoint processed nothing the client has seen (refused, loading, or found down before the response
     * started): the request goes to another endpoint while {@code upstream.max_connect_attempts} allows, else the
     * client gets a retryable error naming why.
     */
    private void retryElsewhere(LegFailure failure, Throwable cause) {
        if (failure == LegFailure.ENGINE_LOADING) {
            sawEngineLoading = true;
        }
        if (tried.size() < gw.config().upstream().maxConnectAttempts()) {
            gw.metrics().connectRetries.increment();
            phase = Phase.ROUTING;
            routedAtNs = gw.clock().nanoTime();
            startRouteSpan();
            if (routing.tryRoute(routeInputs(), this)) {
                return;
            }
            gw.metrics().shed("router_ring_full");
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
            return;
        }
        if (sawEngineLoading) {
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, loadingMessage(), failure.code(), true);
        } else if (cause instanceof io.netty.channel.ConnectTimeoutException) {
            finishWithError(HttpResponseStatus.GATEWAY_TIMEOUT, "Connecting to the engines for model '" + model
                + "' timed out (" + tried.size() + " tried)", "upstream_connect_timeout", true);
        } else if (failure == LegFailure.ENDPOINT_DOWN) {
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "The engines tried for model '" + model
                + "' stopped answering (" + tried.size() + " tried)", failure.code(), true);
        } else {
            finishWithError(HttpResponseStatus.SERVICE_UNAVAILABLE, "Could not connect to any endpoint for model '"
                + model + "' (" + tried.size() + " tried)", failure.code(), true);
        }
    }

    private String loadingMessage() {
        return "The engines tried for model '" + model + "' are still loading the model (" + tried.size() + " tried)";
    }

    private void failMidStream(LegFailure failure, String message) {
        if (!relay.relaying()) {
            finishWithError(failure.clientStatus(), message, failure.code(), false);
            return;
        }
        finish(relay.status(), relay.failMidStream(failure, message));
    }

    // ---- endings ---------------------------------------------------------------------------------------------

    private void finish(int st, boolean keepAlive) {
        phase = Phase.DONE;
        record(st);
        release();
        owner.onExchangeDone(keepAlive);
    }

    private void finishWithError(HttpResponseStatus st, String message, String code, boolean retryAfter) {
        if (phase == Phase.DONE) {
            return;
        }
        if (relay.relaying()) {
            // A continuation found no engine: the client's stream is open, it ends with an error frame.
            if (trace != null) {
                trace.error(code);
            }
            finish(relay.status(), relay.failMidStream(LegFailure.MID_BODY, message));
            return;
        }
        if (trace != null) {
            trace.error(code);
        }
        relay.errorCode(code);
        client.answerError(st, message, code, retryAfter ? gw.config().health().retryAfterSeconds() : -1, explanation());
        finish(st.code(), client.keepAlive());
    }

    /** Records the answer (metrics, access log, trace outcome) with the routing decision it had. */
    private void record(int st) {
        if (hedging != null && hedging.hedgeEndpoint() != null) {
            owner.accessRecord().hedgeEndpoint = hedging.hedgeEndpoint().key();
        }
        relay.record(st, endpointKey(), decisionTier, reachableTokens, predictedTokens, confirmedTokens, routeLoss);
    }

    private String endpointKey() {
        return lastEndpoint == null ? null : lastEndpoint.key();
    }

    private void release() {
        if (hedging != null) {
            hedging.close(); // a leg still racing is cancelled
        }
        if (trace != null) {
            long now = gw.clock().nanoTime();
            if (legSpan != null) {
                trace.end(legSpan, now);
                legSpan = null;
            }
            if (routeSpan != null) {
                trace.fail(routeSpan, "client_gone", now); // the client left while the request was routed
                routeSpan = null;
            }
        }
        if (listed) {
            gw.live().remove(this);
            listed = false;
        }
        if (body != null && body.refCnt() > 0) {
            body.release();
        }
        body = null;
        client.discard();
    }

    private void startRouteSpan() {
        if (trace != null) {
            routeSpan = trace.child("kvgate.route", routedAtNs);
        }
    }

    /** The decision arrived (or admission shed the request: {@code failed} names why). */
    private void endRouteSpan(EndpointState ep, String why, String failed) {
        if (routeSpan != null) {
            trace.decision(routeSpan, ep == null ? null : ep.key(), why, "any");
            if (admissionAdmittedAtNs != 0) {
                trace.stageUnder(routeSpan, "kvgate.admission_wait", admissionQueuedAtNs, admissionAdmittedAtNs);
                admissionAdmittedAtNs = 0;
            }
            long now = gw.clock().nanoTime();
            if (failed != null) {
                trace.fail(routeSpan, failed, now);
            } else {
                trace.end(routeSpan, now);
            }
            routeSpan = null;
        }
    }

    /**
     * The watchdog: something threw inside this exchange. It ends now, whatever it was doing: the leg (if any) is
     * torn down without charging the endpoint, the client gets a 500 (or an error frame on a started stream) and
     * the connection is closed, so nothing is left half-owned.
     */
    void abort(Throwable t) {
        if (phase == Phase.DONE) {
            return;
        }
        phase = Phase.DONE;
        Log.error("exchange failed inside the gateway (answered 500, connection closed): " + t);
        relay.errorCode(LegFailure.INTERNAL.code());
        try {
            if (leg != null) {
                leg.abortInternal();
                leg = null;
            }
            returnHeldEndpoint();
            if (!clientGone) {
                if (!relay.relaying()) {
                    client.answerErrorAndClose(HttpResponseStatus.INTERNAL_SERVER_ERROR,
                        "The gateway failed while handling this request.", LegFailure.INTERNAL.code());
                } else {
                    client.endStreamWithError("The gateway failed while relaying this stream.", LegFailure.INTERNAL.code());
                    client.close();
                    gw.metrics().responseIncomplete(LegFailure.INTERNAL.metricName());
                }
            }
            record(500);
        } catch (Throwable again) {
            client.close();
        } finally {
            release();
            if (!clientGone) {
                owner.onExchangeDone(false);
            }
        }
    }

    /** The client went away: cancel the engine's work (closing the connection aborts the request there). */
    @Override
    public void onClientGone() {
        if (phase == Phase.DONE || clientGone) {
            return;
        }
        clientGone = true;
        gw.metrics().clientDisconnectsMidRequest.increment();
        boolean routing = phase == Phase.ROUTING;
        phase = Phase.DONE;
        if (leg != null) {
            leg.cancel();
            leg = null;
        }
        relay.errorCode("client_gone");
        if (!routing) {
            record(499);
        } else {
            relay.logAccess(499, endpointKey(), decisionTier, reachableTokens, predictedTokens, routeLoss); // counted nowhere else, but a request the client sent all the same
        }
        // While routing, run() returns the endpoint when the decision arrives.
        release();
    }

    /** The health probe found {@code ep} down: a leg waiting on it fails over (or, once relaying, ends at once). */
    @Override
    protected void onEndpointDown(EndpointState ep) {
        UpstreamLeg l = leg;
        if (l != null && l.endpoint() == ep && (phase == Phase.UPSTREAM || phase == Phase.RELAYING)) {
            l.failFromListener(LegFailure.ENDPOINT_DOWN);
        }
        if (hedging != null && phase == Phase.UPSTREAM) {
            hedging.onEndpointDown(ep);
        }
    }

    /**
     * {@code ctl drain ENDPOINT --migrate}: a stream on {@code ep} that mid-stream failover can continue moves now
     * (cause {@code drain}); one that cannot finishes normally until {@code withinMs}, then ends with an error event.
     */
    @Override
    protected void onMigrateOff(EndpointState ep, long withinMs) {
        UpstreamLeg l = leg;
        if (l == null || l.endpoint() != ep) {
            return;
        }
        if (phase == Phase.UPSTREAM) {
            resendBeforeItsAnswer(ep, l, withinMs);
            return;
        }
        if (phase != Phase.RELAYING) {
            return;
        }
        if (failover != null && migrationRefusal() == null) {
            leg = null;
            l.cancel();
            if (!tryMigrate(MigrationCause.DRAIN, ep)) {
                finish(relay.status(), relay.failMidStream(LegFailure.MID_BODY, "The endpoint was drained and the stream could"
                    + " not move"));
            }
            return;
        }
        if (failover != null) {
            gw.metrics().streamMigration(ruleName, MigrationCause.DRAIN.label, migrations >= failoverConfig.maxMigrations()
                ? "exhausted" : "refused");
        }
        ctx.executor().schedule(() -> {
            if (leg == l && phase == Phase.RELAYING) {
                leg = null;
                l.cancel();
                finish(relay.status(), relay.failMidStream(LegFailure.MID_BODY, "The endpoint was drained and the stream did"
                    + " not finish within " + withinMs + " ms"));
            }
        }, withinMs, java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    /**
     * {@code ctl drain ENDPOINT --migrate} for a request the engine has not answered yet (queued or in prefill): nothing
     * reached the client, so it goes whole to another endpoint (cause {@code drain}) — a stream at once (its engine
     * has not started the answer), a non-streamed request if it has not finished by {@code withinMs} (it may be nearly
     * done). Without failover on the rule, for a hedged first leg (the race owns its legs), a request failover
     * refuses (the opt-out included) or one whose moves are used up, it stays and finishes as under a plain drain.
     */
    private void resendBeforeItsAnswer(EndpointState ep, UpstreamLeg l, long withinMs) {
        if (failover == null || hedging != null) {
            return;
        }
        Runnable resend = () -> {
            if (leg != l || phase != Phase.UPSTREAM) {
                return; // answered (or ended) meanwhile
            }
            if (failover.refusal() != null || migrations >= failoverConfig.maxMigrations()) {
                gw.metrics().streamMigration(ruleName, MigrationCause.DRAIN.label, failover.refusal() != null ? "refused" : "exhausted");
                return; // it stays: finishes on the drained endpoint as under a plain drain
            }
            leg = null;
            l.cancel();
            tryMigrate(MigrationCause.DRAIN, ep); // checked above: it moves
        };
        if (failover.streamed()) {
            resend.run();
        } else {
            ctx.executor().schedule(resend, withinMs, java.util.concurrent.TimeUnit.MILLISECONDS);
        }
    }

    /** Why a started stream cannot move now (null: it can), without counting anything. */
    private String migrationRefusal() {
        if (failover.refusal() != null) {
            return failover.refusal();
        }
        if (!client.sse() || stitch == null) {
            return "not_a_stream";
        }
        if (stitch.toolCallOpen()) {
            return "tool_call";
        }
        if (stitch.finished()) {
            return "finished";
        }
        if (migrations >= failoverConfig.maxMigrations()) {
            return "exhausted";
        }
        return failover.continuation(stitch.generatedText(), stitch.promptIds(), stitch.generatedIds(),
            stitch.generatedTokens()) == null ? "no_form" : null;
    }

    /** The drain deadline passed: a live stream gets an error frame and {@code [DONE]}; anything earlier a 503. */
    @Override
    protected void endForDrain() {
        if (phase == Phase.DONE) {
            return;
        }
        if (leg != null) {
            leg.cancel();
            leg = null;
        }
        String msg = "The gateway is shutting down; retry the request.";
        relay.errorCode("shutting_down");
        if (relay.relaying()) {
            gw.metrics().responseIncomplete(GatewayMetrics.INCOMPLETE_SHUTTING_DOWN);
            client.endStreamWithError(msg, "shutting_down");
            finish(relay.status(), false);
            return;
        }
        client.answerErrorAndClose(HttpResponseStatus.SERVICE_UNAVAILABLE, msg, "shutting_down");
        finish(503, false);
    }
}
