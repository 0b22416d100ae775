package io.kvgate.dataplane.exchange;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.accesslog.AccessRecord;
import io.kvgate.dataplane.request.FrontRoute;
import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.RequestEdits;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.request.RequestIds;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.AdapterDirectory;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.trace.RequestTrace;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpRequest;

/**
 * What the request stages know about the request being read, from its head to the hand-off to an exchange: one per
 * client connection, reused for each of its requests (so the stages allocate nothing for it).
 *
 * <p>The configuration and the route table are captured <b>once, at the head</b> ({@link #begin}): every later stage
 * reads limits, keys and rules from that generation, never the live one, so a request that straddles a reload is
 * judged by one configuration from its first check to its rule.
 *
 * <p>The stages write it in order (head: route, path, trace, extractor; body: {@link #body}; validate: rule,
 * serving endpoints, explain, warning; prompt: inputs, maybe a new body; forward body: the body the engine gets), and
 * {@link #handOff} turns it into the {@link ParsedRequest} an exchange takes, moving the body's ownership with it.
 * Nothing here is kept by an exchange: the next request on the connection reuses it. Event-loop only (or one thread
 * of a front door without a channel).
 */
public final class RequestContext {
    private final RequestFields fields = new RequestFields();
    /** The access-log record of the request being read or answered (reset per request). */
    private final AccessRecord access = new AccessRecord();
    /** The gateway's edits of the body being forwarded (empty on the byte-for-byte path). */
    private final RequestEdits edits = new RequestEdits();

    private GatewayConfig config;
    private RouteTable table;
    private HttpRequest head;
    private String clientIdentity;
    private long startNs;
    private FrontRoute route;
    private String path;
    private RequestFieldExtractor extractor;
    private ByteBuf body;
    private Rule rule;
    private AdapterDirectory.Served discovered;
    private int[] servingEndpoints;
    private RoutingInputs inputs = RoutingInputs.NONE;
    private boolean explain;
    private String warning;
    private RequestTrace trace;
    /** The caller's tenant, once the head's key was checked (null before, and for routes without a key). */
    private io.kvgate.dataplane.tenant.Tenant tenant;
    /** The request's hold on its tenant's limits, or null (no limits, or not reserved yet). Kept past the hand-off. */
    private io.kvgate.dataplane.tenant.Reservation reservation;
    /** Prompt tokens the prompt stage counted exactly (the rule's tokenizer or token ids), or -1. */
    private int promptTokenCount = -1;

    /**
     * A request head arrived: forgets the last request's fields and captures the configuration generation this
     * request is judged by.
     *
     * @param clientIdentity the subject CN of the client's verified certificate, or null
     */
    public void begin(HttpRequest head, GatewayConfig config, RouteTable table, long startNs, String clientIdentity) {
        this.head = head;
        this.config = config;
        this.table = table;
        this.startNs = startNs;
        this.clientIdentity = clientIdentity;
        fields.reset();
        access.reset();
        route = null;
        path = null;
        extractor = null;
        rule = null;
        discovered = null;
        servingEndpoints = null;
        inputs = RoutingInputs.NONE;
        explain = false;
        warning = null;
        tenant = null;
        reservation = null;
        promptTokenCount = -1;
    }

    /**
     * The request is over on this connection (answered, refused, handed off or abandoned): releases a body still held
     * and drops the head, so nothing of it is read again. The fields and the access record stay until the next
     * {@link #begin} (an answer being logged reads them).
     */
    public void end() {
        if (body != null && body.refCnt() > 0) {
            body.release();
        }
        body = null;
        head = null;
        route = null;
        path = null;
        extractor = null;
    }

    /**
     * The request as the exchange layer takes it. The body moves with it (this context no longer holds it), the
     * request's typed fields are copied out of the connection's reused {@link RequestFields}.
     */
    public ParsedRequest handOff() {
        ParsedRequest parsed = new ParsedRequest(head, path, route.chat(), body, fields, rule, requestId(), explain,
            startNs, inputs, servingEndpoints, warning).withTrace(trace);
        body = null;
        extractor = null;
        head = null;
        return parsed;
    }

