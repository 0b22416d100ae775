package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.MountedRoutes;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineFacts;

/**
 * Which of the two proxied completion routes an engine serves (review row 27), as the endpoint's state records them:
 * where an engine states them and how to read that is its profile's ({@link EngineProfile#routesPath},
 * {@link EngineProfile#mountedRoutes}: vLLM's {@code GET /openapi.json}, SGLang's {@code is_embedding} in {@code GET /server_info}, the deprecated {@code /get_server_info} on older servers). Stateless.
 */
public final class EngineRoutes {
    static final String CHAT = MountedRoutes.CHAT_PATH;
    static final String COMPLETIONS = MountedRoutes.COMPLETIONS_PATH;

    private EngineRoutes() {}

    /**
     * The {@link EndpointState#ROUTE_CHAT} / {@link EndpointState#ROUTE_COMPLETIONS} bits of the routes the answer
     * from the profile's {@link EngineProfile#routesPath} says the engine does not serve; -1 when the answer does not
     * say (vLLM: no {@code paths} object; SGLang: no boolean {@code is_embedding}).
     */
    public static int unmounted(EngineProfile engine, JsonNode body) {
        MountedRoutes mounted = engine.mountedRoutes(body);
        if (mounted == null) {
            return -1;
        }
        return (mounted.chat() ? 0 : EngineFacts.ROUTE_CHAT) | (mounted.completions() ? 0 : EngineFacts.ROUTE_COMPLETIONS);
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
            + ep.key() + " runs " + (stated.isEmpty() ? "none" : stated) + " (its GET /server_info)";
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
