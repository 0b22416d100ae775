package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineFacts;

/**
 * Where an engine says which of the two proxied completion routes it serves (review row 27), and how to read it:
 * <ul>
 *   <li>vLLM {@code GET /openapi.json}: FastAPI's schema of the app, whose {@code paths} are the routes it mounted.
 *       vLLM registers the generation family ({@code /v1/chat/completions}, {@code /v1/completions}, ...) only when
 *       the model's supported tasks include generation, and the pooling family otherwise
 *       (vllm/entrypoints/openai/api_server.py {@code build_app}); one process serves one family. 404 when vLLM runs
 *       with {@code --disable-fastapi-docs}: unknown.</li>
 *   <li>SGLang {@code GET /get_server_info}: its server arguments, {@code is_embedding} among them. SGLang mounts
 *       every route unconditionally, but an embedding server ({@code --is-embedding}) cannot generate.</li>
 * </ul>
 * Stateless.
 */
public final class EngineRoutes {
    static final String CHAT = "/v1/chat/completions";
    static final String COMPLETIONS = "/v1/completions";

    private EngineRoutes() {}

    /** The path an engine of this kind states its routes at, or null (not known: both are assumed served). */
    public static String path(RuleConfig.Engine engine) {
        return switch (engine) {
            case VLLM -> "/openapi.json";
            case SGLANG -> "/get_server_info";
            default -> null;
        };
    }

    /**
     * The {@link EngineFacts#ROUTE_CHAT} / {@link EngineFacts#ROUTE_COMPLETIONS} bits of the routes the answer
     * from {@link #path} says the engine does not serve; -1 when the answer does not say (no {@code paths} object,
     * no boolean {@code is_embedding}).
     */
    public static int unmounted(RuleConfig.Engine engine, JsonNode body) {
        if (engine == RuleConfig.Engine.VLLM) {
            JsonNode paths = body.path("paths");
            if (!paths.isObject()) {
                return -1;
            }
            return (paths.has(CHAT) ? 0 : EngineFacts.ROUTE_CHAT) | (paths.has(COMPLETIONS) ? 0 : EngineFacts.ROUTE_COMPLETIONS);
        }
        if (engine == RuleConfig.Engine.SGLANG) {
            JsonNode e = body.get("is_embedding");
            if (e == null || !e.isBoolean()) {
                return -1;
            }
            return e.asBoolean() ? EngineFacts.ROUTE_CHAT | EngineFacts.ROUTE_COMPLETIONS : 0;
        }
        return -1;
    }

    /**
     * The tool-call parser SGLang's server info names ({@code tool_call_parser}: its {@code --tool-call-parser}
     * argument): the name, "" when it runs none (null), or null when the answer does not say.
     */
    public static String toolCallParser(RuleConfig.Engine engine, JsonNode body) {
        if (engine != RuleConfig.Engine.SGLANG || !body.has("tool_call_parser")) {
            return null;
        }
        JsonNode v = body.get("tool_call_parser");
        return v.isTextual() ? v.asText() : v.isNull() ? "" : null;
    }

    /**
     * What is wrong with a rule's declared {@code tool_call_parser} given what an endpoint says it runs, or null:
     * the rule says none and the engine runs one (clients are refused what the engine could serve), or the rule
     * names a parser and the engine runs another or none.
     */
    public static String parserMismatch(RuleConfig rule, EndpointState ep) {
        String declared = rule.toolCallParser();
        String stated = ep.facts().statedToolCallParser();
        if (declared == null || stated == null) {
            return null;
        }
        boolean same = rule.withoutToolCallParser() ? stated.isEmpty() : declared.equals(stated);
        return same ? null : "rule '" + rule.name() + "' declares tool_call_parser " + declared + " but endpoint "
            + ep.key() + " runs " + (stated.isEmpty() ? "none" : stated) + " (its GET /get_server_info)";
    }

    /** The routes named by {@code bits}, for messages and read-backs. */
    public static String describe(int bits) {
        if (bits == (EngineFacts.ROUTE_CHAT | EngineFacts.ROUTE_COMPLETIONS)) {
            return CHAT + " and " + COMPLETIONS;
        }
        return (bits & EngineFacts.ROUTE_CHAT) != 0 ? CHAT : (bits & EngineFacts.ROUTE_COMPLETIONS) != 0 ? COMPLETIONS : "none";
    }

    /** The route path of a request. */
    public static String route(boolean chat) {
        return chat ? CHAT : COMPLETIONS;
    }
}
