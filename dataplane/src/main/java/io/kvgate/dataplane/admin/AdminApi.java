package io.kvgate.dataplane.admin;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.control.BuildInfo;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.ConfigTree;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.config.AppliedConfig;
import io.kvgate.dataplane.config.ConfigCheck;
import io.kvgate.dataplane.config.ControlPlane;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.config.RestartRequiredException;
import io.kvgate.dataplane.metrics.MetricsExposition;
import io.kvgate.dataplane.openai.OpenAiErrors;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.ready.EngineRoutes;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineFacts;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The admin and control routes, transport-independent: served over HTTP on {@code admin_listen} (token-checked when
 * {@code admin_token} is set) and over the control socket (peer uid checked), with the same JSON either way.
 * Thread-safe: reads are snapshots; every configuration change goes through {@link ControlPlane#reload}, so the
 * admin API, the control socket, SIGHUP and a PATCH all apply configurations the same way.
 */
public final class AdminApi {
    /** One answer. */
    public record Reply(int status, String body, String contentType) {
        public static Reply json(int status, String body) {
            return new Reply(status, body, "application/json");
        }
    }

    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final ControlPlane control;
    private final RoutingStage router;
    private final EndpointRegistry registry;
    /** The KV-event subscribers' status (empty without KV routing): admin depends on no kv class (kv registers routes here). */
    private final Supplier<List<SubscriberStatus>> kvSubscribers;
    private final Map<String, Function<Request, Reply>> extra = new LinkedHashMap<>();
    private final Map<Path, String> fileDigests = new ConcurrentHashMap<>();
    private volatile Supplier<ObjectNode> readiness = () -> null;
    private volatile PrometheusRegistry metricsRegistry;

    /** A request to an extension route. */
    public record Request(String method, String path, String query, String body) {}

    public AdminApi(ControlPlane control, RoutingStage router, EndpointRegistry registry,
                    Supplier<List<SubscriberStatus>> kvSubscribers) {
        this.control = control;
        this.router = router;
        this.registry = registry;
        this.kvSubscribers = kvSubscribers;
    }

    /** Adds a route ("METHOD /path") served by another component (inventory, explain, lookup...). */
    public void register(String methodAndPath, Function<Request, Reply> handler) {
        extra.put(methodAndPath, handler);
    }

    /** The registry {@code GET /metrics} scrapes (installed by the composition root). */
    public void metrics(PrometheusRegistry registry) {
        this.metricsRegistry = registry;
    }

    /**
     * {@code GET /metrics} (any query): the registry's page in the format {@code accept} asks for; null for any other
     * path, or before a registry is installed (then the route is unknown, as before).
     */
    public MetricsExposition.Page metricsPage(String uri, String accept) {
        int q = uri.indexOf('?');
        PrometheusRegistry r = metricsRegistry;
        return r != null && (q < 0 ? uri : uri.substring(0, q)).equals("/metrics") ? MetricsExposition.scrape(r, accept) : null;
    }

    /** What {@code status} reports about readiness (installed by the composition root). */
    public void readiness(Supplier<ObjectNode> report) {
        this.readiness = report;
    }

    public Reply handle(String method, String uri, String body) {
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        String query = q < 0 ? "" : uri.substring(q + 1);
        Function<Request, Reply> h = extra.get(method + " " + path);
        if (h != null) {
            return h.apply(new Request(method, path, query, body));
        }
        if (path.startsWith("/control/v1/endpoints/")) {
            return endpointAction(method, path.substring("/control/v1/endpoints/".length()), query, body);
        }
        if (path.startsWith("/control/v1/rules/")) {
            return method.equals("PATCH") ? patchRule(path.substring("/control/v1/rules/".length()), body)
                : notFound(method, path);
        }
        return switch (method + " " + path) {
            case "GET /admin/v1/config", "GET /control/v1/config" -> configYaml();
            case "PUT /admin/v1/config", "POST /admin/v1/config", "PUT /control/v1/config" -> applyYaml(body);
            case "GET /admin/v1/endpoints", "GET /control/v1/endpoints" -> Reply.json(200, endpoints());
            case "POST /admin/v1/drain", "POST /control/v1/drain" -> {
                control.drain(true);
                yield Reply.json(200, "{\"draining\":true}");
            }
            case "DELETE /admin/v1/drain", "POST /admin/v1/undrain", "POST /control/v1/undrain" -> {
                control.drain(false);
                yield Reply.json(200, "{\"draining\":false}");
            }
            case "POST /admin/v1/reload", "POST /control/v1/reload" -> reloadFile();
            case "GET /admin/v1/status", "GET /control/v1/status" -> Reply.json(200, status().toPrettyString());
            case "GET /admin/v1/stats", "GET /control/v1/stats" -> Reply.json(200, stats().toPrettyString());
            case "GET /control/v1/rules", "GET /admin/v1/rules" -> Reply.json(200, rules().toPrettyString());
            case "GET /control/v1/config/diff", "POST /control/v1/config/diff" -> diff(body);
            case "POST /control/v1/config/check" -> check(body);
            case "PUT /control/v1/log-level", "POST /control/v1/log-level" -> logLevel(body);
            case "GET /control/v1/log-level" -> Reply.json(200, "{\"level\":\"" + Log.level().name().toLowerCase(Locale.ROOT) + "\"}");
            default -> notFound(method, path);
        };
    }

    private Reply notFound(String method, String path) {
        return Reply.json(404, OpenAiErrors.json("unknown admin route " + method + " " + path
            + " (routes: GET/PUT /admin/v1/config, GET /admin/v1/endpoints, POST|DELETE /admin/v1/drain, POST /admin/v1/reload,"
            + " GET /admin/v1/status, GET /admin/v1/stats, GET /control/v1/rules, POST /control/v1/endpoints/{id}/drain|undrain|weight,"
            + " PATCH /control/v1/rules/{name}, GET|POST /control/v1/config/diff, POST /control/v1/config/check,"
            + " PUT /control/v1/log-level" + (extra.isEmpty() ? "" : ", " + String.join(", ", extra.keySet())) + ")",
            "invalid_request_error", null, 404));
    }

    // ---- configuration ----

    private Reply configYaml() {
        AppliedConfig a = control.applied();
        String yaml = "# kvgate configuration version " + a.version() + ", digest " + a.digest() + "\n"
            + "# Secrets are shown as " + GatewayConfig.REDACTED + "; PUT this document back with them unchanged to keep them.\n"
            + ConfigTree.toYaml(a.config());
        return new Reply(200, yaml, "application/yaml; charset=utf-8");
    }

    /** Parses an uploaded document the way start-up does (relative paths against the --config directory). */
    private GatewayConfig parseUpload(String yaml) throws ConfigException {
        String withSecrets = ConfigTree.keepRedactedSecrets(yaml, control.applied().config());
        return ConfigCheck.parse(withSecrets, control.baseDir());
    }

    private Reply applyYaml(String yaml) {
        try {
            return outcome(control.reload(parseUpload(yaml)));
        } catch (ConfigException e) {
            return problems(400, e.getMessage(), e.problems());
        } catch (RestartRequiredException e) {
            return restartRequired(e);
        }
    }

    private Reply reloadFile() {
        Path file = control.configFile();
        if (file == null) {
            return Reply.json(409, OpenAiErrors.json("this gateway was not started with --config: there is no file to reload"
                + " (PUT /admin/v1/config with a document instead)", "invalid_request_error", null, null));
        }
        try {
            return outcome(control.reload(ConfigCheck.load(file)));
        } catch (ConfigException e) {
            return problems(400, file + ": " + e.getMessage(), e.problems());
        } catch (RestartRequiredException e) {
            return restartRequired(e);
        }
    }

    private static Reply outcome(ReloadOutcome o) {
        ObjectNode n = JSON.createObjectNode();
        n.put("applied", o.applied());
        if (!o.applied()) {
            n.put("unchanged", true);
        }
        n.put("version", o.version());
        n.put("digest", o.digest());
        ArrayNode ch = n.putArray("changes");
        o.changes().forEach(ch::add);
        return Reply.json(200, n.toPrettyString());
    }

    private static Reply problems(int status, String message, List<String> problems) {
        ObjectNode n = JSON.createObjectNode();
        ObjectNode err = n.putObject("error");
        err.put("message", message);
        err.put("type", "invalid_request_error");
        ArrayNode p = err.putArray("problems");
        problems.forEach(p::add);
        return Reply.json(status, n.toPrettyString());
    }

    private static Reply restartRequired(RestartRequiredException e) {
        ObjectNode n = JSON.createObjectNode();
        ObjectNode err = n.putObject("error");
        err.put("message", e.getMessage());
        err.put("type", "conflict");
        ArrayNode p = err.putArray("restart_only");
        e.fields().forEach(p::add);
        return Reply.json(409, n.toPrettyString());
    }

    /** An uploaded document, or the --config file when the body is empty. */
    private GatewayConfig candidate(String body) throws ConfigException {
        if (body == null || body.isBlank()) {
            Path file = control.configFile();
            if (file == null) {
                throw new ConfigException("send a YAML configuration in the body (this gateway has no --config file)");
            }
            return ConfigCheck.load(file);
        }
        return parseUpload(body);
    }

    private Reply diff(String body) {
        try {
            GatewayConfig next = candidate(body);
            GatewayConfig cur = control.applied().config();
            ObjectNode n = JSON.createObjectNode();
            n.put("version", control.applied().version());
            ArrayNode ch = n.putArray("changes");
            ConfigTree.diff(cur, next).forEach(ch::add);
            ArrayNode ro = n.putArray("restart_only");
            cur.restartOnlyChanges(next).forEach(ro::add);
            return Reply.json(200, n.toPrettyString());
        } catch (ConfigException e) {
            return problems(400, e.getMessage(), e.problems());
        }
    }

    private Reply check(String body) {
        try {
            GatewayConfig next = candidate(body);
            ObjectNode n = JSON.createObjectNode();
            n.put("valid", true);
            n.put("rules", next.rules().size());
            n.put("digest", ConfigTree.digest(next));
            ArrayNode ro = n.putArray("restart_only");
            control.applied().config().restartOnlyChanges(next).forEach(ro::add);
            return Reply.json(200, n.toPrettyString());
        } catch (ConfigException e) {
            return problems(400, e.getMessage(), e.problems());
        }
    }

    private Reply patchRule(String name, String body) {
        Map<String, Object> changes = new LinkedHashMap<>();
        try {
            JsonNode root = JSON.readTree(body == null || body.isBlank() ? "{}" : body);
            if (!root.isObject() || root.isEmpty()) {
                return Reply.json(400, OpenAiErrors.json("PATCH body must be a non-empty JSON object of tunables, e.g. "
                    + "{\"kv.load_cap_factor\": 1.2}", "invalid_request_error", null, null));
            }
            flatten("", root, changes);
        } catch (IOException e) {
            return Reply.json(400, OpenAiErrors.json("PATCH body is not JSON: " + e.getMessage(), "invalid_request_error", null, null));
        }
        try {
            GatewayConfig cur = control.applied().config();
            GatewayConfig next = ConfigCheck.parse(ConfigTree.patchRule(cur, name, changes), control.baseDir());
            return outcome(control.reload(next));
        } catch (ConfigException e) {
            return problems(400, e.getMessage(), e.problems());
        } catch (RestartRequiredException e) {
            return restartRequired(e);
        }
    }

    private static void flatten(String prefix, JsonNode n, Map<String, Object> out) {
        if (n.isObject()) {
            for (Map.Entry<String, JsonNode> e : n.properties()) {
                flatten(prefix.isEmpty() ? e.getKey() : prefix + "." + e.getKey(), e.getValue(), out);
            }
        } else if (n.isIntegralNumber()) {
            out.put(prefix, n.canConvertToInt() ? (Object) n.intValue() : (Object) n.longValue());
        } else if (n.isNumber()) {
            out.put(prefix, n.doubleValue());
        } else if (n.isBoolean()) {
            out.put(prefix, n.booleanValue());
        } else if (n.isNull()) {
            out.put(prefix, null);
        } else {
            out.put(prefix, n.asText());
        }
    }

    private Reply logLevel(String body) {
        String level = body == null ? "" : body.trim();
        try {
            JsonNode n = JSON.readTree(level);
            if (n != null && n.has("level")) {
                level = n.get("level").asText();
            } else if (n != null && n.isTextual()) {
                level = n.asText();
            }
        } catch (IOException e) {
            // a bare word: the level itself
        }
        Log.Level l = Log.parse(level);
        if (l == null) {
            return Reply.json(400, OpenAiErrors.json("level: value '" + level + "' must be one of error|warn|info|debug",
                "invalid_request_error", "level", null));
        }
        Log.level(l);
        Log.info("log level set to " + l.name().toLowerCase(Locale.ROOT));
        return Reply.json(200, "{\"level\":\"" + l.name().toLowerCase(Locale.ROOT) + "\"}");
    }

    // ---- endpoints ----

    private EndpointState findEndpoint(String id) {
        for (EndpointState ep : registry.all()) {
            if (ep.key().equals(id) || String.valueOf(ep.id()).equals(id) || ep.config().url().equals(id)) {
                return ep;
            }
        }
        return null;
    }

    private boolean configured(EndpointState ep) {
        for (Rule r : router.table().rules()) {
            if (r.endpoints().contains(ep)) {
                return true;
            }
        }
        return false;
    }

    private Reply endpointAction(String method, String rest, String query, String body) {
        int slash = rest.lastIndexOf('/');
        if (!method.equals("POST") || slash <= 0) {
            return notFound(method, "/control/v1/endpoints/" + rest);
        }
        String id = java.net.URLDecoder.decode(rest.substring(0, slash), StandardCharsets.UTF_8);
        String action = rest.substring(slash + 1);
        EndpointState ep = findEndpoint(id);
        if (ep == null || !configured(ep)) {
            return Reply.json(404, OpenAiErrors.json("no configured endpoint '" + id + "' (use its id, host:port or url; see GET /admin/v1/endpoints)",
                "invalid_request_error", "id", null));
        }
        switch (action) {
            case "drain", "undrain" -> {
                boolean on = action.equals("drain");
                // ctl drain ENDPOINT --migrate [--within MS]: its live streams move too (mid-stream failover)
                boolean migrate = on && queryValue(query, "migrate") != null && !"false".equals(queryValue(query, "migrate"));
                long within = DEFAULT_MIGRATE_WITHIN_MS;
                String w = queryValue(query, "within");
                if (w != null) {
                    try {
                        within = Long.parseLong(w);
                    } catch (NumberFormatException e) {
                        within = -1;
                    }
                    if (!migrate || within < 1 || within > 600_000) {
                        return Reply.json(400, OpenAiErrors.json("within=" + w + ": must be an integer in [1, 600000] ms and"
                            + " comes with migrate=true (ctl drain ENDPOINT --migrate --within MS)", "invalid_request_error",
                            "within", null));
                    }
                }
                if (!router.drain(ep, on)) {
                    return Reply.json(503, OpenAiErrors.json("the routing stage did not apply the " + action + " of '" + ep.key()
                        + "' within 5 s (its ring is full or it is stalled); retry: draining is idempotent", "server_error", null, null));
                }
                if (migrate) {
                    control.migrateStreams(ep, within);
                }
                Log.info("endpoint " + ep.key() + (on ? " drained: no new requests; " + ep.outstanding() + " in flight "
                    + (migrate ? "move or finish within " + within + " ms" : "finish") : " undrained"));
                return Reply.json(200, "{\"endpoint\":\"" + ep.key() + "\",\"drained\":" + on + ",\"outstanding\":" + ep.outstanding()
                    + (migrate ? ",\"migrate\":true,\"within_ms\":" + within : "") + "}");
            }
            case "weight" -> {
                Integer w = weightOf(query, body);
                if (w == null) {
                    return Reply.json(400, OpenAiErrors.json("weight: send {\"weight\": N} (or ?weight=N) with N in [1, 1000000]",
                        "invalid_request_error", "weight", null));
                }
                try {
                    GatewayConfig next = ConfigCheck.parse(ConfigTree.withEndpointWeight(control.applied().config(), ep.key(), w),
                        control.baseDir());
                    return outcome(control.reload(next));
                } catch (ConfigException e) {
                    return problems(400, e.getMessage(), e.problems());
                } catch (RestartRequiredException e) {
                    return restartRequired(e);
                }
            }
            default -> {
                return notFound(method, "/control/v1/endpoints/" + rest);
            }
        }
    }

    /** {@code ctl drain ENDPOINT --migrate} without {@code --within}: how long streams that cannot move may finish. */
    static final long DEFAULT_MIGRATE_WITHIN_MS = 2_000;

    /** The value of {@code name} in a query string, or null when absent ({@code ""} for a bare name). */
    private static String queryValue(String query, String name) {
        for (String kv : query.split("&")) {
            int eq = kv.indexOf('=');
            String k = eq < 0 ? kv : kv.substring(0, eq);
            if (k.equals(name)) {
                return eq < 0 ? "" : java.net.URLDecoder.decode(kv.substring(eq + 1), StandardCharsets.UTF_8);
            }
        }
        return null;
    }

    private static Integer weightOf(String query, String body) {
        String v = null;
        for (String kv : query.split("&")) {
            if (kv.startsWith("weight=")) {
                v = kv.substring(7);
            }
        }
        if (v == null && body != null && !body.isBlank()) {
            try {
                JsonNode n = JSON.readTree(body);
                v = n.has("weight") ? n.get("weight").asText() : n.asText();
            } catch (IOException e) {
                v = body.trim();
            }
        }
        try {
            int w = Integer.parseInt(v);
            return w >= 1 && w <= 1_000_000 ? w : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    private String endpoints() {
        router.wake();
        ObjectNode root = JSON.createObjectNode();
        ArrayNode rules = root.putArray("rules");
        for (Rule r : router.table().rules()) {
            ObjectNode rn = rules.addObject();
            rn.put("name", r.name());
            rn.put("policy", r.config().policy());
            ArrayNode eps = rn.putArray("endpoints");
            for (EndpointState ep : r.endpoints()) {
                ObjectNode e = eps.addObject();
                e.put("url", ep.config().url());
                e.put("id", ep.id());
                e.put("key", ep.key());
                e.put("weight", ep.config().weight());
                e.put("healthy", ep.probeHealthy());
                e.put("drained", ep.drained());
                e.put("breaker", ep.breaker().state().name().toLowerCase(Locale.ROOT));
                e.put("outstanding", ep.outstanding());
                e.put("load", ep.load());
                e.put("load_source", ep.loadEstimate().loadSource().name().toLowerCase(Locale.ROOT));
                e.put("routed", ep.loadEstimate().routedTotal());
                e.put("failures", ep.breaker().failures());
                if (ep.config().role() != null) {
                    e.put("role", ep.config().role());
                }
            }
        }
        return root.toPrettyString();
    }

    // ---- rules and status ----

    /**
     * The chat template in use for the rule, as its engine resolves it (issue #13 item 6): where it comes from
     * ({@code chat_template} file, processor, tokenizer) and the SHA-256 of its text; {@code with_tools} when a
     * request with tools renders with another one. {@code tokenizer.chat_template_sha256} repeats the plain digest.
     */
    private void chatTemplate(ObjectNode rn, ObjectNode tok, RuleConfig rc) {
        Rule live = router.table().ruleByName(rc.name());
        io.kvgate.dataplane.prompt.PromptPipeline p = live == null ? null : io.kvgate.dataplane.prompt.PromptPipeline.of(live);
        var plain = p == null ? null : p.templateFor(false);
        var tools = p == null ? null : p.templateFor(true);
        if (rc.tokenizer() != null) {
            tok.put("chat_template_sha256", plain == null ? null : plain.sha256());
        }
        if (plain == null && tools == null) {
            rn.putNull("chat_template");
            return;
        }
        ObjectNode ct = rn.putObject("chat_template");
        templateJson(ct, plain);
        if (rc.chatTemplate() != null) {
            ct.put("path", rc.chatTemplate().path());
        }
        if (tools != plain) {
            templateJson(ct.putObject("with_tools"), tools);
        }
    }

    private static void templateJson(ObjectNode o, io.kvgate.dataplane.prompt.PromptPipeline.Template t) {
        if (t == null) {
            o.putNull("source");
            o.putNull("sha256");
        } else {
            o.put("source", t.source().label());
            o.put("sha256", t.sha256());
        }
    }

    /** The rule's LoRA adapters: configured ones, and those discovered on its endpoints with the endpoints listing them. */
    private void adapters(ObjectNode rn, RuleConfig rc) {
        ObjectNode a = rn.putObject("adapters");
        a.putPOJO("configured", rc.adapterNames());
        ObjectNode d = a.putObject("discovered");
        Rule live = router.table().ruleByName(rc.name());
        java.util.TreeMap<String, io.kvgate.dataplane.route.AdapterDirectory.Served> found = new java.util.TreeMap<>(router.adapters().snapshot());
        for (var e : found.entrySet()) {
            if (live == null || e.getValue().rule() != live) {
                continue;
            }
            ArrayNode eps = d.putArray(e.getKey());
            for (EndpointState ep : live.endpoints()) {
                if (e.getValue().servedBy(ep)) {
                    eps.add(ep.config().url());
                }
            }
        }
    }

    /** Each rule's effective settings read back, with what its KV routing depends on. */
    ObjectNode rules() {
        AppliedConfig a = control.applied();
        List<SubscriberStatus> subs = kvSubscribers.get();
        Map<String, Object> tree = ConfigTree.toTree(a.config(), false);
        List<?> ruleTrees = (List<?>) tree.get("rules");
        ObjectNode root = JSON.createObjectNode();
        root.put("config_version", a.version());
        ArrayNode arr = root.putArray("rules");
        for (int i = 0; i < a.config().rules().size(); i++) {
            RuleConfig rc = a.config().rules().get(i);
            ObjectNode rn = arr.addObject();
            rn.put("name", rc.name());
            rn.putPOJO("models", rc.models());
            rn.put("engine", rc.engine());
            rn.put("policy", rc.policy());
            rn.put("fallback", rc.fallback());
            boolean pd = rc.policyKind() == RuleConfig.Policy.PD;
            ObjectNode topo = rn.putObject("topology");
            topo.put("kind", pd ? "prefill_decode" : "single_pool");
            topo.put("endpoints", rc.endpoints().size());
            if (pd) {
                topo.put("prefill", rc.endpoints().stream().filter(e -> "prefill".equals(e.role())).count());
                topo.put("decode", rc.endpoints().stream().filter(e -> "decode".equals(e.role())).count());
            }
            rn.put("hash_algo", rc.hashAlgo());
            rn.put("block_size", rc.blockSize());
            rn.put("hash_seed", rc.hashSeed());
            rn.put("kv_key_mode", rc.kvKeyMode());
            ObjectNode tok = rn.putObject("tokenizer");
            if (rc.tokenizer() == null) {
                tok.putNull("dir");
            } else {
                tok.put("dir", rc.tokenizer());
                tok.put("tokenizer_sha256", fileDigest(Path.of(rc.tokenizer())));
            }
            chatTemplate(rn, tok, rc);
            adapters(rn, rc);
            int expected = 0;
            int connected = 0;
            for (EndpointConfig ec : rc.endpoints()) {
                if (ec.kvEvents() == null) {
                    continue;
                }
                expected += ec.dpRanks();
                EndpointState ep = registry.get(ec.key());
                for (SubscriberStatus s : subs) {
                    if (ep != null && s.endpointId() == ep.id() && s.connected()) {
                        connected++;
                    }
                }
            }
            ObjectNode kvn = rn.putObject("kv_subscribers");
            kvn.put("expected", expected);
            kvn.put("connected", connected);
            rn.set("context_length", contextLength(rc, router.table().ruleByName(rc.name())));
            rn.set("routes", routes(router.table().ruleByName(rc.name())));
            rn.set("settings", JSON.valueToTree(ruleTrees.get(i)));
        }
        return root;
    }

    /**
     * The context length a rule's requests are checked against and where it came from: {@code configured}
     * ({@code max_model_len}), {@code discovered} (the smallest its endpoints state), or {@code unknown} (the engines
     * judge every request); each endpoint's own value, and what is wrong with them.
     */
    private static ObjectNode contextLength(RuleConfig rc, Rule live) {
        ObjectNode c = JSON.createObjectNode();
        int tokens = live == null ? rc.maxModelLen() : live.contextLength();
        if (tokens > 0) {
            c.put("tokens", tokens);
        } else {
            c.putNull("tokens");
        }
        c.put("source", rc.maxModelLen() > 0 ? "configured" : tokens > 0 ? "discovered" : "unknown");
        c.put("on_context_overflow", rc.onContextOverflow());
        ObjectNode eps = c.putObject("endpoints");
        if (live != null) {
            for (EndpointState ep : live.endpoints()) {
                if (ep.facts().engineContextLen() > 0) {
                    eps.put(ep.key(), ep.facts().engineContextLen());
                } else {
                    eps.putNull(ep.key());
                }
            }
            String problem = io.kvgate.dataplane.ready.ContextDiscovery.problem(live);
            if (problem != null) {
                c.put("warning", problem);
            }
        }
        return c;
    }

    /**
     * Which completion routes each endpoint mounts, as its engine states it (review row 27): per endpoint the routes it
     * does not mount and where that was read, or {@code "unknown"} (nothing read: every route assumed mounted).
     */
    private static ObjectNode routes(Rule live) {
        ObjectNode out = JSON.createObjectNode();
        if (live == null) {
            return out;
        }
        for (EndpointState ep : live.endpoints()) {
            ObjectNode e = out.putObject(ep.key());
            if (ep.facts().statedToolCallParser() != null) { // SGLang states it; absent: unknown
                if (ep.facts().statedToolCallParser().isEmpty()) {
                    e.putNull("tool_call_parser");
                } else {
                    e.put("tool_call_parser", ep.facts().statedToolCallParser());
                }
                String mismatch = EngineRoutes.parserMismatch(live.config(), ep);
                if (mismatch != null) {
                    e.put("warning", mismatch);
                }
            }
            if (ep.facts().routesSource() == null) {
                e.put("source", "unknown");
                continue;
            }
            e.put("source", ep.facts().routesSource());
            var un = e.putArray("unmounted");
            for (boolean chat : new boolean[] {true, false}) {
                if ((ep.facts().unmountedRoutes() & EngineFacts.routeBit(chat)) != 0) {
                    un.add(EngineRoutes.route(chat));
                }
            }
        }
        return out;
    }

    private String fileDigest(Path dir) {
        Path f = Files.isRegularFile(dir.resolve("tokenizer.json")) ? dir.resolve("tokenizer.json") : dir.resolve("tokenizer.json.gz");
        return fileDigests.computeIfAbsent(f, p -> {
            try {
                return sha256(Files.readAllBytes(p));
            } catch (IOException e) {
                return "unreadable: " + e.getMessage();
            }
        });
    }

    private static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The routing counters of every rule in one read, cumulative since start (carried over reloads of the same rule):
     * KV lookups, prompt and matched blocks (their ratio is the hit ratio the gateway predicted), fall-backs by reason
     * (where the hit ratio was lost) and decisions by tier. Read-only; the status page polls it and keeps its own
     * ring of samples, so rates over the last minutes are differences of two reads ({@code at_ms} is the read's
     * wall-clock time).
     */
    ObjectNode stats() {
        ObjectNode root = JSON.createObjectNode();
        root.put("at_ms", System.currentTimeMillis());
        root.put("config_version", control.applied().version());
        ArrayNode rules = root.putArray("rules");
        for (Rule r : router.table().rules()) {
            io.kvgate.dataplane.route.RuleStats st = r.stats();
            ObjectNode rn = rules.addObject();
            rn.put("name", r.name());
            rn.put("policy", r.config().policy());
            rn.put("lookups", st.lookups());
            rn.put("prompt_blocks", st.promptBlocks());
            rn.put("matched_blocks", st.matchedBlocks());
            rn.put("zero_hit_watchdog", st.watchdogFirings());
            ObjectNode misses = rn.putObject("misses");
            for (io.kvgate.dataplane.route.RuleStats.MissReason m : io.kvgate.dataplane.route.RuleStats.MissReason.values()) {
                misses.put(m.name().toLowerCase(Locale.ROOT), st.missCount(m));
            }
            ObjectNode tiers = rn.putObject("tiers");
            for (io.kvgate.dataplane.route.RuleStats.Tier t : io.kvgate.dataplane.route.RuleStats.Tier.values()) {
                tiers.put(t.name().toLowerCase(Locale.ROOT), st.tierCount(t));
            }
        }
        return root;
    }

    ObjectNode status() {
        AppliedConfig a = control.applied();
        ObjectNode n = JSON.createObjectNode();
        n.put("config_version", a.version());
        n.put("config_digest", a.digest());
        n.put("config_applied_at_ms", a.appliedAtEpochMs());
        n.put("config_file", control.configFile() == null ? null : control.configFile().toString());
        n.put("draining", control.draining());
        n.put("log_level", Log.level().name().toLowerCase(Locale.ROOT));
        BuildInfo build = BuildInfo.current();
        ObjectNode version = n.putObject("version"); // what is running, for ctl status across a fleet mid-upgrade
        version.put("version", build.version());
        version.put("commit", build.commit());
        version.put("java", build.javaVersion());
        ObjectNode ready = readiness.get();
        if (ready != null) {
            n.set("readiness", ready);
        }
        return n;
    }
}
