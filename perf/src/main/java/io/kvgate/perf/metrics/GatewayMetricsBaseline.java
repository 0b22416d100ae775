package io.kvgate.perf.metrics;

import io.kvgate.dataplane.metrics.StageTimers;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * BASELINE for {@code MetricsRecordBench}: the per-request recording of {@link GatewayMetrics} as it was at 879ac0f
 * (a record key allocated, hashed and looked up with {@code computeIfAbsent} per call, the model label decided by
 * hashing the client's string, and {@link Histogram} dividing to seconds and scanning the bounds), kept verbatim but
 * for its name, its histogram (the old {@code LatencyHistogram}'s recording, nested), the dropped doc comments and
 * the non-request counters and rendering it never exercised, so the bench measures old and new in one run.
 */
public final class GatewayMetricsBaseline {
    /** Label of requests whose model is absent or not configured. */
    public static final String UNKNOWN_MODEL = "unknown";

    /** Status label of a stream that ended in an error event after its 200 (engine error event, or no [DONE]). */
    public static final String STREAM_ERROR = "stream_error";

    private record RequestKey(String rule, String model, String status) {}

    private record TokenKey(String rule, String model) {}

    /** Token counts of one rule and model, by kind. */
    private static final class Tokens {
        final LongAdder prompt = new LongAdder();
        final LongAdder completion = new LongAdder();
        final LongAdder cached = new LongAdder();
    }

    private final ConcurrentHashMap<RequestKey, LongAdder> requests = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Histogram> durationByRule = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Histogram> ttfbByRule = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<TokenKey, Tokens> tokens = new ConcurrentHashMap<>();
    public final StageTimers stages = new StageTimers();
    private volatile java.util.Set<String> modelLabels = java.util.Set.of();

    public void modelLabels(java.util.Set<String> configuredModels) {
        this.modelLabels = java.util.Set.copyOf(configuredModels);
    }

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

    public void request(String rule, String model, String status, long durationNs) {
        String r = rule == null ? "" : rule;
        String m = model != null && modelLabels.contains(model) ? model : UNKNOWN_MODEL;
        requests.computeIfAbsent(new RequestKey(r, m, status), k -> new LongAdder()).increment();
        durationByRule.computeIfAbsent(r, k -> new Histogram()).recordNs(durationNs);
    }

    public void tokens(String rule, String model, long prompt, long completion, long cached) {
        String m = model != null && modelLabels.contains(model) ? model : UNKNOWN_MODEL;
        Tokens t = tokens.computeIfAbsent(new TokenKey(rule == null ? "" : rule, m), k -> new Tokens());
        t.prompt.add(prompt);
        t.completion.add(completion);
        t.cached.add(cached);
    }

    public void timeToFirstByte(String rule, long ns) {
        ttfbByRule.computeIfAbsent(rule == null ? "" : rule, k -> new Histogram()).recordNs(ns);
    }

    /** {@code LatencyHistogram} at 879ac0f, recording only. */
    static final class Histogram {
        static final double[] BOUNDS = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
            1, 2.5, 5, 10, 25, 50, 100};
        private final LongAdder[] counts = new LongAdder[BOUNDS.length + 1];
        private final LongAdder sumNs = new LongAdder();

        Histogram() {
            for (int i = 0; i < counts.length; i++) {
                counts[i] = new LongAdder();
            }
        }

        void recordNs(long ns) {
            double s = ns / 1e9;
            int i = 0;
            while (i < BOUNDS.length && s > BOUNDS[i]) {
                i++;
            }
            counts[i].increment();
            sumNs.add(ns);
        }
    }
}
