package io.kvgate.dataplane.request;

import io.netty.handler.codec.http.HttpMethod;

/**
 * The client listener's routes, known from the request line alone. Everything the head stage decides before a
 * body byte is buffered (method, whether an API key is needed, whether the body must be JSON) is a property of
 * the route.
 */
public enum FrontRoute {
    CHAT("/v1/chat/completions", "POST", true, true),
    COMPLETIONS("/v1/completions", "POST", true, true),
    CHAT_RENDER("/v1/chat/completions/render", "POST", true, true),
    COMPLETIONS_RENDER("/v1/completions/render", "POST", true, true),
    /**
     * The gateway's render routes under its own namespace (issue #36 item 9): vLLM serves {@code /v1/*}{@code /render}
     * itself with another answer (a GenerateRequest), so on vLLM rules those paths go to the engine and the gateway's
     * render ({@code prompt}, {@code prompt_token_ids}, {@code block_keys}) is here, for every rule.
     */
    KVGATE_CHAT_RENDER("/kvgate/v1/chat/completions/render", "POST", true, true),
    KVGATE_COMPLETIONS_RENDER("/kvgate/v1/completions/render", "POST", true, true),
    MODELS("/v1/models", "GET", true, false),
    /** {@code GET /v1/models/{id}} (the SDKs' {@code models.retrieve}): answered from the rules. */
    MODEL("/v1/models/", "GET", true, false),
    HEALTH("/health", "GET", false, false),
    /** The gateway's own readiness (started, not draining or shutting down, KV warm): what a balancer gates traffic on. */
    READY("/ready", "GET", false, false),
    /** The fleet's readiness (every rule's models listed by a healthy engine, KV subscribers connected): for dashboards. */
    READY_ENGINES("/ready/engines", "GET", false, false),
    /** Needs an API key when {@code api_keys} are set: it names every engine and rule. */
    METRICS("/metrics", "GET", true, false),
    UNKNOWN(null, null, false, false);

    /** Where a model id starts in a {@link #MODEL} path. */
    public static final String MODEL_PREFIX = "/v1/models/";

    private final String path;
    private final String allowed;
    private final boolean needsApiKey;
    private final boolean jsonBody;

    FrontRoute(String path, String allowed, boolean needsApiKey, boolean jsonBody) {
        this.path = path;
        this.allowed = allowed;
        this.needsApiKey = needsApiKey;
        this.jsonBody = jsonBody;
    }

    /** The route of a path (query string already removed). */
    public static FrontRoute of(String path) {
        return switch (path) {
            case "/v1/chat/completions" -> CHAT;
            case "/v1/completions" -> COMPLETIONS;
            case "/v1/chat/completions/render" -> CHAT_RENDER;
            case "/v1/completions/render" -> COMPLETIONS_RENDER;
            case "/kvgate/v1/chat/completions/render" -> KVGATE_CHAT_RENDER;
            case "/kvgate/v1/completions/render" -> KVGATE_COMPLETIONS_RENDER;
            case "/v1/models" -> MODELS;
            case "/health" -> HEALTH;
            case "/ready" -> READY;
            case "/ready/engines" -> READY_ENGINES;
            case "/metrics" -> METRICS;
            default -> path.startsWith(MODEL_PREFIX) && path.length() > MODEL_PREFIX.length() ? MODEL : UNKNOWN;
        };
    }

    public String path() {
        return path;
    }

    /** The {@code Allow} header value: the one method (HEAD too for the probes) the route answers. */
    public String allowed() {
        return probe() ? "GET, HEAD" : allowed;
    }

    public boolean allows(HttpMethod m) {
        return m.name().equals(allowed) || (probe() && m.equals(HttpMethod.HEAD));
    }

    /** /health, /ready and /ready/engines: probes that balancers may send as HEAD. */
    private boolean probe() {
        return this == HEALTH || this == READY || this == READY_ENGINES;
    }

    /** Whether {@code api_keys} (when configured) guard the route: every {@code /v1/*} route and {@code /metrics}. */
    public boolean needsApiKey() {
        return needsApiKey;
    }

    /** Whether the route reads a JSON body (Content-Type checked on the head, body parsed). */
    public boolean jsonBody() {
        return jsonBody;
    }

    /** Proxied to an engine (as opposed to answered by the gateway). */
    public boolean proxied() {
        return this == CHAT || this == COMPLETIONS;
    }

    /** The body holds {@code messages} (chat) rather than {@code prompt}. */
    public boolean chat() {
        return this == CHAT || this == CHAT_RENDER || this == KVGATE_CHAT_RENDER;
    }

    /** The render paths vLLM serves itself: forwarded to the engine on vLLM rules, the gateway's render elsewhere. */
    public boolean engineRenderPath() {
        return this == CHAT_RENDER || this == COMPLETIONS_RENDER;
    }
}
