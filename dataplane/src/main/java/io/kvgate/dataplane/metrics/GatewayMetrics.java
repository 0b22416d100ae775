package io.kvgate.dataplane.metrics;

import io.kvgate.control.BuildInfo;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.instrumentation.jvm.JvmMetrics;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * The gateway's own counters and histograms, recorded lock-free (and allocation-free after a series' first use) from
 * I/O threads into adders, and registered in the gateway's Prometheus registry as callbacks that read them on scrape.
 * Other components register their own families in {@link #registry()}.
 */
public final class GatewayMetrics {
    /** Label of requests whose model is absent or not configured. */
    public static final String UNKNOWN_MODEL = "unknown";

    /** Status label of a stream that ended in an error event after its 200 (engine error event, or no [DONE]). */
    public static final String STREAM_ERROR = "stream_error";

    /** {@code cause} of {@code kvgate_responses_incomplete_total} for a response cut by the drain deadline. */
    public static final String INCOMPLETE_SHUTTING_DOWN = "shutting_down";

    private record ErrorKey(String endpoint, String cause) {}

    /** Token counts of one rule and model, by kind. */
    private static final class Tokens {
        final LongAdder prompt = new LongAdder();
        final LongAdder completion = new LongAdder();
        final LongAdder cached = new LongAdder();
    }

    /** Slot of {@link #STREAM_ERROR} after the HTTP statuses 0–599 in {@link ModelCounters#byStatus}. */
    private static final int STREAM_ERROR_SLOT = 600;

    /**
     * The counters of one rule and model label. Every proxied request records into them, so they are found by two
     * map reads of strings whose hashes are cached (the rule name, the configured model name) and allocate nothing;
     * a counter is created on its first use (a label that was never recorded is not rendered, as before).
     */
    private static final class ModelCounters {
        final AtomicReferenceArray<LongAdder> byStatus = new AtomicReferenceArray<>(STREAM_ERROR_SLOT + 1);
        /** Status labels outside 0–599 (not HTTP, never sent by the gateway itself): kept apart, rendered the same. */
        final ConcurrentHashMap<String, LongAdder> otherStatus = new ConcurrentHashMap<>();
        volatile Tokens tokens;

        LongAdder status(int slot) {
            LongAdder a = byStatus.get(slot);
            if (a == null) {
                byStatus.compareAndSet(slot, null, new LongAdder());
                a = byStatus.get(slot);
            }
            return a;
        }

        Tokens tokens() {
            Tokens t = tokens;
            if (t == null) {
                synchronized (this) {
                    if (tokens == null) {
                        tokens = new Tokens();
                    }
                    t = tokens;
                }
            }
            return t;
        }
    }

    /** One rule's series ({@code ""}: requests refused before they resolved to a rule). Kept for the process's life. */
    private static final class RuleSeries {
        final ConcurrentHashMap<String, ModelCounters> byModel = new ConcurrentHashMap<>();
        volatile LatencyHistogram duration;
        volatile LatencyHistogram ttfb;
        volatile LatencyHistogram ttft;
        volatile LatencyHistogram itl;
        volatile LatencyHistogram resumeGap;

        ModelCounters model(String label) {
            ModelCounters m = byModel.get(label);
            return m != null ? m : byModel.computeIfAbsent(label, k -> new ModelCounters());
        }

        synchronized LatencyHistogram newDuration() {
            if (duration == null) {
                duration = new LatencyHistogram();
            }
            return duration;
        }

        synchronized LatencyHistogram newTtfb() {
            if (ttfb == null) {
                ttfb = new LatencyHistogram();
            }
            return ttfb;
        }

        synchronized LatencyHistogram newTtft() {
            if (ttft == null) {
                ttft = new LatencyHistogram();
            }
            return ttft;
        }

        synchronized LatencyHistogram newItl() {
            if (itl == null) {
                itl = new LatencyHistogram();
            }
            return itl;
        }

        synchronized LatencyHistogram newResumeGap() {
            if (resumeGap == null) {
                resumeGap = new LatencyHistogram();
            }
            return resumeGap;
        }
    }

    private final ConcurrentHashMap<String, RuleSeries> rules = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<ErrorKey, LongAdder> upstreamErrors = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> badRequests = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> shed = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> incomplete = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> contextClamped = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<LogitBiasKey, LongAdder> logitBias = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<HedgeKey, LongAdder> hedges = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> hedgeExtraPromptTokens = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<MigrationKey, LongAdder> streamMigrations = new ConcurrentHashMap<>();
    public final AtomicLong openClientConnections = new AtomicLong();
    public final LongAdder clientConnectionsTotal = new LongAdder();
    public final LongAdder clientDisconnectsMidRequest = new LongAdder();
    public final LongAdder connectRetries = new LongAdder();
    public final LongAdder midStreamErrors = new LongAdder();
    /** Client-sent engine-internal members ({@code kv_transfer_params}, {@code bootstrap_*}) removed from bodies. */
    public final LongAdder engineFieldsRemoved = new LongAdder();
    public final StageTimers stages = new StageTimers();
    private volatile java.util.Set<String> modelLabels = java.util.Set.of();
    private final PrometheusRegistry registry;

    /** Metrics in a registry of their own (tests, benchmarks). */
    public GatewayMetrics() {
        this(new FamilyRegistry());
    }

    /** Metrics registered in {@code registry}, the gateway's one registry that its components register in too. */
    public GatewayMetrics(PrometheusRegistry registry) {
        this.registry = registry;
        register();
    }

    /**
     * The {@code model} label values allowed in {@code kvgate_requests_total}: the configured model names. Anything
     * else a client sends is recorded as {@value #UNKNOWN_MODEL}, so label cardinality is bounded by configuration,
     * never by client input. Replaced whole on every configuration swap.
     */
    public void modelLabels(java.util.Set<String> configuredModels) {
        this.modelLabels = java.util.Set.copyOf(configuredModels);
    }

    /**
     * @param rule  a configured rule name, or null/"" when the request never resolved to one
     * @param model the client's model string (any value: it becomes a label only when configured)
     */
    public void request(String rule, String model, int status, long durationNs) {
        request(rule, model, status, durationNs, null);
    }

    /** As {@link #request(String, String, int, long)}; a non-null {@code traceId} becomes the duration's exemplar. */
    public void request(String rule, String model, int status, long durationNs, String traceId) {
        boolean http = status >= 0 && status < STREAM_ERROR_SLOT;
        count(rule, model, http ? status : -1, http ? null : Integer.toString(status), durationNs, traceId);
    }

    /** One answered request: its status counter by {@code slot}, or by {@code otherLabel} when the slot is -1. */
    private void count(String rule, String model, int slot, String otherLabel, long durationNs, String traceId) {
        RuleSeries r = rule(rule);
        ModelCounters m = r.model(modelLabel(model));
        if (slot >= 0) {
            m.status(slot).increment();
        } else {
            m.otherStatus.computeIfAbsent(otherLabel, k -> new LongAdder()).increment();
        }
        duration(r).recordNs(durationNs, traceId);
    }

    /** The slot of a status label: {@link #STREAM_ERROR}'s, or an HTTP status as {@code Integer.toString} writes it; else -1. */
    private static int statusSlot(String status) {
        if (STREAM_ERROR.equals(status)) {
            return STREAM_ERROR_SLOT;
        }
        int n = status.length();
        if (n == 0 || n > 3 || (n > 1 && status.charAt(0) == '0')) {
            return -1;
        }
        int v = 0;
        for (int i = 0; i < n; i++) {
            char c = status.charAt(i);
            if (c < '0' || c > '9') {
                return -1;
            }
            v = v * 10 + (c - '0');
        }
        return v < STREAM_ERROR_SLOT ? v : -1;
    }

    private static LatencyHistogram duration(RuleSeries r) {
        LatencyHistogram h = r.duration;
        return h != null ? h : r.newDuration();
    }

    /** HTTP status labels, made once rather than per request (and {@link #STREAM_ERROR} in its slot). */
    private static final String[] STATUS_LABELS = new String[STREAM_ERROR_SLOT + 1];

    static {
        for (int i = 0; i < STREAM_ERROR_SLOT; i++) {
            STATUS_LABELS[i] = Integer.toString(i);
        }
        STATUS_LABELS[STREAM_ERROR_SLOT] = STREAM_ERROR;
    }

    private RuleSeries rule(String rule) {
        String r = rule == null ? "" : rule;
        RuleSeries s = rules.get(r);
        return s != null ? s : rules.computeIfAbsent(r, k -> new RuleSeries());
    }

    private String modelLabel(String model) {
        return model != null && modelLabels.contains(model) ? model : UNKNOWN_MODEL;
    }

    /** As {@link #request(String, String, int, long)} with a status label: an HTTP status or {@link #STREAM_ERROR}. */
    public void request(String rule, String model, String status, long durationNs) {
        count(rule, model, statusSlot(status), status, durationNs, null);
    }

    /**
     * The token usage an engine reported for one answer ({@code usage}: prompt, completion and
     * {@code prompt_tokens_details.cached_tokens}), as the client saw it (greedy replication included). The
     * {@code model} label follows {@link #modelLabels}, as in {@code kvgate_requests_total}.
     */
    public void tokens(String rule, String model, long prompt, long completion, long cached) {
        Tokens t = rule(rule).model(modelLabel(model)).tokens();
        t.prompt.add(prompt);
        t.completion.add(completion);
        t.cached.add(cached);
    }

    public void timeToFirstByte(String rule, long ns) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.ttfb;
        (h != null ? h : r.newTtfb()).recordNs(ns);
    }

    /**
     * The time from the complete client request to the first content token of a stream (or to the answer of a
     * non-streamed request): {@code kvgate_time_to_first_token_seconds{rule}}. A non-null {@code traceId} becomes
     * the observation's exemplar ({@code trace_id}).
     */
    public void timeToFirstToken(String rule, long nanos, String traceId) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.ttft;
        (h != null ? h : r.newTtft()).recordNs(nanos, traceId);
    }

    /**
     * The time between two consecutive content tokens of a stream: {@code kvgate_inter_token_latency_seconds{rule}}.
     * A non-null {@code traceId} becomes the observation's exemplar ({@code trace_id}).
     */
    public void interTokenLatency(String rule, long nanos, String traceId) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.itl;
        (h != null ? h : r.newItl()).recordNs(nanos, traceId);
    }

    public void upstreamError(String endpoint, String cause) {
        upstreamErrors.computeIfAbsent(new ErrorKey(endpoint, cause), k -> new LongAdder()).increment();
    }

    public void badRequest(String reason) {
        badRequests.computeIfAbsent(reason, k -> new LongAdder()).increment();
    }

    public void shed(String reason) {
        shed.computeIfAbsent(reason, k -> new LongAdder()).increment();
    }

    /**
     * A response whose head went out (counted in {@code kvgate_requests_total} under the status the client saw) but
     * whose body was cut short, by {@code cause}: a constant (a failure's metric name), so after its first use this
     * is one map read and allocates nothing.
     */
    public void responseIncomplete(String cause) {
        LongAdder a = incomplete.get(cause);
        (a != null ? a : incomplete.computeIfAbsent(cause, k -> new LongAdder())).increment();
    }

    /** A request of {@code rule} whose completion budget the gateway lowered (or set) to fit the context length. */
    public void contextClamped(String rule) {
        contextClamped.computeIfAbsent(rule, k -> new LongAdder()).increment();
    }

    private record LogitBiasKey(String rule, String outcome) {}

    private record HedgeKey(String rule, String result) {}

    /**
     * A hedged request of {@code rule} (docs/hedging.md) whose first-token wait ran out, by {@code result}:
     * {@code won_primary} / {@code won_hedge} (a hedge leg went out; which leg produced the first token),
     * {@code skipped_budget} (over {@code hedge.max_extra_ratio}), {@code no_candidate} (no other endpoint).
     */
    public void hedge(String rule, String result) {
        hedges.computeIfAbsent(new HedgeKey(rule, result), k -> new LongAdder()).increment();
    }

    /** {@code kvgate_hedges_total{rule,result}} now (tests and tools). */
    public long hedges(String rule, String result) {
        LongAdder a = hedges.get(new HedgeKey(rule, result));
        return a == null ? 0 : a.sum();
    }

    /** {@code kvgate_hedge_extra_prompt_tokens_total{rule}} now (tests and tools). */
    public long hedgeExtraPromptTokens(String rule) {
        LongAdder a = hedgeExtraPromptTokens.get(rule);
        return a == null ? 0 : a.sum();
    }

    /** Prompt tokens a hedge leg of {@code rule} sent to a second endpoint (the extra prefill hedging costs). */
    public void hedgeExtraPromptTokens(String rule, int tokens) {
        hedgeExtraPromptTokens.computeIfAbsent(rule, k -> new LongAdder()).add(tokens);
    }

    private record MigrationKey(String rule, String cause, String result) {}

    /**
     * Mid-stream failover's pause as the client sees it: from the gateway finding a started stream's engine failed to
     * the first content the continuing engine produced, across every leg tried in between:
     * {@code kvgate_stream_resume_gap_seconds{rule}}.
     */
    public void streamResumeGap(String rule, long ns) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.resumeGap;
        (h != null ? h : r.newResumeGap()).recordNs(ns);
    }

    /**
     * One mid-stream failover decision of {@code rule} (issue #41): {@code cause} connect_failed|reset|stall|
     * engine_error|drain, {@code result} ok (continued on another endpoint) | refused (the request cannot be
     * continued) | exhausted (its max_migrations were used) | failed (no endpoint took the continuation).
     */
    public void streamMigration(String rule, String cause, String result) {
        streamMigrations.computeIfAbsent(new MigrationKey(rule, cause, result), k -> new LongAdder()).increment();
    }

    /**
     * A request of {@code rule} with a non-empty {@code logit_bias}, by {@code outcome}: {@code accepted} (past the
     * rule's {@code max_logit_bias} / {@code speculative} checks, on its way to an engine) or {@code refused}.
     */
    public void logitBias(String rule, String outcome) {
        logitBias.computeIfAbsent(new LogitBiasKey(rule, outcome), k -> new LongAdder()).increment();
    }

    /** The registry every family of this gateway is registered in (its components add theirs). */
    public PrometheusRegistry registry() {
        return registry;
    }

    /**
     * The JVM's and the process's families ({@code jvm_*}, {@code process_*}) of the client's instrumentation, in a
     * registry of the process (they describe the process, and the instrumentation keeps every registry it registered
     * in for the life of the JVM: a gateway's own registry would keep the closed gateway reachable). Scraped through
     * {@code registry} like its own families.
     */
    public static void registerJvm(PrometheusRegistry registry) {
        registry.register((MultiCollector) JvmRegistry.INSTANCE::scrape);
    }

    /** Initialised on first use: the JVM instrumentation registered once per process. */
    private static final class JvmRegistry {
        static final PrometheusRegistry INSTANCE = new PrometheusRegistry();

        static {
            JvmMetrics.builder().register(INSTANCE);
        }
    }

    /** The whole registry in the Prometheus text format 0.0.4 (what {@code /metrics} answers a plain scrape). */
    public String render() {
        return MetricsExposition.text(registry);
    }

    /** This class's families: counters and gauges read the adders on scrape, histograms are {@link HistogramFamily}s. */
    private void register() {
        CounterWithCallback.builder().name("kvgate_requests_total")
            .help("Client requests answered, by rule, model and HTTP status (or stream_error).")
            .labelNames("rule", "model", "status").callback(cb -> rules.forEach((rule, r) -> r.byModel.forEach((model, m) -> {
                for (int i = 0; i <= STREAM_ERROR_SLOT; i++) {
                    LongAdder a = m.byStatus.get(i);
                    if (a != null) {
                        cb.call(a.sum(), rule, model, STATUS_LABELS[i]);
                    }
                }
                m.otherStatus.forEach((status, a) -> cb.call(a.sum(), rule, model, status));
            }))).register(registry);
        CounterWithCallback.builder().name("kvgate_tokens_total")
            .help("Tokens in successful answers as the engines reported them (usage), by rule, model and kind: prompt,"
                + " completion, cached (prompt tokens served from the engine's prefix cache).")
            .labelNames("rule", "model", "kind").callback(cb -> rules.forEach((rule, r) -> r.byModel.forEach((model, m) -> {
                Tokens v = m.tokens;
                if (v != null) {
                    cb.call(v.prompt.sum(), rule, model, "prompt");
                    cb.call(v.completion.sum(), rule, model, "completion");
                    cb.call(v.cached.sum(), rule, model, "cached");
                }
            }))).register(registry);
        ruleHistogram("kvgate_request_duration_seconds",
            "Time from the complete client request to the last byte of the response, by rule.", r -> r.duration);
        ruleHistogram("kvgate_time_to_first_byte_seconds",
            "Time from the complete client request to the engine's response head, by rule.", r -> r.ttfb);
        ruleHistogram("kvgate_time_to_first_token_seconds", "Time from the complete client request to the first content"
            + " token of a stream (or the answer of a non-streamed request), by rule.", r -> r.ttft);
        ruleHistogram("kvgate_inter_token_latency_seconds",
            "Time between consecutive content tokens of a streamed answer, by rule.", r -> r.itl);
        keyedCounter("kvgate_upstream_errors_total", "Failed engine calls by endpoint and cause.",
            upstreamErrors, List.of("endpoint", "cause"), k -> new String[] {k.endpoint(), k.cause()});
        keyedCounter("kvgate_bad_requests_total", "Client requests refused as malformed or over a limit, by reason.",
            badRequests, List.of("reason"), k -> new String[] {k});
        keyedCounter("kvgate_shed_total", "Requests answered 429/503 without reaching an engine, by reason.",
            shed, List.of("reason"), k -> new String[] {k});
        keyedCounter("kvgate_responses_incomplete_total", "Responses whose head reached the client (counted in"
            + " kvgate_requests_total under that status, or stream_error) but whose body was cut short, by cause.",
            incomplete, List.of("cause"), k -> new String[] {k});
        keyedCounter("kvgate_context_clamped_total", "Requests whose completion budget (max_tokens) the gateway lowered"
            + " or set to fit the rule's context length, by rule.", contextClamped, List.of("rule"), k -> new String[] {k});
        keyedCounter("kvgate_logit_bias_requests_total", "Requests with a non-empty logit_bias, by rule and outcome:"
            + " accepted (sent on to an engine) or refused (the rule's max_logit_bias or speculative).",
            logitBias, List.of("rule", "outcome"), k -> new String[] {k.rule(), k.outcome()});
        keyedCounter("kvgate_hedges_total", "Interactive requests whose first token was late (rules[].hedge.after_ms), by"
            + " rule and result: won_primary / won_hedge (a hedge leg went to a second endpoint; which leg produced the"
            + " first token), skipped_budget (over hedge.max_extra_ratio), no_candidate (no other endpoint).",
            hedges, List.of("rule", "result"), k -> new String[] {k.rule(), k.result()});
        keyedCounter("kvgate_hedge_extra_prompt_tokens_total", "Prompt tokens sent to a second endpoint by hedge legs,"
            + " by rule (the extra prefill hedging costs).", hedgeExtraPromptTokens, List.of("rule"), k -> new String[] {k});
        keyedCounter("kvgate_stream_migrations_total", "Mid-stream failover decisions, by rule, cause (connect_failed,"
            + " reset, stall, engine_error, drain) and result (ok, refused, exhausted, failed).", streamMigrations,
            List.of("rule", "cause", "result"), k -> new String[] {k.rule(), k.cause(), k.result()});
        ruleHistogram("kvgate_stream_resume_gap_seconds", "Mid-stream failover: time from finding a started stream's"
            + " engine failed to the first content from the engine that continues it, by rule.", r -> r.resumeGap);
        GaugeWithCallback.builder().name("kvgate_open_connections").help("Open client connections.")
            .callback(cb -> cb.call(openClientConnections.get())).register(registry);
        counter("kvgate_client_connections_total", "Client connections accepted.", clientConnectionsTotal);
        counter("kvgate_client_disconnects_mid_request_total",
            "Clients that left before their response finished (upstream cancelled).", clientDisconnectsMidRequest);
        counter("kvgate_connect_retries_total", "Requests re-routed after a connect failure.", connectRetries);
        counter("kvgate_mid_stream_errors_total", "Streams ended with an error frame after the engine failed mid-stream.",
            midStreamErrors);
        counter("kvgate_client_engine_fields_removed_total",
            "Client-sent kv_transfer_params / bootstrap_* members removed before forwarding.", engineFieldsRemoved);
        BuildInfo build = BuildInfo.current();
        GaugeWithCallback.builder().name("kvgate_build_info")
            .help("Always 1: the gateway's version, the commit it was built from and the Java runtime it runs on.")
            .labelNames("version", "commit", "java")
            .callback(cb -> cb.call(1, build.version(), build.commit(), build.javaVersion())).register(registry);
        stages.register(registry);
    }

    private void ruleHistogram(String name, String help, java.util.function.Function<RuleSeries, LatencyHistogram> pick) {
        HistogramFamily.register(registry, name, help, List.of("rule"), sink -> rules.forEach((rule, r) -> {
            LatencyHistogram h = pick.apply(r);
            if (h != null) {
                sink.add(h, rule);
            }
        }));
    }

    private <K> void keyedCounter(String name, String help, Map<K, LongAdder> counters, List<String> labels,
                                  java.util.function.Function<K, String[]> labelValues) {
        CounterWithCallback.builder().name(name).help(help).labelNames(labels.toArray(String[]::new))
            .callback(cb -> counters.forEach((k, v) -> cb.call(v.sum(), labelValues.apply(k)))).register(registry);
    }

    private void counter(String name, String help, LongAdder value) {
        CounterWithCallback.builder().name(name).help(help).callback(cb -> cb.call(value.sum())).register(registry);
    }
}
