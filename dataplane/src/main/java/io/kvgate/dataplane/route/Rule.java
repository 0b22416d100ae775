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
    private final RoutingPolicy policy;

    Rule(RuleConfig config, EndpointState[] endpoints, RoutingPolicy policy) {
        this.config = config;
        this.endpoints = endpoints;
        this.policy = policy;
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

    EndpointState[] endpointArray() {
        return endpoints;
    }

    RoutingPolicy policy() {
        return policy;
    }
}
