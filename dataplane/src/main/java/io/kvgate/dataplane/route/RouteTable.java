package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The applied rule set: immutable, built off the data path and handed to the routing stage as one command. I/O
 * threads read the current table to resolve a model to its rule; the routing stage owns the policies inside it.
 */
public final class RouteTable {
    private final GatewayConfig config;
    private final List<Rule> rules;
    private final Map<String, Rule> byModel;
    private final Map<String, Rule> byName;

    private RouteTable(GatewayConfig config, List<Rule> rules) {
        this.config = config;
        this.rules = List.copyOf(rules);
        this.byModel = new HashMap<>();
        this.byName = new HashMap<>();
        for (Rule r : rules) {
            byName.put(r.name(), r);
            for (String m : r.config().models()) {
                byModel.put(m, r);
            }
        }
    }

    /**
     * @param policyFactory builds the policy of a rule (load policies, or the KV/CHWBL/session tiers on top)
     */
    public static RouteTable build(GatewayConfig config, EndpointRegistry registry,
                                   Function<RuleBuildContext, RoutingPolicy> policyFactory) {
        List<Rule> rules = new ArrayList<>();
        for (RuleConfig rc : config.rules()) {
            EndpointState[] eps = new EndpointState[rc.endpoints().size()];
            for (int i = 0; i < eps.length; i++) {
                EndpointConfig ec = rc.endpoints().get(i);
                eps[i] = registry.resolve(ec);
            }
            rules.add(new Rule(rc, eps, policyFactory.apply(new RuleBuildContext(rc, eps)), RulePolicies.decodePolicy(rc),
                io.kvgate.dataplane.kv.PromptPipeline.forModelDir(rc.tokenizer())));
        }
        return new RouteTable(config, rules);
    }

    /** What a policy factory gets for one rule. */
    public record RuleBuildContext(RuleConfig rule, EndpointState[] endpoints) {}

    public GatewayConfig config() {
        return config;
    }

    public List<Rule> rules() {
        return rules;
    }

    public Rule ruleForModel(String model) {
        return model == null ? null : byModel.get(model);
    }

    public Rule ruleByName(String name) {
        return byName.get(name);
    }
}
