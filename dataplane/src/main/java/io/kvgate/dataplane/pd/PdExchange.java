package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.accesslog.AccessRecord;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.relay.EngineErrors;
import io.kvgate.dataplane.exchange.ExchangeRouting;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.exchange.LiveExchanges;
import io.kvgate.dataplane.relay.Relay;
import io.kvgate.dataplane.exchange.ActiveExchange;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Admission;
import io.kvgate.dataplane.request.PriorityInputs;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.SessionKeys;
import io.kvgate.dataplane.trace.RequestTrace;
import io.kvgate.dataplane.request.RequestIds;
import io.kvgate.dataplane.upstream.LegFailure;
import io.kvgate.dataplane.upstream.LegListener;
import io.kvgate.dataplane.upstream.UpstreamLeg;
import io.kvgate.dataplane.wire.EngineRequest;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpContent;
import io.netty.channel.ChannelFutureListener;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpUtil;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One request through prefill/decode disaggregation, in the dialect of the rule's engine.
 *
 * <p><b>vLLM (sequential):</b> the prefill leg gets the client's JSON with {@code stream:false}, {@code max_tokens:1}
 * (and {@code max_completion_tokens:1} if present), {@code stream_options}/{@code min_tokens}/
 * {@code min_completion_tokens} neutralised, plus a {@code kv_transfer_params} request object; its answer's
 * {@code kv_transfer_params} are copied verbatim into the original request for the decode leg, whose response is
 * relayed (and stripped of {@code kv_transfer_params}). The decode endpoint is chosen only after the prefill
 * answered, so one that became unhealthy meanwhile is not used.
 *
 * <p><b>SGLang (concurrent):</b> prefill and decode are chosen first, then the same body with the bootstrap triple
 * goes to both at once (the prefill waits for its decode to join the room: a sequential proxy would deadlock). The
 * legs are coupled: a prefill failure before decode produced output aborts decode (and is retried once as a pair
 * with a fresh room on transport death); decode finishing or failing cancels a prefill still running.
 *
 * <p><b>TensorRT-LLM (sequential):</b> like vLLM, with {@code disaggregated_params} and TensorRT-LLM's own
 * orchestrator's rules ({@link TrtllmDialect}): one {@code disagg_request_id} on both legs, the context's tokens and
 * usage on the generation leg, and no generation leg when the context answer ended the request.
 *
 * <p><b>Conditional P/D</b> (sequential dialects, {@link PdPath}): when the rule decides per request, the decode
 * endpoint is routed first (admission-gated, as a prefill would be); if it already holds the prompt, or the part it
 * does not hold is shorter than {@code pd.min_uncached_tokens}, it serves the original request alone (path
 * {@code local}); otherwise it is released and the request takes the split path above (its decode leg is routed
 * again after the prefill answered). Both paths are counted in {@code kvgate_pd_decisions_total{path}}.
 *
 * <p>What differs between the dialects lives in {@link VllmDialect}, {@link TrtllmDialect} and {@link SglangDialect},
 * which return values ({@link PdDialect}: the legs' bodies, spliced by {@link PdBodies} from the client's bytes, and
 * what the prefill's answer means); this class is the orchestrator they share, and decides what to do with them. Every
 * dialect runs on the same two parts: an {@link UpstreamLeg} for the prefill (aggregated or drained; the leg owns
 * whatever it buffers, so a cancelled prefill frees it) and a second one for decode ({@link DecodeLeg}), whose answer
 * the request's one {@link Relay} carries to the client. Client-sent {@code kv_transfer_params}/{@code bootstrap_*}/
 * {@code disaggregated_params} are dropped at the front door; the gateway sets its own. Both legs carry the same
 * gateway-unique request id (the engines correlate on it).
 *
 * <p>Event-loop only, decisions included. An exception anywhere ends the exchange with a 500 and frees the
 * connection ({@link #abort}).
 */
public final class PdExchange extends LiveExchanges.Entry implements RouteCallback, ActiveExchange {
    /**
     * Where the exchange is. {@code DECIDING}: conditional P/D routes the decode endpoint first to choose the path.
     * {@code ROUTING_PREFILL}: the prefill decision is awaited (SGLang's awaits its pair: prefill and decode in one
     * decision, before either leg starts; a sequential dialect's decode leg routes itself after the prefill answered).
     * {@code PREFILL}: the prefill leg runs, decode not yet.
     * {@code DECODE}: the decode leg was started (with SGLang, its prefill may still run beside it). {@code DONE}: the
     * client was answered, or left; nothing more is sent to it.
     */
    public enum Phase { DECIDING, ROUTING_PREFILL, PREFILL, DECODE, DONE }

    private static final ObjectMapper JSON = new ObjectMapper();

    private final GatewayContext gw;
    private final PdMetrics metrics;
    private final ChannelHandlerContext ctx;
    private final ExchangeOwner owner;
    private final HttpRequest request;
    /** The client's body (this exchange's reference, released when it ends) and the legs' bodies spliced from it. */
    private ByteBuf clientBody;
    private final PdBodies bodies;
    /** The id both legs carry for the engines to pair them (TensorRT-LLM's {@code disagg_request_id}). */
    private final long transferId = TrtllmDialect.transferId(java.util.concurrent.ThreadLocalRandom.current().nextLong());
    private final RequestFields fields;
    private final Rule rule;
    /** The LoRA adapter the client's model names on this rule (kv_exact hashes its blocks under it), or null. */
    private final String lora;
    /** The sorted ids of the only endpoints serving {@link #lora} (a discovered adapter), or null: any endpoint. */
    private int[] servingEndpoints;
    /** {@code X-Kvgate-Warning} for the client's response (the decode leg relays it), or null. */
    private String warning;
    private final RuleConfig.PdConfig pd;
    private final String requestId;
    private final boolean explain;
    private final long startNs;
    private final PdDialect dialect;
    private final PdPath path;
    private Phase phase = Phase.ROUTING_PREFILL;
    /** The first decision arrived: admission control let the request in; later legs are not gated again. */
    private boolean admitted;
    private final List<EndpointState> connectFailed = new ArrayList<>(2);

    private final RoutingInputs inputs;
    private final ExchangeRouting routing;
    private Role role = Role.PREFILL;
    private String routedWhy;

    private EndpointState prefillEp;
    private EndpointState decodeEp;
    private final String upstreamRequestId = RequestIds.generate();
    private UpstreamLeg prefillLeg;
    /** The decode leg; its answer goes to the client through {@link #relay}, the request's one relay. */
    private DecodeLeg decodeLeg;
    private final Relay relay;
    private boolean listed;
    private long prefillStartNs;
    private int transportRetries;
    private boolean decodeStarted;
    /** The request's trace when it is sampled, else null; its P/D routing decisions and prefill leg as spans. */
    private RequestTrace trace;
    private PdSpans spans = PdSpans.OFF;
    /** Why the request failed, for the access log (an OpenAI error code); null while it has not. */
    private String errorCode;

    /**
     * @param body the client's body as a plain rule's engine would get it (this exchange takes over the reference)
     * @param chat {@code /v1/chat/completions} rather than completions
     */
    public PdExchange(GatewayContext gw, PdMetrics metrics, ChannelHandlerContext ctx, ExchangeOwner owner, HttpRequest request,
                      ByteBuf body, RequestFields fields, boolean chat, Rule rule, String requestId, boolean explain, long startNs,
                      RoutingInputs inputs, PdPath path) {
        this.inputs = inputs;
        this.path = path;
        this.gw = gw;
        this.routing = gw.routing(ctx.channel().eventLoop());
        this.metrics = metrics;
        this.ctx = ctx;
        this.owner = owner;
        this.request = request;
        this.clientBody = body;
        this.fields = fields;
        this.bodies = new PdBodies(body, fields, chat);
        this.rule = rule;
        this.lora = rule.config().entryFor(fields.model) == null ? fields.model : null;
        this.pd = rule.config().pd();
        this.requestId = requestId;
        this.explain = explain;
        this.startNs = startNs;
        this.dialect = PdDialect.of(rule.profile());
        this.relay = new Relay(ctx, request, requestId, gw.configSupplier(), gw.metrics(), gw.clock(), gw.accessLog(),
            owner.accessRecord(), rule.name(), fields.model, startNs, fields.answerRewrite);
        if (!dialect.concurrent()) {
            relay.strippingTransferParams(); // a sequential decode's JSON answer must lose the transfer parameters
        }
    }

    /** Without a KV index: conditional P/D decides on the prompt's length alone. */
    public PdExchange(GatewayContext gw, PdMetrics metrics, ChannelHandlerContext ctx, ExchangeOwner owner, HttpRequest request,
                      ByteBuf body, RequestFields fields, boolean chat, Rule rule, String requestId, boolean explain, long startNs,
                      RoutingInputs inputs) {
        this(gw, metrics, ctx, owner, request, body, fields, chat, rule, requestId, explain, startNs, inputs, new PdPath(() -> null));
    }

    /** The front door's routing restriction (a discovered adapter's endpoints) and response warning; see PlainExchange. */
    public PdExchange withRequestExtras(int[] serving, String warningValue) {
        this.servingEndpoints = serving;
        this.warning = warningValue;
        relay.client().warning(warningValue);
        return this;
    }

    /** The request's trace (null: not sampled): both legs carry the gateway's span context to their engines. */
    public PdExchange withTrace(RequestTrace t) {
        this.trace = t;
        this.spans = t == null ? PdSpans.OFF : new PdSpans(t, gw.clock());
        relay.withTrace(t);
        return this;
    }

    public void start() {
        metrics.requests.increment();
        try {
            // SGLang needs one bootstrap room per sequence: the rule's max_n bounds them (the front door refuses more
            // already; this keeps the arrays bounded whoever starts the exchange).
            int sequences = PdBodies.sequences(fields);
            int maxSequences = rule.config().maxN();
            if (sequences > maxSequences) {
                gw.metrics().badRequest("too_many_sequences");
                errorCode = "invalid_value";
                respond(OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.BAD_REQUEST, "This request asks for " + sequences
                    + " sequences; at most " + maxSequences + " are allowed per request on this model.", "n", "invalid_value"), 400);
                return;
            }
            listed = true;
            gw.live().add(ctx.channel().eventLoop(), this);
            if (io.kvgate.dataplane.route.RulePolicies.conditionalPd(rule.config()) && inputs.promptTokens() != null) {
                routeNext(Phase.DECIDING);
            } else {
                metrics.splitPath.increment();
                routeNext(Phase.ROUTING_PREFILL);
            }
        } catch (Throwable t) {
            abort(t);
        }
    }

    public Phase phase() {
        return phase;
    }

    /** Routes the next decision: {@code next} is {@link Phase#DECIDING} (the decode pool) or {@link Phase#ROUTING_PREFILL}. */
    void routeNext(Phase next) {
        phase = next;
        Role r = next == Phase.ROUTING_PREFILL ? Role.PREFILL : Role.DECODE;
        role = r;
        spans.routing();
        // SGLang's legs start together: its prefill and decode are chosen in one decision, counted together.
        boolean published = r == Role.PREFILL && dialect.concurrent()
            ? routing.tryRoutePair(routeInputs(), this)
            : routing.tryRoute(routeInputs(), this);
        if (!published) {
            gw.metrics().shed("router_ring_full");
            fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
        }
    }

    // ---- routing --------------------------------------------------------------------------------------------

    /** The current role's routing inputs, filled into the loop's reused value for one publish. */
    private RouteInputs routeInputs() {
        RouteInputs in = routing.inputs()
            .rule(rule)
            .role(role)
            .promptTokens(role == Role.PREFILL ? inputs.promptTokens() : null)
            .cacheSalt(inputs.cacheSalt())
            .lora(lora)
            .servingEndpoints(servingEndpoints)
            .sessionKeyHash(SessionKeys.hash(inputs.sessionKey()))
            .explain(explain || trace != null) // a traced request's route spans carry the policy's reason
            .needsAdmission(!admitted)
            .priority(PriorityInputs.priority(request.headers(), rule.config().admission()))
            .tenant(PriorityInputs.tenant(request.headers()));
        if (role == Role.PREFILL) {
            for (int i = 0; i < connectFailed.size(); i++) {
                in.tried(connectFailed.get(i));
            }
        }
        return in;
    }

    /** The routing decision for the current role, on the event loop: admission's refusal, or an endpoint (or none). */
    @Override
    public void onDecision(Decision d) {
        spans.admission(d);
        if (d.shed()) {
            onShed(d.rule(), d.explanation());
        } else {
            onRouted(d.endpoint(), d.decodeEndpoint(), d.unserved(), d.explanation());
        }
    }

    /** Admission control shed the request before its prefill leg (queue full or max_wait_ms): 429 + Retry-After. */
    private void onShed(Rule r, String message) {
        try {
            if (phase == Phase.DONE) {
                return;
            }
            gw.metrics().shed("admission");
            errorCode = "rate_limit_exceeded";
            FullHttpResponse resp = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.TOO_MANY_REQUESTS, message, null,
                "rate_limit_exceeded");
            resp.headers().set(HttpHeaderNames.RETRY_AFTER, Admission.retryAfterSeconds(r.config().admission()));
            respond(resp, 429);
        } catch (Throwable t) {
            abort(t);
        }
    }

    /**
     * {@code ep}: the endpoint for the current role, or a pair decision's prefill with its {@code pairedDecode}
     * (null otherwise); {@code unserved}: a refused pair's pool without an endpoint.
     */
    private void onRouted(EndpointState ep, EndpointState pairedDecode, Role unserved, String why) {
        this.routedWhy = why;
        this.admitted = true;
        spans.routed(ep, why, role, ep == null ? "no_healthy_endpoint" : null);
        try {
            onDecision(ep, pairedDecode, unserved);
        } catch (Throwable t) {
            if (ep != null && prefillLeg == null && decodeLeg == null) {
                routing.complete(ep, Outcome.RELEASED); // no leg took this endpoint over
                if (pairedDecode != null) {
                    routing.complete(pairedDecode, Outcome.RELEASED);
                }
            }
            abort(t);
        }
    }

    private void onDecision(EndpointState ep, EndpointState pairedDecode, Role unserved) {
        if (phase == Phase.DONE) {
            if (ep != null) {
                routing.complete(ep, Outcome.RELEASED);
            }
            if (pairedDecode != null) {
                routing.complete(pairedDecode, Outcome.RELEASED);
            }
            return;
        }
        if (role == Role.PREFILL) {
            if (ep == null && unserved == Role.DECODE) {
                fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "No healthy decode endpoint for model '" + fields.model + "'",
                    "no_healthy_endpoint", true); // the pair's prefill was not counted either
                return;
            }
            if (ep == null) {
                fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "No healthy prefill endpoint for model '" + fields.model + "'"
                    + (connectFailed.isEmpty() ? "" : " (could not connect to " + connectFailed.size() + ")"), "no_healthy_endpoint", true);
                return;
            }
            prefillEp = ep;
            if (pairedDecode != null) { // a concurrent dialect's pair: both legs start at once, on one body
                decodeEp = pairedDecode;
                ByteBuf both = dialect.prefillBody(bodies, transferId, prefillEp, ctx.alloc());
                startPrefillLeg(both.retain()); // each leg holds a reference and sends duplicates: one buffer serves both
                startDecodeLeg(both, true);
            } else {
                startPrefillLeg(dialect.prefillBody(bodies, transferId, prefillEp, ctx.alloc()));
            }
        } else { // the decode pool is routed here only to choose conditional P/D's path (DECIDING)
            if (ep == null) {
                fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "No healthy decode endpoint for model '" + fields.model + "'",
                    "no_healthy_endpoint", true);
                return;
            }
            decidePath(ep);
        }
    }

    /** Conditional P/D: the decode endpoint routed first serves the request alone, or is released for the split path. */
    private void decidePath(EndpointState decode) {
        int[] tokens = inputs.promptTokens();
        int cached = path.cachedTokens(rule.config(), decode, tokens, inputs.cacheSalt());
        if (!PdPath.truncated(tokens, rule.config().blockSize()) && PdPath.local(tokens.length, cached, rule.config().blockSize(), pd.minUncachedTokens())) {
            metrics.localPath.increment();
            decodeEp = decode;
            if (routedWhy != null) {
                routedWhy += " pd=local cached=" + cached + "/" + tokens.length + " min_uncached_tokens=" + pd.minUncachedTokens();
            }
            startDecodeLeg(dialect.localBody(bodies), true);
            return;
        }
        metrics.splitPath.increment();
        routing.complete(decode, Outcome.RELEASED); // the split path routes its decode leg after the prefill answered
        routeNext(Phase.ROUTING_PREFILL);
    }

    // ---- legs ------------------------------------------------------------------------------------------------

    /** Starts the prefill leg on the chosen prefill endpoint, taking over {@code buf}'s reference. */
    void startPrefillLeg(ByteBuf buf) {
        phase = Phase.PREFILL;
        prefillStartNs = gw.clock().nanoTime();
        EngineRequest engineRequest = new EngineRequest(HttpMethod.POST, request.uri(), request.headers(), upstreamRequestId);
        engineRequest = spans.prefillStarted(engineRequest, prefillStartNs, prefillEp.key(), transportRetries + 1);
        prefillLeg = new UpstreamLeg(gw.connector(), ctx.channel().eventLoop(), prefillEp, routing, gw.metrics(),
            engineRequest, buf,
            UpstreamLeg.Timeouts.ofMillis(pd.prefillTimeoutMs(), gw.config().upstream().idleTimeoutMs(),
                gw.config().limits().clientStallTimeoutMs()), new PrefillListener());
        prefillLeg.start();
    }

    /**
     * Starts the decode leg, taking over {@code buf}'s reference: on the decode endpoint already chosen
     * ({@code preChosen}), or routed now.
     */
    private void startDecodeLeg(ByteBuf buf, boolean preChosen) {
        phase = Phase.DECODE;
        decodeStarted = false;
        decodeLeg = new DecodeLeg(this, gw, ctx, request, relay, fields.model, upstreamRequestId, pd.decodeTimeoutMs(), startNs,
            buf, trace);
        if (preChosen) {
            decodeLeg.startOn(decodeEp, routedWhy);
        } else if (!decodeLeg.route()) {
            fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "The gateway is overloaded; retry shortly.", "overloaded", true);
        }
    }

    // ---- what the decode leg asks ------------------------------------------------------------------------------

    /** The decode leg's routing inputs: this request's (no prompt: the KV comes from the prefill, or decode computes it). */
    RouteInputs decodeRouteInputs(RouteInputs in) {
        return in.rule(rule)
            .lora(lora)
            .servingEndpoints(servingEndpoints)
            .sessionKeyHash(SessionKeys.hash(inputs.sessionKey()))
            .explain(explain || rule.config().explain() || trace != null)
            .priority(PriorityInputs.priority(request.headers(), rule.config().admission()))
            .tenant(PriorityInputs.tenant(request.headers()));
    }

    String ruleName() {
        return rule.name();
    }

    boolean answers503WhileLoading() {
        return rule.profile().answers503WhileLoading();
    }

    /** The {@code X-Kvgate-Route} value for the decode leg's answer, or null when the request did not ask for it. */
    String explanation(EndpointState ep, String why, int attempts) {
        if (!explain && !rule.config().explain()) {
            return null;
        }
        return "endpoint=" + (ep == null ? "none" : ep.key()) + "; rule=" + rule.name() + (why == null ? "" : "; " + why)
            + "; attempts=" + attempts;
    }

    /** The decode engine's response head arrived: it has the KV cache, its outcome decides (SGLang's coupling). */
    void decodeAnswered() {
        decodeStarted = true;
        metrics.decodeFirstByte.recordNs(gw.clock().nanoTime() - startNs);
    }

    /** The decode leg answered the client (or failed and said so): the request ends; a prefill still running is cancelled. */
    void decodeEnded(boolean keepAlive) {
        phase = Phase.DONE;
        unlist();
        if (prefillLeg != null) {
            prefillLeg.cancel(); // nothing may wait on this prefill any more
            prefillLeg = null;
        }
        owner.onExchangeDone(keepAlive);
    }

    /**
     * The prefill leg's answer. vLLM's is JSON and aggregated (bounded: over {@code limits.max_body_bytes} is a
     * 502 naming the leg); SGLang's success is drained as it arrives (nothing is kept), its error aggregated to be
     * relayed. Whatever is aggregated belongs to the leg, so a cancelled prefill never leaks it.
     */
    private final class PrefillListener implements LegListener {
        @Override
        public void onHead(UpstreamLeg leg, ResponseHead head) {
            int status = head.status();
            if (status >= 400) {
                leg.aggregate(gw.config().upstream().maxErrorBodyBytes());
            } else if (dialect.gathersPrefillAnswer()) {
                leg.aggregate(gw.config().limits().maxBodyBytes());
            }
        }

        @Override
        public void onContent(UpstreamLeg leg, HttpContent content, boolean last) {
            content.release(); // SGLang success: drained
            if (last) {
                onPrefillDone(leg, leg.head().status(), "");
            }
        }

        @Override
        public void onAggregated(UpstreamLeg leg, ResponseHead head, ByteBuf body) {
            onPrefillDone(leg, head.status(), body.toString(StandardCharsets.UTF_8));
        }

        @Override
        public void onFailure(UpstreamLeg leg, LegFailure failure, Throwable cause) {
            if (leg != prefillLeg) {
                return;
            }
            prefillLeg = null;
            onPrefillFailed(leg.endpoint(), failure);
        }
    }

    private void onPrefillDone(UpstreamLeg leg, int status, String text) {
        if (leg != prefillLeg) {
            return;
        }
        prefillLeg = null;
        metrics.prefillLatency.recordNs(gw.clock().nanoTime() - prefillStartNs);
        spans.prefillEnded(status >= 400 ? "prefill_status_" + status : null);
        if (phase == Phase.DONE) {
            return;
        }
        switch (dialect.afterPrefill(bodies, transferId, status, text, ctx.alloc())) {
            case PdDialect.AfterPrefill.Drained d -> { } // decode's answer is the client's
            case PdDialect.AfterPrefill.EngineError e -> {
                if (dialect.concurrent()) {
                    if (decodeStarted) {
                        return; // decode produced output: it has the KV cache, its outcome decides
                    }
                    abortDecode(); // coupled legs: the client gets the prefill's error, not decode's wait
                }
                relayPrefillError(e.status(), e.text());
            }
            case PdDialect.AfterPrefill.Invalid i -> {
                metrics.failure("prefill", "invalid_json");
                fail(HttpResponseStatus.BAD_GATEWAY, i.why(), "prefill_invalid_response", false);
            }
            case PdDialect.AfterPrefill.Decode d -> {
                if (d.paramsFound()) {
                    metrics.paramsFound.increment();
                } else {
                    metrics.paramsMissing.increment(); // prompt shorter than a block, or first token EOS: decode recomputes
                }
                startDecodeLeg(d.body(), false);
            }
            case PdDialect.AfterPrefill.Finished f -> {
                metrics.finishedAtPrefill.increment();
                respond(FinishedAnswer.response(ctx.alloc(), f.json(), bodies, fields.answerRewrite), 200);
            }
        }
    }

    /** Abandons the decode leg without answering (this exchange answers). */
    private void abortDecode() {
        if (decodeLeg != null) {
            decodeLeg.abandon();
            decodeLeg = null;
        }
    }

    private void onPrefillFailed(EndpointState ep, LegFailure failure) {
        // The leg already returned the endpoint's load and charged its breaker as the failure's class says.
        metrics.failure("prefill", failure.metricName());
        spans.prefillEnded(failure.code());
        if (phase == Phase.DONE) {
            return;
        }
        if (dialect.concurrent() && decodeStarted) {
            return; // decode already has the KV cache; its outcome decides
        }
        if (dialect.concurrent()) {
            abortDecode(); // coupled legs: never leave decode waiting 300 s for a dead prefill
        }
        switch (failure) {
            case CONNECT -> {
                connectFailed.add(ep);
                if (connectFailed.size() < gw.config().upstream().maxConnectAttempts()) {
                    metrics.pairRetries.increment();
                    routeNext(Phase.ROUTING_PREFILL);
                    return;
                }
                fail(HttpResponseStatus.SERVICE_UNAVAILABLE, "Could not connect to any prefill endpoint ("
                    + connectFailed.size() + " tried)", failure.code(), true);
            }
            case EARLY_CLOSE, MID_BODY -> {
                if (transportRetries == 0) {
                    transportRetries++;
                    metrics.pairRetries.increment();
                    routeNext(Phase.ROUTING_PREFILL);
                    return;
                }
                fail(HttpResponseStatus.BAD_GATEWAY, "The prefill leg failed twice: the engine closed the connection",
                    "prefill_failed", false);
            }
            case FIRST_BYTE_TIMEOUT, IDLE_TIMEOUT -> fail(HttpResponseStatus.GATEWAY_TIMEOUT,
                "The prefill leg did not answer within " + pd.prefillTimeoutMs() + " ms", "prefill_timeout", false);
            case RESPONSE_TOO_LARGE -> fail(HttpResponseStatus.BAD_GATEWAY, "The prefill leg's answer exceeds the gateway's limit of "
                + gw.config().limits().maxBodyBytes() + " bytes", failure.code(), false);
            case INTERNAL -> abort(new IllegalStateException("prefill leg failed inside the gateway"));
            case CLIENT_STALL, CANCELLED, ENGINE_5XX -> throw new IllegalStateException("a prefill leg never fails with " + failure);
        }
    }

    private void relayPrefillError(int status, String text) {
        metrics.failure("prefill", "http_" + status);
        errorCode = "engine_error";
        if (status < 500) {
            // The engine judged the request itself: the client sees exactly that (in the OpenAI shape).
            respond(OpenAiErrors.jsonResponse(ctx.alloc(), HttpResponseStatus.valueOf(status), EngineErrors.toOpenAiShape(text, status)),
                status);
            return;
        }
        String inner = EngineErrors.toOpenAiShape(text, status);
        String msg;
        try {
            msg = JSON.readTree(inner).path("error").path("message").asText();
        } catch (Exception e) {
            msg = text;
        }
        fail(HttpResponseStatus.BAD_GATEWAY, "The prefill leg failed with HTTP " + status + ": " + msg,
            "prefill_failed", false);
    }

    // ---- client side -----------------------------------------------------------------------------------------

    void fail(HttpResponseStatus st, String message, String code, boolean retryAfter) {
        if (trace != null) {
            trace.error(code);
        }
        errorCode = code;
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), st, message, null, code);
        if (retryAfter) {
            r.headers().set(HttpHeaderNames.RETRY_AFTER, gw.config().health().retryAfterSeconds());
        }
        respond(r, st.code());
    }

    private void respond(FullHttpResponse r, int status) {
        if (phase == Phase.DONE) {
            r.release();
            return;
        }
        phase = Phase.DONE;
        unlist();
        r.headers().set("x-request-id", requestId);
        boolean keepAlive = HttpUtil.isKeepAlive(request) && !r.headers().contains(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE, true);
        if (!keepAlive) {
            r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        }
        gw.metrics().request(rule.name(), fields.model, status, gw.clock().nanoTime() - startNs);
        if (trace != null) {
            trace.status(status);
        }
        logAccess(status, r.content().readableBytes());
        ctx.writeAndFlush(r);
        owner.onExchangeDone(keepAlive);
    }

    @Override
    public void onClientGone() {
        if (phase == Phase.DONE) {
            return;
        }
        phase = Phase.DONE;
        unlist();
        if (prefillLeg != null) {
            prefillLeg.cancel(); // the leg returns the endpoint and frees whatever it had aggregated
            prefillLeg = null;
        }
        if (decodeLeg != null && !decodeLeg.finished()) {
            decodeLeg.onClientGone(); // the decode leg writes the request's line
        } else {
            errorCode = "client_gone";
            logAccess(499, 0);
        }
    }

    /** The request's access-log line when this exchange answers it (the decode leg writes its own otherwise). */
    private void logAccess(int status, long bytesOut) {
        if (!gw.accessLog().enabled()) {
            return;
        }
        AccessRecord a = owner.accessRecord();
        a.requestId = requestId;
        a.rule = rule.name();
        a.model = fields.model;
        a.status = status;
        a.bytesOut = bytesOut;
        a.durationNs = gw.clock().nanoTime() - startNs;
        a.errorCode = errorCode;
        gw.accessLog().log(a);
    }

    private void unlist() {
        if (clientBody != null) {
            clientBody.release(); // the legs hold their own bodies
            clientBody = null;
        }
        spans.ended();
        if (listed) {
            listed = false;
            gw.live().remove(this);
        }
    }

    /**
     * The watchdog: something threw inside this exchange. Both legs end (their endpoints uncharged), the client
     * gets a 500 unless decode already answered, and the connection is closed; never a hang.
     */
    void abort(Throwable t) {
        if (phase == Phase.DONE) {
            return;
        }
        Log.error("P/D exchange failed inside the gateway (answered 500, connection closed): " + t);
        errorCode = LegFailure.INTERNAL.code();
        boolean decodeAnswered = decodeLeg != null && decodeLeg.responseStarted();
        phase = Phase.DONE;
        unlist();
        try {
            if (prefillLeg != null) {
                prefillLeg.abortInternal();
                prefillLeg = null;
            }
            if (decodeLeg != null) {
                decodeLeg.abortInternal();
                decodeLeg = null;
            }
            if (decodeAnswered) {
                ctx.close();
            } else {
                FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.INTERNAL_SERVER_ERROR,
                    "The gateway failed while handling this request.", null, LegFailure.INTERNAL.code());
                r.headers().set("x-request-id", requestId);
                r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
                ctx.writeAndFlush(r).addListener(ChannelFutureListener.CLOSE);
            }
            gw.metrics().request(rule.name(), fields.model, 500, gw.clock().nanoTime() - startNs);
            logAccess(500, 0);
        } catch (Throwable again) {
            ctx.close();
        } finally {
            owner.onExchangeDone(false);
        }
    }

    /** The drain deadline passed: a live decode stream gets its error frame; anything earlier a 503. */
    @Override
    protected void endForDrain() {
        if (phase == Phase.DONE) {
            return;
        }
        if (decodeLeg != null && decodeLeg.responseStarted()) {
            decodeLeg.endDrained(); // ends the stream; decodeEnded then cancels the prefill
            return;
        }
        if (prefillLeg != null) {
            prefillLeg.cancel();
            prefillLeg = null;
        }
        abortDecode();
        FullHttpResponse r = OpenAiErrors.response(ctx.alloc(), HttpResponseStatus.SERVICE_UNAVAILABLE,
            "The gateway is shutting down; retry the request.", null, "shutting_down");
        r.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
        errorCode = "shutting_down";
        respond(r, 503);
    }
}
