package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.EngineProfiles;
import java.util.ArrayList;
import java.util.List;

/**
 * A rule as the routing stage runs it: its configuration, its endpoints' live state, its policy instances and its
 * counters. Resolved once per request on the I/O thread ({@link RouteTable#ruleForModel}) and carried through the
 * ring. Immutable references; the policies' state belongs to the routing stage.
 */
public final class Rule {
    private final RuleConfig config;
    private final EndpointState[] endpoints;
    private final EndpointConfig[] endpointConfigs;
    private final EndpointState[] prefills;
    private final EndpointState[] decodes;
    private final RoutingPolicy policy;
    private final RoutingPolicy decodePolicy;
    private final RuleStats stats;
    private final boolean pd;
    private final boolean needsPromptTokens;
    private final int promptTokensRoutedOn;
    private final Object requestStage;
    /**
     * The newest table holding this rule (set by the table's constructor before the table is published; a rule
     * carried over unchanged into the next table is re-pointed when that table is built). The routing stage compares
     * it with its applied table to know whether the rule an I/O thread resolved is current.
     */
    RouteTable table;
    /** {@link RuleConfig#engineKind()}, parsed once: exchanges read it per request. */
    private final RuleConfig.Engine engine;
    /** What the data plane knows about that engine, looked up once. */
    private final EngineProfile profile;
    /** This rule's admission control, null when it has none (routing stage only: attached when the table is applied). */
    Admission admission;
    /** {@link #endpointsServing}'s cache (any I/O thread may replace it; every value is a complete snapshot). */
    private volatile RouteServers routeServers;

    Rule(RuleConfig config, EndpointState[] endpoints, RoutingPolicy policy, RoutingPolicy decodePolicy,
         RuleStats stats, Object requestStage) {
        this.config = config;
        this.endpoints = endpoints;
        this.endpointConfigs = config.endpoints().toArray(EndpointConfig[]::new);
        this.policy = policy;
        this.decodePolicy = decodePolicy;
        this.stats = stats;
        this.requestStage = requestStage;
        this.pd = config.policyKind() == RuleConfig.Policy.PD;
        this.engine = config.engineKind();
        this.profile = EngineProfiles.of(engine);
        this.needsPromptTokens = RulePolicies.needsPromptTokens(config);
        this.promptTokensRoutedOn = RulePolicies.promptTokensRoutedOn(config);
        List<EndpointState> p = new ArrayList<>();
        List<EndpointState> d = new ArrayList<>();
        for (int i = 0; i < endpoints.length; i++) {
            String role = endpointConfigs[i].role();
            if ("prefill".equals(role)) {
                p.add(endpoints[i]);
            } else if ("decode".equals(role)) {
                d.add(endpoints[i]);
            }
        }
        this.prefills = p.toArray(EndpointState[]::new);
        this.decodes = d.toArray(EndpointState[]::new);
    }

    /** The endpoints a request in {@code role} may go to ({@link Role#ANY} on a P/D rule: the prefills). */
    EndpointState[] candidates(Role role) {
        return switch (role) {
            case PREFILL -> prefills;
            case DECODE -> decodes;
            case ANY -> pd ? prefills : endpoints;
        };
    }

    RoutingPolicy policyFor(Role role) {
        return role == Role.DECODE ? decodePolicy : policy;
    }

    /**
     * What the request stage attached to this rule when the table was built (its prompt pipeline); opaque to the
     * routing stage, which never looks at it. Null when the table was built without one.
     */
    public Object requestStage() {
        return requestStage;
    }

    /** Whether the I/O thread must render and tokenize the prompt before routing. */
    public boolean needsPromptTokens() {
        return needsPromptTokens;
    }

    /** The most prompt tokens a request is routed on ({@link RulePolicies#promptTokensRoutedOn}), 0 for none. */
    public int promptTokensRoutedOn() {
        return promptTokensRoutedOn;
    }

    public boolean isPd() {
        return pd;
    }

    /**
     * The context length (tokens) requests of this rule are checked against: {@code max_model_len} when configured,
     * else the smallest one its endpoints reported (a request may go to any of them), 0 while none is known. Read per
     * request on the I/O threads: a few volatile reads, no allocation.
     */
    public int contextLength() {
        int configured = config.maxModelLen();
        if (configured > 0) {
            return configured;
        }
        int min = 0;
        for (EndpointState ep : endpoints) {
            int v = ep.facts().engineContextLen();
            if (v > 0 && (min == 0 || v < min)) {
                min = v;
            }
        }
        return min;
    }

    /**
     * The sorted ids of the endpoints that mount the chat ({@code chat}) or text completions route, when some endpoint
     * of this rule is known not to (a pooling-only vLLM, an SGLang embedding server); null when none is known not to
     * (every endpoint may take the request: the common case, a few volatile reads and no allocation); empty when no
     * endpoint mounts it. I/O threads, per request; the array is cached until an endpoint's reading changes.
     */
    public int[] endpointsServing(boolean chat) {
        int bit = EngineFacts.routeBit(chat);
        boolean excluded = false;
        for (EndpointState ep : endpoints) {
            if ((ep.facts().unmountedRoutes() & bit) != 0) {
                excluded = true;
                break;
            }
        }
        if (!excluded) {
            return null;
        }
        RouteServers c = routeServers;
        if (c == null || !c.matches(endpoints)) {
            c = new RouteServers(endpoints);
            routeServers = c;
        }
        return chat ? c.chat : c.completions;
    }

    /** The endpoints serving each route for one reading of the endpoints' {@link EngineFacts#unmountedRoutes}. */
    private static final class RouteServers {
        final int[] unmounted;
        final int[] chat;
        final int[] completions;

        RouteServers(EndpointState[] eps) {
            unmounted = new int[eps.length];
            for (int i = 0; i < eps.length; i++) {
                unmounted[i] = eps[i].facts().unmountedRoutes();
            }
            chat = serving(eps, unmounted, EngineFacts.ROUTE_CHAT);
            completions = serving(eps, unmounted, EngineFacts.ROUTE_COMPLETIONS);
        }

        private static int[] serving(EndpointState[] eps, int[] unmounted, int bit) {
            return java.util.stream.IntStream.range(0, eps.length).filter(i -> (unmounted[i] & bit) == 0)
                .map(i -> eps[i].id()).distinct().sorted().toArray();
        }

        boolean matches(EndpointState[] eps) {
            for (int i = 0; i < eps.length; i++) {
                if (eps[i].facts().unmountedRoutes() != unmounted[i]) {
                    return false;
                }
            }
            return true;
        }
    }

    /** The engine kind of this rule's endpoints (parsed once from the config; no per-request allocation). */
    public RuleConfig.Engine engine() {
        return engine;
    }

    /** The profile of this rule's engine. */
    public EngineProfile profile() {
        return profile;
    }

    public RuleConfig config() {
        return config;
    }

    public String name() {
        return config.name();
    }

    public RuleStats stats() {
        return stats;
    }

    public List<EndpointState> endpoints() {
        return List.of(endpoints);
    }

    RoutingPolicy policy() {
        return policy;
    }

    RoutingPolicy decodePolicy() {
        return decodePolicy;
    }

    public List<EndpointState> prefillEndpoints() {
        return List.of(prefills);
    }
}
