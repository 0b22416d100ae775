package io.kvgate.dataplane.admin;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.http.OpenAiErrors;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Rule;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;

/**
 * The admin routes, transport-independent (served over HTTP on {@code admin_listen}; the control socket and CLI use
 * the same API). Thread-safe: reads are snapshots, configuration changes go through {@link Gateway#applyConfig}.
 */
public final class AdminApi {
    /** One answer. */
    public record Reply(int status, String body, String contentType) {
        public static Reply json(int status, String body) {
            return new Reply(status, body, "application/json");
        }
    }

    static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final Gateway gateway;
    private final Map<String, Function<Request, Reply>> extra = new LinkedHashMap<>();

    /** A request to an extension route. */
    public record Request(String method, String path, String query, String body) {}

    public AdminApi(Gateway gateway) {
        this.gateway = gateway;
    }

    /** Adds a route ("METHOD /path") served by another component (inventory, explain, lookup...). */
    public void register(String methodAndPath, Function<Request, Reply> handler) {
        extra.put(methodAndPath, handler);
    }

    public Reply handle(String method, String uri, String body) {
        int q = uri.indexOf('?');
        String path = q < 0 ? uri : uri.substring(0, q);
        String query = q < 0 ? "" : uri.substring(q + 1);
        Function<Request, Reply> h = extra.get(method + " " + path);
        if (h != null) {
            return h.apply(new Request(method, path, query, body));
        }
        try {
            return switch (method + " " + path) {
                case "GET /admin/v1/config" -> Reply.json(200, JSON.writeValueAsString(gateway.config()));
                case "PUT /admin/v1/config", "POST /admin/v1/config" -> applyConfig(body);
                case "GET /admin/v1/endpoints" -> Reply.json(200, endpoints());
                case "POST /admin/v1/drain" -> {
                    gateway.startDrain();
                    yield Reply.json(200, "{\"draining\":true}");
                }
                default -> Reply.json(404, OpenAiErrors.json("unknown admin route " + method + " " + path
                    + " (routes: GET/PUT /admin/v1/config, GET /admin/v1/endpoints, POST /admin/v1/drain"
                    + (extra.isEmpty() ? "" : ", " + String.join(", ", extra.keySet())) + ")", "invalid_request_error", null, 404));
            };
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            return Reply.json(500, OpenAiErrors.json(e.getMessage(), "server_error", null, null));
        }
    }

    private Reply applyConfig(String yaml) {
        try {
            GatewayConfig next = GatewayConfig.parse(yaml);
            gateway.applyConfig(next);
            return Reply.json(200, "{\"applied\":true,\"rules\":" + next.rules().size() + "}");
        } catch (ConfigException e) {
            ObjectNode n = JSON.createObjectNode();
            ObjectNode err = n.putObject("error");
            err.put("message", e.getMessage());
            err.put("type", "invalid_request_error");
            ArrayNode problems = err.putArray("problems");
            e.problems().forEach(problems::add);
            return Reply.json(400, n.toString());
        } catch (Exception e) {
            return Reply.json(400, OpenAiErrors.json("configuration not applied: " + e.getMessage(), "invalid_request_error", null, null));
        }
    }

    private String endpoints() {
        gateway.router().wake();
        ObjectNode root = JSON.createObjectNode();
        ArrayNode rules = root.putArray("rules");
        for (Rule r : gateway.routeTable().rules()) {
            ObjectNode rn = rules.addObject();
            rn.put("name", r.name());
            rn.put("policy", r.config().policy());
            ArrayNode eps = rn.putArray("endpoints");
            for (EndpointState ep : r.endpoints()) {
                ObjectNode e = eps.addObject();
                e.put("url", ep.config().url());
                e.put("id", ep.id());
                e.put("healthy", ep.probeHealthy());
                e.put("breaker", ep.breaker().name().toLowerCase(java.util.Locale.ROOT));
                e.put("outstanding", ep.outstanding());
                e.put("routed", ep.routed.get());
                e.put("failures", ep.failures.get());
                if (ep.config().role() != null) {
                    e.put("role", ep.config().role());
                }
            }
        }
        return root.toPrettyString();
    }
}
