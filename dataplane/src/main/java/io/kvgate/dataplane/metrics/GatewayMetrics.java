package io.kvgate.dataplane.metrics;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
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

    private record RequestKey(String rule, String model, String status) {}

    private record ErrorKey(String endpoint, String cause) {}

    private record TokenKey(String rule, String model) {}

    /** Token counts of one rule and model, by kind. */
    private static final class Tokens {
        final LongAdder prompt = new LongAdder();
        final LongAdder completion = new LongAdder();
        final LongAdder cached = new LongAdder();
    }

    private final ConcurrentHashMap<RequestKey, LongAdder> requests = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LatencyHistogram> durationByRule = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LatencyHistogram> ttfbByRule = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<ErrorKey, LongAdder> upstreamErrors = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> badRequests = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> shed = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, LongAdder> contextClamped = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<LogitBiasKey, LongAdder> logitBias = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<TokenKey, Tokens> tokens = new ConcurrentHashMap<>();
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
        request(rule, model, status >= 0 && status < STATUS_LABELS.length ? STATUS_LABELS[status] : Integer.toString(status),
            durationNs);
    }

    /** HTTP status labels, made once rather than per request. */
    private static final String[] STATUS_LABELS = new String[600];

    static {
        for (int i = 0; i < STATUS_LABELS.length; i++) {
            STATUS_LABELS[i] = Integer.toString(i);
        }
    }

    /** As {@link #request(String, String, int, long)} with a status label: an HTTP status or {@link #STREAM_ERROR}. */
    public void request(String rule, String model, String status, long durationNs) {
        String r = rule == null ? "" : rule;
        String m = model != null && modelLabels.contains(model) ? model : UNKNOWN_MODEL;
        requests.computeIfAbsent(new RequestKey(r, m, status), k -> new LongAdder()).increment();
        durationByRule.computeIfAbsent(r, k -> new LatencyHistogram()).recordNs(durationNs);
    }

    /**
     * The token usage an engine reported for one answer ({@code usage}: prompt, completion and
     * {@code prompt_tokens_details.cached_tokens}), as the client saw it (greedy replication included). The
     * {@code model} label follows {@link #modelLabels}, as in {@code kvgate_requests_total}.
     */
    public void tokens(String rule, String model, long prompt, long completion, long cached) {
        String m = model != null && modelLabels.contains(model) ? model : UNKNOWN_MODEL;
        Tokens t = tokens.computeIfAbsent(new TokenKey(rule == null ? "" : rule, m), k -> new Tokens());
        t.prompt.add(prompt);
        t.completion.add(completion);
        t.cached.add(cached);
    }

    public void timeToFirstByte(String rule, long ns) {
        ttfbByRule.computeIfAbsent(rule == null ? "" : rule, k -> new LatencyHistogram()).recordNs(ns);
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
        requests.forEach((k, v) -> out.append("kvgate_requests_total{rule=\"").append(esc(k.rule())).append("\",model=\"")
            .append(esc(k.model())).append("\",status=\"").append(k.status()).append("\"} ").append(v.sum()).append('\n'));
        out.append("# HELP kvgate_tokens_total Tokens in successful answers as the engines reported them (usage), by rule,"
            + " model and kind: prompt, completion, cached (prompt tokens served from the engine's prefix cache).\n");
        out.append("# TYPE kvgate_tokens_total counter\n");
        tokens.forEach((k, v) -> {
            String labels = "kvgate_tokens_total{rule=\"" + esc(k.rule()) + "\",model=\"" + esc(k.model()) + "\",kind=\"";
            out.append(labels).append("prompt\"} ").append(v.prompt.sum()).append('\n');
            out.append(labels).append("completion\"} ").append(v.completion.sum()).append('\n');
            out.append(labels).append("cached\"} ").append(v.cached.sum()).append('\n');
        });
        out.append("# HELP kvgate_request_duration_seconds Time from the complete client request to the last byte of the response.\n");
        out.append("# TYPE kvgate_request_duration_seconds histogram\n");
        durationByRule.forEach((rule, h) -> h.write(out, "kvgate_request_duration_seconds", "rule=\"" + esc(rule) + "\""));
        out.append("# HELP kvgate_time_to_first_byte_seconds Time from the complete client request to the engine's response head.\n");
        out.append("# TYPE kvgate_time_to_first_byte_seconds histogram\n");
        ttfbByRule.forEach((rule, h) -> h.write(out, "kvgate_time_to_first_byte_seconds", "rule=\"" + esc(rule) + "\""));
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
