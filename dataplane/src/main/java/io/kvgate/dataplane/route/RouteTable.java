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
    private final EndpointRegistry registry;
    private final List<EndpointState> staged;
    private final List<EndpointConfig> stagedConfigs;
    private final java.util.concurrent.CountDownLatch installed = new java.util.concurrent.CountDownLatch(1);

    private RouteTable(GatewayConfig config, List<Rule> rules, EndpointRegistry registry, List<EndpointState> staged,
                       List<EndpointConfig> stagedConfigs) {
        this.config = config;
        this.registry = registry;
        this.staged = staged;
        this.stagedConfigs = stagedConfigs;
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
        return build(config, registry, policyFactory, null);
    }

    /**
     * Builds the next table without changing anything live: endpoints are staged (see {@link EndpointRegistry#stage})
     * and their new configurations are installed by the routing stage when it applies the table, between two
     * decisions. A rule whose configuration is unchanged from {@code previous} is carried over whole, with its
     * policy state (session pins, speculative overlay, prefix caches).
     */
    public static RouteTable build(GatewayConfig config, EndpointRegistry registry,
                                   Function<RuleBuildContext, RoutingPolicy> policyFactory, RouteTable previous) {
        List<Rule> rules = new ArrayList<>();
        List<EndpointState> staged = new ArrayList<>();
        List<EndpointConfig> stagedConfigs = new ArrayList<>();
        Map<String, EndpointState> byKey = new HashMap<>(); // one state per endpoint even when new and in two rules
        for (RuleConfig rc : config.rules()) {
            EndpointState[] eps = new EndpointState[rc.endpoints().size()];
            for (int i = 0; i < eps.length; i++) {
                EndpointConfig ec = rc.endpoints().get(i);
                eps[i] = byKey.computeIfAbsent(ec.key(), k -> registry.stage(ec));
                staged.add(eps[i]);
                stagedConfigs.add(ec);
            }
            Rule same = previous == null ? null : previous.ruleByName(rc.name());
            if (same != null && same.config().equals(rc)) {
                rules.add(same);
                continue;
            }
            rules.add(new Rule(rc, eps, policyFactory.apply(new RuleBuildContext(rc, eps)), RulePolicies.decodePolicy(rc),
                io.kvgate.dataplane.kv.PromptPipeline.forModelDir(rc.tokenizer())));
        }
        RouteTable t = new RouteTable(config, rules, registry, staged, stagedConfigs);
        if (previous == null) {
            t.install(); // the first table: nothing is live yet
        }
        return t;
    }

    /** Registers this table's endpoints and their configurations (routing stage, when it applies the table). */
    void install() {
        if (installed.getCount() == 0) {
            return;
        }
        for (int i = 0; i < staged.size(); i++) {
            registry.install(staged.get(i), stagedConfigs.get(i));
        }
        installed.countDown();
    }

    /** Waits until the routing stage applied this table; false on timeout. */
    public boolean awaitInstalled(long timeoutMs) throws InterruptedException {
        return installed.await(timeoutMs, java.util.concurrent.TimeUnit.MILLISECONDS);
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