    /**
     * The client's {@code X-Request-Id} or one generated for it, once per request: the response header and the
     * access log carry the same.
     */
    public String requestId() {
        if (access.requestId == null) {
            access.requestId = RequestIds.keepOrGenerate(head == null ? null : head.headers().get("x-request-id"));
        }
        return access.requestId;
    }

    /** The caller's tenant (set by the head stage with the key check), or null. */
    public io.kvgate.dataplane.tenant.Tenant tenant() {
        return tenant;
    }

    public void tenant(io.kvgate.dataplane.tenant.Tenant t) {
        this.tenant = t;
        access.tenant = t == null ? null : t.name();
    }

    /**
     * The request's reservation on its tenant's limits (granted or denied), or null: it stays here after the hand-off
     * until the next request's head, so the connection settles it when the exchange ends and its answer carries the
     * rate-limit headers.
     */
    public io.kvgate.dataplane.tenant.Reservation reservation() {
        return reservation;
    }

    public void reservation(io.kvgate.dataplane.tenant.Reservation r) {
        this.reservation = r;
    }

    /** The prompt's exact token count, or -1 when the gateway did not count it. */
    public int promptTokenCount() {
        return promptTokenCount;
    }

    public void promptTokenCount(int n) {
        this.promptTokenCount = n;
    }

    /** The configuration applied when the head arrived. */
    public GatewayConfig config() {
        return config;
    }

    /** The rule set current when the head arrived: the request's rule comes from it. */
    public RouteTable table() {
        return table;
    }

    /** The request head, or null when no request is being read. */
    public HttpRequest head() {
        return head;
    }

    /** The subject CN of the client's verified certificate, or null. */
    public String clientIdentity() {
        return clientIdentity;
    }

    /** When the head was seen ({@link io.kvgate.control.clock.NanoClock} time). */
    public long startNs() {
        return startNs;
    }

    public FrontRoute route() {
        return route;
    }

    /** The route path without the query string. */
    public String path() {
        return path;
    }

    public void route(FrontRoute route, String path) {
        this.route = route;
        this.path = path;
    }

    /** Chat ({@code messages}) rather than completions ({@code prompt}). */
    public boolean chat() {
        return route.chat();
    }

    public RequestFields fields() {
        return fields;
    }

    public AccessRecord access() {
        return access;
    }

    public RequestEdits edits() {
        return edits;
    }

    /** The body's scanner, for routes with a JSON body; null otherwise. */
    public RequestFieldExtractor extractor() {
        return extractor;
    }

    public void extractor(RequestFieldExtractor e) {
        this.extractor = e;
    }

    /** The body read so far (the whole body once the last content arrived), or null before its first byte. */
    public ByteBuf body() {
        return body;
    }

    /** Replaces the body (the caller has released the old one, or it is the same buffer). */
    public void body(ByteBuf b) {
        this.body = b;
    }

    /** The rule the request's model resolved to, in {@link #table()}. */
    public Rule rule() {
        return rule;
    }

    /** @param discovered the discovered LoRA adapter the model names, or null (a configured name) */
    public void rule(Rule rule, AdapterDirectory.Served discovered) {
        this.rule = rule;
        this.discovered = discovered;
    }

    public AdapterDirectory.Served discovered() {
        return discovered;
    }

    /** The sorted ids of the only endpoints that may take the request, or null: any endpoint of the rule. */
    public int[] servingEndpoints() {
        return servingEndpoints;
    }

    public void servingEndpoints(int[] ids) {
        this.servingEndpoints = ids;
    }

    /** The prompt stage's output (tokens, salt, session key); {@link RoutingInputs#NONE} before it or without any. */
    public RoutingInputs inputs() {
        return inputs;
    }

    public void inputs(RoutingInputs in) {
        this.inputs = in == null ? RoutingInputs.NONE : in;
    }

    /** Whether the client may see the routing explanation (asked for and authorized by the admin token). */
    public boolean explain() {
        return explain;
    }

    public void explain(boolean e) {
        this.explain = e;
    }

    /** The {@code X-Kvgate-Warning} the answer carries, or null. */
    public String warning() {
        return warning;
    }

    public void warning(String w) {
        this.warning = w;
    }

    /** The request's trace when it is sampled, or null. */
    public RequestTrace trace() {
        return trace;
    }

    public void trace(RequestTrace t) {
        this.trace = t;
    }
}
