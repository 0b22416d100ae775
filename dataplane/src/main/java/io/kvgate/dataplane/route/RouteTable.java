package io.kvgate.dataplane.route;

import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The applied rule set: immutable, built off the data path and handed to the routing stage, which swaps it in and
 * carries the policy state of the rules that remain over to it ({@link RoutingStage#swap}). I/O threads read the
 * current table to resolve a model to its rule; the routing stage owns the policies inside it.
 */
public final class RouteTable {
    private final GatewayConfig config;
    private final List<Rule> rules;
    private final Map<String, Rule> byModel;
    private final Map<String, Rule> byName;
    private final EndpointState[] endpoints;
    private final EndpointRegistry registry;
    private final List<EndpointState> staged;
    private final List<EndpointConfig> stagedConfigs;
    private final CountDownLatch installed = new CountDownLatch(1);
    private final int textPrefixChars;
    private final int promptIdsKept;

    private RouteTable(GatewayConfig config, List<Rule> rules, EndpointRegistry registry, List<EndpointState> staged,
                       List<EndpointConfig> stagedConfigs) {
        this.config = config;
        this.registry = registry;
        this.staged = staged;
        this.stagedConfigs = stagedConfigs;
        this.rules = List.copyOf(rules);
        this.byModel = new HashMap<>();
        this.byName = new HashMap<>();
        Map<String, EndpointState> distinct = new LinkedHashMap<>();
        for (Rule r : rules) {
            r.table = this;
            byName.put(r.name(), r);
            for (String m : r.config().models()) {
                byModel.put(m, r);
            }
            // A LoRA adapter is requested by its own name (vLLM's form) and served by its base model's rule.
            for (String a : r.config().adapterNames()) {
                byModel.put(a, r);
            }
            for (EndpointState ep : r.endpoints()) {
                distinct.put(ep.key(), ep);
            }
        }
        this.endpoints = distinct.values().toArray(EndpointState[]::new);
        int prefix = 0;
        int ids = 0;
        for (Rule r : rules) {
            if (r.config().policyKind() == RuleConfig.Policy.CHWBL) {
                prefix = Math.max(prefix, r.config().chwbl().prefixChars());
            }
            ids = Math.max(ids, r.promptTokensRoutedOn());
        }
        this.textPrefixChars = prefix;
        this.promptIdsKept = ids;
    }

    /**
     * @param policyFactory builds the policy of a rule (load policies, or the KV/CHWBL/session tiers on top)
     */
    public static RouteTable build(GatewayConfig config, EndpointRegistry registry,
                                   Function<RuleBuildContext, RoutingPolicy> policyFactory) {
        return build(config, registry, policyFactory, rc -> null, null);
    }

    /** As below, with nothing attached for the request stage. */
    public static RouteTable build(GatewayConfig config, EndpointRegistry registry,
                                   Function<RuleBuildContext, RoutingPolicy> policyFactory, RouteTable previous) {
        return build(config, registry, policyFactory, rc -> null, previous);
    }

    /**
     * Builds the next table without changing anything live: endpoints are staged (see {@link EndpointRegistry#stage})
     * and their new configurations are installed by the routing stage when it applies the table, between two
     * decisions. A rule whose configuration is unchanged from {@code previous} is carried over whole (same object,
     * with its policy state and counters); a changed rule of the same name gets new policies, and the routing stage
     * hands them the old ones' state when it swaps the table in ({@link RoutingPolicy#carryOver}).
     *
     * @param requestStage what the request stage keeps per rule (its prompt pipeline), see {@link Rule#requestStage}
     */
    public static RouteTable build(GatewayConfig config, EndpointRegistry registry,
                                   Function<RuleBuildContext, RoutingPolicy> policyFactory,
                                   Function<RuleConfig, Object> requestStage, RouteTable previous) {
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
            Object stage = requestStage.apply(rc);
            // The request stage (the prompt pipeline) is compared too: a tokenizer directory or template file that
            // changed under an unchanged configuration must rebuild the rule.
            if (same != null && same.config().equals(rc) && java.util.Objects.equals(same.requestStage(), stage)) {
                rules.add(same);
                continue;
            }
            RuleStats stats = new RuleStats(rc.name());
            rules.add(new Rule(rc, eps, policyFactory.apply(new RuleBuildContext(rc, eps, stats)),
                RulePolicies.decodePolicy(rc, stats), stats, stage));
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
        return installed.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** What a policy factory gets for one rule. */
    public record RuleBuildContext(RuleConfig rule, EndpointState[] endpoints, RuleStats stats) {}

    public GatewayConfig config() {
        return config;
    }

    public List<Rule> rules() {
        return rules;
    }

    /**
     * The most characters of request text any rule of this table keys on (the largest {@code chwbl.prefix_chars};
     * 0 when no rule is {@code chwbl}): the body stage decodes that much of the text and no more.
     */
    public int textPrefixChars() {
        return textPrefixChars;
    }

    /**
     * The most token ids of a token-id prompt any rule of this table routes on (0 when none routes on its prompt):
     * the body stage keeps that many, so the prompt stage needs no second parse for them.
     */
    public int promptIdsKept() {
        return promptIdsKept;
    }

    public Rule ruleForModel(String model) {
        return model == null ? null : byModel.get(model);
    }

    public Rule ruleByName(String name) {
        return byName.get(name);
    }

    /** Every endpoint some rule of this table names, once each. */
    EndpointState[] endpointArray() {
        return endpoints;
    }
}
