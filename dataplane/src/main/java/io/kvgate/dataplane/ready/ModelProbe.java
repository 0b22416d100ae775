package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.route.AdapterDirectory;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Model readiness probe: every {@code health.interval_ms} (read per tick, so a reload applies), asks each endpoint
 * of the current rule set for {@code GET /v1/models} and records the model ids it lists in {@link Readiness}, the
 * context length it states ({@link ContextDiscovery}) on the endpoint, where {@link Rule#contextLength()} reads it,
 * and its LoRA cards (those with a {@code parent}, as vLLM lists its adapters) in the {@link AdapterDirectory}.
 * An engine whose model cards state no context length is asked where it does ({@link EngineProfile#contextPath})
 * once per up-period: again after its probe failed (an engine coming back may have restarted with another context)
 * and after a reload. Runs on its own daemon thread with the JDK HTTP client: rare, small requests, off the data path
 * (no I/O thread and no routing thread ever waits for it).
 */
public final class ModelProbe implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Readiness readiness;
    private final Supplier<RouteTable> table;
    private final Supplier<GatewayConfig.Health> health;
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "kvgate-model-probe");
        t.setDaemon(true);
        return t;
    });
    private final HttpClient http;
    private volatile io.kvgate.dataplane.tls.UpstreamTls tls = new io.kvgate.dataplane.tls.UpstreamTls();
    private final ContextDiscovery contexts;
    /** Endpoints whose fallback context read is done for this up-period (cleared on a failed probe and on reload). */
    private final Set<String> fallbackRead = ConcurrentHashMap.newKeySet();
    /** Endpoints whose route table is read for this up-period (cleared as {@link #fallbackRead} is). */
    private final Set<String> routesRead = ConcurrentHashMap.newKeySet();
    /** Per rule and endpoint, the tool-call parser disagreement last logged. */
    private final Map<String, String> parserWarned = new ConcurrentHashMap<>();
    private volatile RouteTable lastTable;
    /** Where discovered LoRA adapters go, or null (no discovery). */
    private final AdapterDirectory adapters;
    /** SGLang's self-description checked against the configuration (issue #36 item 8). */
    private final ServerInfoChecks serverInfo = new ServerInfoChecks(Log::warn);

    public ModelProbe(Readiness readiness, Supplier<RouteTable> table, Supplier<GatewayConfig.Health> health) {
        this(readiness, table, health, new ContextDiscovery(Log::warn, Log::info), null);
    }

    public ModelProbe(Readiness readiness, Supplier<RouteTable> table, Supplier<GatewayConfig.Health> health,
                      ContextDiscovery contexts) {
        this(readiness, table, health, contexts, null);
    }

    /** @param adapters where discovered LoRA adapters go, or null (readiness and context lengths only) */
    public ModelProbe(Readiness readiness, Supplier<RouteTable> table, Supplier<GatewayConfig.Health> health,
                      ContextDiscovery contexts, AdapterDirectory adapters) {
        this.readiness = readiness;
        this.table = table;
        this.health = health;
        this.contexts = contexts;
        this.adapters = adapters;
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(health.get().timeoutMs())).executor(timer).build();
    }

    /** How {@code https://} endpoints are reached (set once, before {@link #start}). */
    public void upstreamTls(io.kvgate.dataplane.tls.UpstreamTls tls) {
        this.tls = tls;
    }

    private HttpClient client(EndpointState ep) {
        return tls.httpClient(ep.config(), http);
    }

    public void start() {
        timer.execute(this::tick);
    }

    private void tick() {
        GatewayConfig.Health h = health.get();
        try {
            readiness.observeSubscribers();
            RouteTable t = table.get();
            if (t != lastTable) {
                lastTable = t;
                fallbackRead.clear(); // a reload: every engine's context is read again
                routesRead.clear(); // and its routes
                contexts.review(t.rules()); // a rule whose max_model_len changed is reported now
            }
            Map<String, EndpointState> distinct = new LinkedHashMap<>();
            Map<String, Rule> rules = new HashMap<>();
            for (Rule r : t.rules()) {
                for (EndpointState ep : r.endpoints()) {
                    distinct.put(ep.key(), ep);
                    rules.putIfAbsent(ep.key(), r);
                }
            }
            if (adapters != null) {
                adapters.rebuild(t); // a reload may have changed the rules the listings belong to
            }
            for (EndpointState ep : distinct.values()) {
                probe(ep, rules.get(ep.key()), h);
            }
        } finally {
            if (!timer.isShutdown()) {
                timer.schedule(this::tick, Math.max(100, h.intervalMs()), TimeUnit.MILLISECONDS);
            }
        }
    }

    private void probe(EndpointState ep, Rule rule, GatewayConfig.Health h) {
        EngineProfile engine = rule.profile();
        HttpRequest req = HttpRequest.newBuilder(URI.create(ep.config().url() + "/v1/models"))
            .timeout(Duration.ofMillis(h.timeoutMs())).header("user-agent", "kvgate-ready").GET().build();
        client(ep).sendAsync(req, HttpResponse.BodyHandlers.ofString()).whenComplete((r, e) -> {
            if (e != null) {
                // sendAsync wraps the cause (a timeout, a refused connection) in a CompletionException: name the cause.
                Throwable cause = e instanceof java.util.concurrent.CompletionException && e.getCause() != null ? e.getCause() : e;
                readiness.recordModels(ep.key(), null, "GET /v1/models failed: " + cause.getClass().getSimpleName());
                fallbackRead.remove(ep.key());
                routesRead.remove(ep.key());
            } else if (r.statusCode() != 200) {
                readiness.recordModels(ep.key(), null, "GET /v1/models answered " + r.statusCode());
                fallbackRead.remove(ep.key());
                routesRead.remove(ep.key());
            } else {
                try {
                    JsonNode list = JSON.readTree(r.body());
                    Set<String> ids = new HashSet<>();
                    Set<String> listed = new HashSet<>();
                    Map<String, String> loras = new LinkedHashMap<>();
                    for (JsonNode m : list.path("data")) {
                        if (m.path("id").isTextual()) {
                            listed.add(m.path("id").asText());
                            // A llama.cpp router lists its unloaded and loading models too: not ready yet.
                            if (engine.cardReady(m)) {
                                ids.add(m.path("id").asText());
                            }
                            if (m.path("parent").isTextual()) {
                                loras.put(m.path("id").asText(), m.path("parent").asText());
                            }
                        }
                    }
                    readiness.recordModels(ep.key(), ids, null);
                    context(ep, engine, routerModel(rule, listed), ContextDiscovery.fromModels(list), h);
                    routes(ep, engine, h);
                    if (adapters != null) {
                        adapters.observe(table.get(), ep.key(), loras);
                    }
                } catch (java.io.IOException ex) {
                    readiness.recordModels(ep.key(), null, "GET /v1/models is not JSON");
                }
            }
        });
    }

    /**
     * The name a llama.cpp router would serve the rule under: the first of the rule's models the endpoint lists, else
     * the rule's first model.
     */
    private static String routerModel(Rule rule, Set<String> listed) {
        for (String m : rule.config().models()) {
            if (listed.contains(m)) {
                return m;
            }
        }
        return rule.config().models().isEmpty() ? null : rule.config().models().get(0);
    }

    /**
     * Records what the model cards said; an engine that states its context elsewhere is asked there once. A llama.cpp
     * router (issue #36 item 10, review L2) states {@code role: "router"} and no context there: it is marked a router
     * serving the rule's model ({@link io.kvgate.dataplane.route.EngineFacts#routerModel}), whose per-model routes
     * take {@code ?model=}, and that model's own {@code /props} is read once it is loaded.
     */
    private void context(EndpointState ep, EngineProfile engine, String model, int fromCards, GatewayConfig.Health h) {
        String fallback = engine == null ? null : engine.contextPath();
        if (fromCards > 0 || fallback == null) {
            update(ep, fromCards);
            return;
        }
        if (!fallbackRead.add(ep.key())) {
            return; // read in this up-period already
        }
        get(ep, fallback, h).whenComplete((r, e) -> {
            if (e != null || r.statusCode() != 200) {
                fallbackRead.remove(ep.key()); // asked again next round
                return;
            }
            try {
                JsonNode body = JSON.readTree(r.body());
                if (model != null && engine.statesRouterRole(body)) {
                    routerContext(ep, engine, model, fallback, h);
                    return;
                }
                if (ep.facts().routerModel() != null) {
                    ep.facts().routerModel(null);
                    Log.info("endpoint " + ep.key() + " is no longer a llama.cpp router");
                }
                update(ep, engine.contextLength(body));
            } catch (java.io.IOException ex) {
                update(ep, 0);
            }
        });
    }

    private void routerContext(EndpointState ep, EngineProfile engine, String model, String path, GatewayConfig.Health h) {
        if (!model.equals(ep.facts().routerModel())) {
            ep.facts().routerModel(model);
            Log.info("endpoint " + ep.key() + " is a llama.cpp router: its model '" + model + "' is probed with ?model="
                + " (GET " + path + ", /slots, the metrics page)");
        }
        get(ep, path + ep.facts().routerQuery(), h).whenComplete((r, e) -> {
            if (e != null || r.statusCode() != 200) {
                fallbackRead.remove(ep.key()); // not loaded yet (400 with autoload=false): asked again next round
                return;
            }
            try {
                update(ep, engine.contextLength(JSON.readTree(r.body())));
            } catch (java.io.IOException ex) {
                update(ep, 0);
            }
        });
    }

    /**
     * Reads which completion routes the engine mounts, once per up-period (review row 27): vLLM registers the
     * generation routes only for a generating model ({@code --runner pooling} mounts the pooling family instead) and
     * publishes its route table at {@code GET /openapi.json}; SGLang mounts every route but says {@code is_embedding}
     * in {@code GET /server_info} ({@code /get_server_info} on older servers), and an embedding server cannot generate. An engine that answers neither (vLLM
     * with {@code --disable-fastapi-docs}, other engines) is assumed to mount both, as before.
     */
    private void routes(EndpointState ep, EngineProfile engine, GatewayConfig.Health h) {
        String path = engine.routesPath();
        if (path == null || !routesRead.add(ep.key())) {
            return;
        }
        get(ep, path, h).whenComplete((r, e) -> {
            if (e != null) {
                routesRead.remove(ep.key()); // asked again next round
                return;
            }
            int unmounted = 0;
            String source = null;
            if (r.statusCode() == 200) {
                try {
                    JsonNode body = JSON.readTree(r.body());
                    toolCallParser(ep, engine.toolCallParser(body));
                    if (SglangServerInfo.PATH.equals(path)) {
                        serverInfo.observe(table.get(), ep, r.uri().getPath(), body);
                    }
                    unmounted = EngineRoutes.unmounted(engine, body);
                    source = unmounted < 0 ? null : "GET " + r.uri().getPath();
                    unmounted = Math.max(0, unmounted);
                } catch (java.io.IOException ex) {
                    unmounted = 0;
                }
            }
            int before = ep.facts().unmountedRoutes();
            ep.facts().routes(unmounted, source);
            if (before != unmounted) {
                String what = EngineRoutes.describe(unmounted);
                if (unmounted != 0) {
                    Log.warn("endpoint " + ep.key() + " does not mount " + what + " (" + source + "): its rules send those"
                        + " requests to their other endpoints, or answer 404 route_not_served when none mounts them");
                } else {
                    Log.info("endpoint " + ep.key() + " mounts both completion routes again (" + source + ")");
                }
            }
        });
    }

    /**
     * Records the parser the engine states and warns for each rule whose declaration disagrees, once per distinct
     * disagreement (read again after a reload, so a changed declaration is judged too).
     */
    private void toolCallParser(EndpointState ep, String stated) {
        ep.facts().statedToolCallParser(stated);
        for (Rule rule : table.get().rules()) {
            if (rule.endpoints().contains(ep)) {
                String problem = EngineRoutes.parserMismatch(rule.config(), ep);
                String key = rule.name() + "\u0000" + ep.key();
                if (problem == null) {
                    parserWarned.remove(key);
                } else if (!problem.equals(parserWarned.put(key, problem))) {
                    Log.warn(problem);
                }
            }
        }
    }

    private void update(EndpointState ep, int tokens) {
        if (ep.facts().engineContextLen() != tokens) {
            ep.facts().engineContextLen(tokens);
        }
        contexts.review(table.get().rules());
    }

    /**
     * GET {@code path} on the endpoint. SGLang's {@link SglangServerInfo#PATH} falls back to its deprecated alias on a
     * 404 (servers older than sgl-project/sglang#21463); the answer's URI says which one answered.
     */
    private java.util.concurrent.CompletableFuture<HttpResponse<String>> get(EndpointState ep, String path,
                                                                             GatewayConfig.Health h) {
        var first = client(ep).sendAsync(request(ep, path, h), HttpResponse.BodyHandlers.ofString());
        if (!SglangServerInfo.PATH.equals(path)) {
            return first;
        }
        return first.thenCompose(r -> r.statusCode() != 404 ? java.util.concurrent.CompletableFuture.completedFuture(r)
            : client(ep).sendAsync(request(ep, SglangServerInfo.DEPRECATED_PATH, h), HttpResponse.BodyHandlers.ofString()));
    }

    private static HttpRequest request(EndpointState ep, String path, GatewayConfig.Health h) {
        return HttpRequest.newBuilder(URI.create(ep.config().url() + path))
            .timeout(Duration.ofMillis(h.timeoutMs())).header("user-agent", "kvgate-ready").GET().build();
    }

    /** What SGLang endpoints' {@code /server_info} said against the configuration (the inventory and doctor read it). */
    public ServerInfoChecks serverInfo() {
        return serverInfo;
    }

    @Override
    public void close() {
        timer.shutdownNow();
    }
}
