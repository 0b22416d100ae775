package io.kvgate.dataplane.route;

/**
 * What one engine says about itself: slots, context length, the routes it mounts, its tool-call parser. The router
 * never reads these; the I/O threads do per request ({@link Rule#contextLength}, {@link Rule#endpointsServing}), and
 * admin and metrics for display. Kept here rather than in {@code ready} because {@code route}, the floor the rules
 * stand on, reads them and may not import upward.
 *
 * <p>Threading: written by the probes only ({@code ModelProbe}; the slot count by {@code HealthChecker}), one thread
 * per fact; read by any thread through volatile fields.
 */
public final class EngineFacts {
    public static final int ROUTE_CHAT = 1;
    public static final int ROUTE_COMPLETIONS = 2;

    /** llama.cpp: the server's slot count as its {@code GET /slots} reported it, 0 while unknown. */
    private volatile int engineSlots;
    /**
     * The engine's context length in tokens as the model probe last read it ({@code GET /v1/models}
     * {@code max_model_len}, SGLang's {@code /get_server_info}, llama.cpp's {@code /props}), 0 while unknown.
     */
    private volatile int engineContextLen;
    /**
     * The completion routes the engine is known not to mount ({@link #ROUTE_CHAT}, {@link #ROUTE_COMPLETIONS} bits), as
     * the model probe last read them (vLLM's route table, {@code GET /openapi.json}; SGLang's {@code is_embedding} in
     * {@code /get_server_info}); 0 while unknown or when it serves both.
     */
    private volatile int unmountedRoutes;
    /** Where {@link #unmountedRoutes} was read ("GET /openapi.json", ...), null while unknown. */
    private volatile String routesSource;
    /**
     * The tool-call parser the engine says it runs (SGLang's {@code tool_call_parser} server argument): a name, ""
     * for none, null while unknown (vLLM does not publish it).
     */
    private volatile String statedToolCallParser;

    /**
     * llama.cpp router mode ({@code llama-server} started without a model, its {@code /props} saying
     * {@code role: "router"}): the model name its per-model routes ({@code /props}, {@code /slots}, {@code /metrics})
     * take as {@code ?model=}; null when the engine is no router (or not known to be one).
     */
    private volatile String routerModel;

    /** The bit of {@link #unmountedRoutes} for the chat or the text completions route. */
    public static int routeBit(boolean chat) {
        return chat ? ROUTE_CHAT : ROUTE_COMPLETIONS;
    }

    /** The engine's own slot count (llama.cpp, read by the health checker), 0 while unknown. */
    public int engineSlots() {
        return engineSlots;
    }

    public void engineSlots(int slots) {
        this.engineSlots = slots;
    }

    /** The engine's context length as discovered, 0 while unknown. */
    public int engineContextLen() {
        return engineContextLen;
    }

    public void engineContextLen(int tokens) {
        this.engineContextLen = tokens;
    }

    /** {@link #ROUTE_CHAT} / {@link #ROUTE_COMPLETIONS} bits of the routes the engine does not mount (0: none known). */
    public int unmountedRoutes() {
        return unmountedRoutes;
    }

    /** Where the engine's route table was read, null while it is unknown (every route is assumed mounted). */
    public String routesSource() {
        return routesSource;
    }

    /** The model probe's reading of the engine's routes ({@code source} null: unknown, nothing excluded). */
    public void routes(int unmounted, String source) {
        this.routesSource = source;
        this.unmountedRoutes = unmounted;
    }

    /** The engine's own tool-call parser: a name, "" for none, null while unknown. */
    public String statedToolCallParser() {
        return statedToolCallParser;
    }

    /** Model probe: what the engine's server info said ({@code null}: it does not say). */
    public void statedToolCallParser(String parser) {
        this.statedToolCallParser = parser;
    }

    /** The model a llama.cpp router serves this endpoint's rule under, null: no router. */
    public String routerModel() {
        return routerModel;
    }

    /** Model probe: the endpoint is a llama.cpp router serving the rule's model as {@code model} (null: it is not). */
    public void routerModel(String model) {
        this.routerModel = model;
    }

    /**
     * The query a per-model route of this engine needs: "" for an engine that is no router, else
     * {@code ?model=<name>&autoload=false} — the router proxies the route to that model's instance, and a probe must
     * never make it load one ({@code autoload}, tools/server/server-models.cpp {@code is_autoload}).
     */
    public String routerQuery() {
        String m = routerModel;
        return m == null ? "" : "?model=" + java.net.URLEncoder.encode(m, java.nio.charset.StandardCharsets.UTF_8)
            + "&autoload=false";
    }
}
