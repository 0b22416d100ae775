package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Per-stage latency of the request path (parse, render, tokenize, hash, lookup, decide, route queue, upstream connect,
 * upstream first byte, total added by the gateway), recorded lock-free from any thread into one
 * {@link LatencyHistogram} per stage. Exported as the histogram {@code kvgate_stage_latency_seconds{stage}}: buckets
 * aggregate across replicas and over any window ({@code histogram_quantile(0.99, rate(...[5m]))}), which the
 * process-lifetime quantiles this replaced could not.
 */
public final class StageTimers {
    public enum Stage { PARSE, RENDER, TOKENIZE, HASH, LOOKUP, DECIDE, ROUTE_QUEUE, UPSTREAM_CONNECT, UPSTREAM_FIRST_BYTE, GATEWAY_ADDED }

    private static final Stage[] STAGES = Stage.values();
    private static final String[] LABELS = new String[STAGES.length];

    static {
        for (Stage s : STAGES) {
            LABELS[s.ordinal()] = s.name().toLowerCase(Locale.ROOT);
        }
    }

    private final LatencyHistogram[] histograms = new LatencyHistogram[STAGES.length];
    /** The longest latency of each stage since start (the summary's {@code _max} this replaced, under a valid name). */
    private final AtomicLongArray maxNs = new AtomicLongArray(STAGES.length);

    public StageTimers() {
        for (int i = 0; i < histograms.length; i++) {
            histograms[i] = new LatencyHistogram();
        }
    }

    public void recordNs(Stage stage, long ns) {
        if (ns >= 0) {
            int i = stage.ordinal();
            histograms[i].recordNs(ns);
            long max;
            while (ns > (max = maxNs.get(i)) && !maxNs.compareAndSet(i, max, ns)) {
                // another thread raised the maximum meanwhile: compare against its value
            }
        }
    }

    /** Observations of {@code stage} so far. */
    public long count(Stage stage) {
        return histograms[stage.ordinal()].count();
    }

    void register(PrometheusRegistry registry) {
        HistogramFamily.register(registry, "kvgate_stage_latency_seconds",
            "Latency of each stage of the request path, by stage.", List.of("stage"), sink -> {
                for (Stage s : STAGES) {
                    sink.add(histograms[s.ordinal()], LABELS[s.ordinal()]);
                }
            });
        GaugeWithCallback.builder().name("kvgate_stage_latency_max_seconds")
            .help("The longest latency of each stage of the request path since start, by stage.").labelNames("stage")
            .callback(cb -> {
                for (Stage s : STAGES) {
                    cb.call(maxNs.get(s.ordinal()) / 1e9, LABELS[s.ordinal()]);
                }
            }).register(registry);
    }
}
