package io.kvgate.dataplane.quality;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.util.concurrent.FastThreadLocal;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Routing-quality accounting per rule (issue #35 item 1): for every answered request whose engine reported what it
 * served from its prefix cache, the prompt tokens, the reachable ones (the longest prefix any endpoint of the rule
 * held when it was routed), the predicted ones (what the chosen endpoint held, per the index), the observed ones (the
 * engine's {@code cached_tokens}) and every computed token's {@link LossCause}. Rendered as
 * {@code kvgate_prompt_tokens_total{rule,kind}}, {@code kvgate_routing_loss_tokens_total{rule,cause}} and
 * {@code kvgate_prompt_accounting_requests_total{rule,outcome}}, and as the {@code ctl quality} report
 * ({@link #report}).
 *
 * <p>Thread-safe: the relays of every event loop record into adders; a rule's counters are created on its first
 * request and kept for the gateway's life (rule names are bounded by configuration). Recording allocates nothing
 * after a rule's first request.
 */
public final class PromptLedger {
    /** The {@code kind} label values of {@code kvgate_prompt_tokens_total}, in {@link RuleAccount#tokens} order. */
    static final String[] KINDS = {"prompt", "reachable", "predicted", "observed"};
    private static final int PROMPT = 0;
    private static final int REACHABLE = 1;
    private static final int PREDICTED = 2;
    private static final int OBSERVED = 3;

    private static final FastThreadLocal<long[]> SCRATCH = new FastThreadLocal<>() {
        @Override
        protected long[] initialValue() {
            return new long[LossCause.all().length];
        }
    };

    /** One rule's counters. */
    private static final class RuleAccount {
        final LongAdder[] tokens = adders(KINDS.length);
        final LongAdder[] loss = adders(LossCause.all().length);
        final LongAdder accounted = new LongAdder();
        final LongAdder unreported = new LongAdder();

        private static LongAdder[] adders(int n) {
            LongAdder[] a = new LongAdder[n];
            for (int i = 0; i < n; i++) {
                a[i] = new LongAdder();
            }
            return a;
        }
    }

    private final ConcurrentHashMap<String, RuleAccount> rules = new ConcurrentHashMap<>();

    private RuleAccount rule(String name) {
        RuleAccount r = rules.get(name);
        return r != null ? r : rules.computeIfAbsent(name, k -> new RuleAccount());
    }

    /**
     * One answered request whose engine reported its cached prompt tokens. Counts are tokens; {@code reachable},
     * {@code predicted} and {@code confirmed} are {@link PromptAccount#UNKNOWN} when the router made no index lookup
     * (then every computed token is {@link LossCause#UNKNOWN}, and the request adds nothing to reachable/predicted).
     */
    public void record(String rule, long prompt, long observed, int reachable, int predicted, int confirmed,
                       LossCause routeCause) {
        if (rule == null || prompt <= 0) {
            return;
        }
        int p = (int) Math.min(prompt, Integer.MAX_VALUE);
        int o = (int) Math.max(0, Math.min(observed, p));
        RuleAccount r = rule(rule);
        r.accounted.increment();
        r.tokens[PROMPT].add(p);
        r.tokens[OBSERVED].add(o);
        if (reachable >= 0 && predicted >= 0) {
            r.tokens[REACHABLE].add(Math.min(Math.max(reachable, predicted), p));
            r.tokens[PREDICTED].add(Math.min(predicted, p));
        }
        long[] loss = SCRATCH.get();
        Arrays.fill(loss, 0);
        PromptAccount.attribute(p, o, reachable, predicted, confirmed, routeCause, loss);
        for (int i = 0; i < loss.length; i++) {
            if (loss[i] != 0) {
                r.loss[i].add(loss[i]);
            }
        }
    }

    /**
     * A routed request whose answer said nothing of its cached tokens (no usage, or usage without
     * {@code prompt_tokens_details.cached_tokens}: vLLM needs {@code --enable-prompt-tokens-details}; an error).
     */
    public void unreported(String rule) {
        if (rule != null) {
            rule(rule).unreported.increment();
        }
    }

    /** The three families, read from the adders on scrape. */
    public void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_prompt_tokens_total")
            .help("Prompt tokens of accounted requests (the engine reported its cached tokens), by rule and kind: prompt;"
                + " reachable (the longest prefix any endpoint of the rule held at decision time, per the KV index);"
                + " predicted (what the chosen endpoint held, per the index); observed (what the engine served from"
                + " its cache). Requests routed without an index lookup add to prompt and observed only.")
            .labelNames("rule", "kind").callback(cb -> rules.forEach((rule, r) -> {
                for (int k = 0; k < KINDS.length; k++) {
                    cb.call(r.tokens[k].sum(), rule, KINDS[k]);
                }
            })).register(registry);
        CounterWithCallback.builder().name("kvgate_routing_loss_tokens_total")
            .help("Prompt tokens of accounted requests the engine computed instead of serving them from its cache, by"
                + " rule and cause: cold (no endpoint held them), a routing cause (load_bound, tier, dp_rank,"
                + " min_match, cold_readmit, draining, unavailable, admission, retry, fallback: an endpoint held them,"
                + " the router chose another), a serving cause (speculative, index_stale: the chosen endpoint was"
                + " expected to hold them), unknown (no index lookup). Sums to prompt minus observed.")
            .labelNames("rule", "cause").callback(cb -> rules.forEach((rule, r) -> {
                for (LossCause c : LossCause.all()) {
                    cb.call(r.loss[c.ordinal()].sum(), rule, c.label);
                }
            })).register(registry);
        CounterWithCallback.builder().name("kvgate_prompt_accounting_requests_total")
            .help("Routed requests by rule and outcome: accounted (the answer reported usage.prompt_tokens_details"
                + ".cached_tokens) or unreported (it did not: an error, a stream without usage, an engine that does not"
                + " report it, such as vLLM without --enable-prompt-tokens-details).")
            .labelNames("rule", "outcome").callback(cb -> rules.forEach((rule, r) -> {
                cb.call(r.accounted.sum(), rule, "accounted");
                cb.call(r.unreported.sum(), rule, "unreported");
            })).register(registry);
    }

    /**
     * The {@code ctl quality} report ({@code /control/v1/quality}): per rule, the token counts, the hit ratios
     * (reachable, predicted and observed over prompt; observed over reachable) and the loss by cause.
     */
    public ObjectNode report() {
        JsonNodeFactory f = JsonNodeFactory.instance;
        ObjectNode out = f.objectNode();
        ObjectNode byRule = out.putObject("rules");
        Map<String, RuleAccount> sorted = new TreeMap<>(rules);
        sorted.forEach((name, r) -> {
            ObjectNode n = byRule.putObject(name);
            n.put("requests", r.accounted.sum());
            n.put("unreported_requests", r.unreported.sum());
            ObjectNode tokens = n.putObject("tokens");
            long[] t = new long[KINDS.length];
            for (int k = 0; k < KINDS.length; k++) {
                t[k] = r.tokens[k].sum();
                tokens.put(KINDS[k], t[k]);
            }
            ObjectNode ratio = n.putObject("hit_ratio");
            ratio.put("reachable", ratio(t[REACHABLE], t[PROMPT]));
            ratio.put("predicted", ratio(t[PREDICTED], t[PROMPT]));
            ratio.put("observed", ratio(t[OBSERVED], t[PROMPT]));
            ratio.put("observed_of_reachable", ratio(t[OBSERVED], t[REACHABLE]));
            ObjectNode loss = n.putObject("loss");
            for (LossCause c : LossCause.all()) {
                loss.put(c.label, r.loss[c.ordinal()].sum());
            }
        });
        return out;
    }

    private static double ratio(long part, long whole) {
        return whole == 0 ? 0.0 : Math.round(10_000.0 * part / whole) / 10_000.0;
    }
}
