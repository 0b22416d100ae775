package io.kvgate.dataplane.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * The gateway's own counters, recorded lock-free from I/O threads and rendered as Prometheus text on scrape.
 * Other components contribute their families through {@link #addSource}.
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

        synchronized LatencyHistogram newTtfb() {
            if (ttfb == null) {
                ttfb = new LatencyHistogram();
            }
            return ttfb;
        }
    }

    private final ConcurrentHashMap<String, RuleSeries> rules = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<ErrorKey, LongAdder> upstreamErrors = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> badRequests = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> shed = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> incomplete = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> contextClamped = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<LogitBiasKey, LongAdder> logitBias = new ConcurrentHashMap<>();
    public final AtomicLong openClientConnections = new AtomicLong();
    public final LongAdder clientConnectionsTotal = new LongAdder();
    public final LongAdder clientDisconnectsMidRequest = new LongAdder();
    public final LongAdder connectRetries = new LongAdder();
    public final LongAdder midStreamErrors = new LongAdder();
    /** Client-sent engine-internal members ({@code kv_transfer_params}, {@code bootstrap_*}) removed from bodies. */
    public final LongAdder engineFieldsRemoved = new LongAdder();
    public final StageTimers stages = new StageTimers();
    private volatile java.util.Set<String> modelLabels = java.util.Set.of();
    private final java.util.List<Consumer<StringBuilder>> sources = new java.util.concurrent.CopyOnWriteArrayList<>();

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
        boolean http = status >= 0 && status < STREAM_ERROR_SLOT;
        count(rule, model, http ? status : -1, http ? null : Integer.toString(status), durationNs);
    }

    /** One answered request: its status counter by {@code slot}, or by {@code otherLabel} when the slot is -1. */
    private void count(String rule, String model, int slot, String otherLabel, long durationNs) {
        RuleSeries r = rule(rule);
        ModelCounters m = r.model(modelLabel(model));
        if (slot >= 0) {
            m.status(slot).increment();
        } else {
            m.otherStatus.computeIfAbsent(otherLabel, k -> new LongAdder()).increment();
        }
        duration(r).recordNs(durationNs);
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
        count(rule, model, statusSlot(status), status, durationNs);
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
     * Time from the complete client request to the first generated token the client was sent: a stream's first
     * event with output, or a non-stream's whole answer. {@code traceId} (32 hex, or null) is the request's trace,
     * for an exemplar once metrics carry them; unused here.
     */
    public void timeToFirstToken(String rule, long ns, String traceId) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.ttft;
        (h != null ? h : r.newTtft()).recordNs(ns);
    }

    /** Time between two successive events with output of one stream (see {@link #timeToFirstToken}). */
    public void interTokenLatency(String rule, long ns, String traceId) {
        RuleSeries r = rule(rule);
        LatencyHistogram h = r.itl;
        (h != null ? h : r.newItl()).recordNs(ns);
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

    /**
     * A request of {@code rule} with a non-empty {@code logit_bias}, by {@code outcome}: {@code accepted} (past the
     * rule's {@code max_logit_bias} / {@code speculative} checks, on its way to an engine) or {@code refused}.
     */
    public void logitBias(String rule, String outcome) {
        logitBias.computeIfAbsent(new LogitBiasKey(rule, outcome), k -> new LongAdder()).increment();
    }

    public void addSource(Consumer<StringBuilder> source) {
        sources.add(source);
    }

    public String render() {
        StringBuilder out = new StringBuilder(8192);
        out.append("# HELP kvgate_requests_total Client requests answered, by rule, model and HTTP status.\n");
        out.append("# TYPE kvgate_requests_total counter\n");
        rules.forEach((rule, r) -> r.byModel.forEach((model, m) -> {
            String labels = "kvgate_requests_total{rule=\"" + esc(rule) + "\",model=\"" + esc(model) + "\",status=\"";
            for (int i = 0; i <= STREAM_ERROR_SLOT; i++) {
                LongAdder a = m.byStatus.get(i);
                if (a != null) {
                    out.append(labels).append(STATUS_LABELS[i]).append("\"} ").append(a.sum()).append('\n');
                }
            }
            m.otherStatus.forEach((status, a) -> out.append(labels).append(status).append("\"} ").append(a.sum()).append('\n'));
        }));
        out.append("# HELP kvgate_tokens_total Tokens in successful answers as the engines reported them (usage), by rule,"
            + " model and kind: prompt, completion, cached (prompt tokens served from the engine's prefix cache).\n");
        out.append("# TYPE kvgate_tokens_total counter\n");
        rules.forEach((rule, r) -> r.byModel.forEach((model, m) -> {
            Tokens v = m.tokens;
            if (v == null) {
                return;
            }
            String labels = "kvgate_tokens_total{rule=\"" + esc(rule) + "\",model=\"" + esc(model) + "\",kind=\"";
            out.append(labels).append("prompt\"} ").append(v.prompt.sum()).append('\n');
            out.append(labels).append("completion\"} ").append(v.completion.sum()).append('\n');
            out.append(labels).append("cached\"} ").append(v.cached.sum()).append('\n');
        }));
        out.append("# HELP kvgate_request_duration_seconds Time from the complete client request to the last byte of the response.\n");
        out.append("# TYPE kvgate_request_duration_seconds histogram\n");
        rules.forEach((rule, r) -> {
            if (r.duration != null) {
                r.duration.write(out, "kvgate_request_duration_seconds", "rule=\"" + esc(rule) + "\"");
            }
        });
        out.append("# HELP kvgate_time_to_first_byte_seconds Time from the complete client request to the engine's response head.\n");
        out.append("# TYPE kvgate_time_to_first_byte_seconds histogram\n");
        rules.forEach((rule, r) -> {
            if (r.ttfb != null) {
                r.ttfb.write(out, "kvgate_time_to_first_byte_seconds", "rule=\"" + esc(rule) + "\"");
            }
        });
        out.append("# HELP kvgate_time_to_first_token_seconds Time from the complete client request to the first"
            + " generated token sent (a stream's first event with output; a non-stream's whole answer).\n");
        out.append("# TYPE kvgate_time_to_first_token_seconds histogram\n");
        rules.forEach((rule, r) -> {
            if (r.ttft != null) {
                r.ttft.write(out, "kvgate_time_to_first_token_seconds", "rule=\"" + esc(rule) + "\"");
            }
        });
        out.append("# HELP kvgate_inter_token_latency_seconds Time between successive events with output of a stream.\n");
        out.append("# TYPE kvgate_inter_token_latency_seconds histogram\n");
        rules.forEach((rule, r) -> {
            if (r.itl != null) {
                r.itl.write(out, "kvgate_inter_token_latency_seconds", "rule=\"" + esc(rule) + "\"");
            }
        });
        out.append("# HELP kvgate_upstream_errors_total Failed engine calls by endpoint and cause.\n");
        out.append("# TYPE kvgate_upstream_errors_total counter\n");
        upstreamErrors.forEach((k, v) -> out.append("kvgate_upstream_errors_total{endpoint=\"").append(esc(k.endpoint()))
            .append("\",cause=\"").append(k.cause()).append("\"} ").append(v.sum()).append('\n'));
        out.append("# HELP kvgate_bad_requests_total Client requests refused as malformed or over a limit, by reason.\n");
        out.append("# TYPE kvgate_bad_requests_total counter\n");
        badRequests.forEach((k, v) -> out.append("kvgate_bad_requests_total{reason=\"").append(k).append("\"} ").append(v.sum()).append('\n'));
        out.append("# HELP kvgate_shed_total Requests answered 429/503 without reaching an engine, by reason.\n");
        out.append("# TYPE kvgate_shed_total counter\n");
        shed.forEach((k, v) -> out.append("kvgate_shed_total{reason=\"").append(k).append("\"} ").append(v.sum()).append('\n'));
        out.append("# HELP kvgate_responses_incomplete_total Responses whose head reached the client (counted in"
            + " kvgate_requests_total under that status, or stream_error) but whose body was cut short, by cause.\n");
        out.append("# TYPE kvgate_responses_incomplete_total counter\n");
        incomplete.forEach((k, v) -> out.append("kvgate_responses_incomplete_total{cause=\"").append(k).append("\"} ")
            .append(v.sum()).append('\n'));
        out.append("# HELP kvgate_context_clamped_total Requests whose completion budget (max_tokens) the gateway lowered"
            + " or set to fit the rule's context length, by rule.\n");
        out.append("# TYPE kvgate_context_clamped_total counter\n");
        contextClamped.forEach((k, v) -> out.append("kvgate_context_clamped_total{rule=\"").append(esc(k)).append("\"} ")
            .append(v.sum()).append('\n'));
        out.append("# HELP kvgate_logit_bias_requests_total Requests with a non-empty logit_bias, by rule and outcome:"
            + " accepted (sent on to an engine) or refused (the rule's max_logit_bias or speculative).\n");
        out.append("# TYPE kvgate_logit_bias_requests_total counter\n");
        logitBias.forEach((k, v) -> out.append("kvgate_logit_bias_requests_total{rule=\"").append(esc(k.rule()))
            .append("\",outcome=\"").append(k.outcome()).append("\"} ").append(v.sum()).append('\n'));
        gauge(out, "kvgate_open_connections", "Open client connections.", openClientConnections.get());
        counter(out, "kvgate_client_connections_total", "Client connections accepted.", clientConnectionsTotal.sum());
        counter(out, "kvgate_client_disconnects_mid_request_total", "Clients that left before their response finished (upstream cancelled).",
            clientDisconnectsMidRequest.sum());
        counter(out, "kvgate_connect_retries_total", "Requests re-routed after a connect failure.", connectRetries.sum());
        counter(out, "kvgate_mid_stream_errors_total", "Streams ended with an error frame after the engine failed mid-stream.",
            midStreamErrors.sum());
        counter(out, "kvgate_client_engine_fields_removed_total",
            "Client-sent kv_transfer_params / bootstrap_* members removed before forwarding.", engineFieldsRemoved.sum());
        stages.write(out);
        for (Consumer<StringBuilder> s : sources) {
            s.accept(out);
        }
        return out.toString();
    }

    public static void gauge(StringBuilder out, String name, String help, double value) {
        out.append("# HELP ").append(name).append(' ').append(help).append("\n# TYPE ").append(name).append(" gauge\n")
            .append(name).append(' ').append(value).append('\n');
    }

    public static void counter(StringBuilder out, String name, String help, double value) {
        out.append("# HELP ").append(name).append(' ').append(help).append("\n# TYPE ").append(name).append(" counter\n")
            .append(name).append(' ').append(value).append('\n');
    }

    public static String esc(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }
}
