package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import java.util.List;

/**
 * A rule as the routing stage runs it: its configuration, its endpoints' live state and its policy instance.
 * Immutable references; the policy's own state belongs to the routing stage.
 */
public final class Rule {
    private final RuleConfig config;
    private final EndpointState[] endpoints;
    private final EndpointState[] prefills;
    private final EndpointState[] decodes;
    private final RoutingPolicy policy;
    private final RoutingPolicy decodePolicy;

    private final io.kvgate.dataplane.kv.PromptPipeline pipeline;
    private final boolean needsPromptTokens;

    Rule(RuleConfig config, EndpointState[] endpoints, RoutingPolicy policy, RoutingPolicy decodePolicy,
         io.kvgate.dataplane.kv.PromptPipeline pipeline) {
        this.config = config;
        this.pipeline = pipeline;
        this.needsPromptTokens = RulePolicies.needsPromptTokens(config);
        this.endpoints = endpoints;
        this.policy = policy;
        this.decodePolicy = decodePolicy;
        this.prefills = java.util.Arrays.stream(endpoints).filter(e -> "prefill".equals(e.config().role())).toArray(EndpointState[]::new);
        this.decodes = java.util.Arrays.stream(endpoints).filter(e -> "decode".equals(e.config().role())).toArray(EndpointState[]::new);
    }

    /** The endpoints a request in {@code role} may go to. */
    EndpointState[] candidates(RouteRequest.Role role) {
        return switch (role) {
            case PREFILL -> prefills;
            case DECODE -> decodes;
            case ANY -> config.policy().equals("pd") ? prefills : endpoints;
        };
    }

    RoutingPolicy policyFor(RouteRequest.Role role) {
        return role == RouteRequest.Role.DECODE ? decodePolicy : policy;
    }

    /** The rule's exact prompt pipeline (tokenizer + chat template), never null (may lack a tokenizer). */
    public io.kvgate.dataplane.kv.PromptPipeline pipeline() {
        return pipeline;
    }

    /** Whether the I/O thread must render and tokenize the prompt before routing. */
    public boolean needsPromptTokens() {
        return needsPromptTokens;
    }

    public boolean isPd() {
        return "pd".equals(config.policy());
    }

    public RuleConfig config() {
        return config;
    }

    public String name() {
        return config.name();
    }

    public List<EndpointState> endpoints() {
        return List.of(endpoints);
    }

    RoutingPolicy policy() {
        return policy;
    }

    public List<EndpointState> prefillEndpoints() {
        return List.of(prefills);
    }
}
