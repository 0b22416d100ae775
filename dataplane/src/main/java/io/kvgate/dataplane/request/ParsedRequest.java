package io.kvgate.dataplane.request;

import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.trace.RequestTrace;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpRequest;

/**
 * One client request as the front door hands it to the exchange layer: the head, the body (read once, owned by
 * whoever holds this view), the rule its model resolved to, and the typed fields routing needs. Built on the
 * client connection's event loop after the head, body and prompt stages; immutable except for the ownership of
 * {@link #body()}, which moves to the exchange with {@link ExchangeStarter#start}, and its {@link #trace()}, attached
 * by the front door before that.
 */
public final class ParsedRequest {
    /** The response header a request's {@link #warning()} goes out in. */
    public static final String WARNING_HEADER = "X-Kvgate-Warning";
    private final HttpRequest head;
    private final String path;
    private final boolean chat;
    private final ByteBuf body;
    private final RequestFields fields;
    private final Rule rule;
    private final String requestId;
    private final boolean explain;
    private final long startNs;
    private final RoutingInputs inputs;
    // Copied from the connection's RequestFields, which the front door reuses for the connection's next request.
    private final String model;
    private final boolean stream;
    private final int n;
    private final int promptCount;
    private final int[] servingEndpoints;
    private final String warning;
    private final AnswerRewrite answerRewrite;
    /** The request's trace when it is sampled, else null (set by the front door before the exchange starts). */
    private RequestTrace trace;

    public ParsedRequest(HttpRequest head, String path, boolean chat, ByteBuf body, RequestFields fields, Rule rule,
                         String requestId, boolean explain, long startNs, RoutingInputs inputs) {
        this(head, path, chat, body, fields, rule, requestId, explain, startNs, inputs, null, null);
    }

    /**
     * @param servingEndpoints the sorted ids of the only endpoints serving the request's (discovered) LoRA adapter,
     *                         or null: every endpoint of the rule
     * @param warning          the {@code X-Kvgate-Warning} the response carries, or null
     */
    public ParsedRequest(HttpRequest head, String path, boolean chat, ByteBuf body, RequestFields fields, Rule rule,
                         String requestId, boolean explain, long startNs, RoutingInputs inputs, int[] servingEndpoints,
                         String warning) {
        this.head = head;
        this.path = path;
        this.chat = chat;
        this.body = body;
        this.fields = fields;
        this.rule = rule;
        this.requestId = requestId;
        this.explain = explain;
        this.startNs = startNs;
        this.inputs = inputs == null ? RoutingInputs.NONE : inputs;
        this.model = fields.model;
        this.stream = fields.stream;
        this.n = fields.n;
        this.promptCount = fields.promptCount;
        this.servingEndpoints = servingEndpoints;
        this.warning = warning;
        this.answerRewrite = fields.answerRewrite;
    }

    /** Attaches the request's trace (null: not sampled); the front door, before handing the request on. */
    public ParsedRequest withTrace(RequestTrace t) {
        this.trace = t;
        return this;
    }

    /** The request's trace, or null when it is not sampled (the exchanges add their spans to it). */
    public RequestTrace trace() {
        return trace;
    }

    /** The W3C trace id of a sampled request (32 hex digits), or null: for the access log and exemplars. */
    public String traceId() {
        return trace == null ? null : trace.traceId();
    }

    /** The sorted ids of the only endpoints serving the request's LoRA adapter (discovered), or null: any endpoint. */
    public int[] servingEndpoints() {
        return servingEndpoints;
    }

    /** The {@code X-Kvgate-Warning} value for the response (undeclared {@code chat_template_kwargs}), or null. */
    public String warning() {
        return warning;
    }

    /** What the gateway rewrites in the answers (its request edits are already in {@link #body()}), or null. */
    public AnswerRewrite answerRewrite() {
        return answerRewrite;
    }

    /** The client's request head (method, URI, headers to forward). */
    public HttpRequest head() {
        return head;
    }

    /** The route path without the query string, e.g. {@code /v1/chat/completions}. */
    public String path() {
        return path;
    }

    /** {@code /v1/chat/completions} (messages) rather than {@code /v1/completions} (prompt). */
    public boolean chat() {
        return chat;
    }

    /** The whole request body as received (one buffer; reader index at its start). */
    public ByteBuf body() {
        return body;
    }

    /**
     * The routing fields pulled from the body while it arrived. The object belongs to the connection and is reset
     * for its next request: read it while the exchange runs, keep the typed getters below beyond that.
     */
    public RequestFields fields() {
        return fields;
    }

    /** The client's {@code model}: always a model the {@link #rule()} serves. */
    public String model() {
        return model;
    }

    /** The client's {@code stream} flag (the relay follows the engine's Content-Type, not this). */
    public boolean stream() {
        return stream;
    }

    /** Choices asked for ({@code n}), within the rule's {@code max_n}. */
    public int n() {
        return n;
    }

    /** Prompts in a completions body (1 unless batched), within the rule's {@code max_n}; 0 for chat. */
    public int promptCount() {
        return promptCount;
    }

    public Rule rule() {
        return rule;
    }

    /** The client's {@code X-Request-Id} when it sent a usable one, generated otherwise. */
    public String requestId() {
        return requestId;
    }

    /**
     * Whether the client may see the routing explanation ({@code X-Kvgate-Route}): asked with
     * {@code X-Kvgate-Explain} and authorized by the admin token (a rule with {@code explain: true} explains every
     * request regardless).
     */
    public boolean explain() {
        return explain;
    }

    /** When the front door saw the request head ({@link io.kvgate.control.clock.NanoClock} time). */
    public long startNs() {
        return startNs;
    }

    /** The prompt stage's output: prompt tokens, cache salt, session key (each may be null). */
    public RoutingInputs inputs() {
        return inputs;
    }
}
