package io.kvgate.dataplane.metrics;

import java.util.concurrent.atomic.LongAdder;

/**
 * A Prometheus histogram with fixed exponential buckets (cumulative on export), recorded lock-free from any thread.
 * Buckets, unlike quantiles, can be aggregated across gateway replicas.
 */
public final class LatencyHistogram {
    /** Upper bounds in seconds: 100 µs … ~100 s. */
    static final double[] BOUNDS = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1, 2.5, 5, 10, 25, 50, 100};
    /** The bounds in nanoseconds: a value goes in the first bucket whose bound it does not exceed. */
    private static final long[] BOUNDS_NS = new long[BOUNDS.length];

    static {
        for (int i = 0; i < BOUNDS.length; i++) {
            BOUNDS_NS[i] = Math.round(BOUNDS[i] * 1e9);
        }
    }

    private final LongAdder[] counts = new LongAdder[BOUNDS.length + 1];
    private final LongAdder sumNs = new LongAdder();

    public LatencyHistogram() {
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new LongAdder();
        }
    }

    public void recordNs(long ns) {
        int i = 0;
        while (i < BOUNDS_NS.length && ns > BOUNDS_NS[i]) {
            i++;
        }
        counts[i].increment();
        sumNs.add(ns);
    }

    public void write(StringBuilder out, String name, String labels) {
        long cumulative = 0;
        String sep = labels.isEmpty() ? "" : ",";
        for (int i = 0; i < BOUNDS.length; i++) {
            cumulative += counts[i].sum();
            out.append(name).append("_bucket{").append(labels).append(sep).append("le=\"").append(BOUNDS[i]).append("\"} ")
                .append(cumulative).append('\n');
        }
        cumulative += counts[BOUNDS.length].sum();
        out.append(name).append("_bucket{").append(labels).append(sep).append("le=\"+Inf\"} ").append(cumulative).append('\n');
        out.append(name).append("_sum{").append(labels).append("} ").append(sumNs.sum() / 1e9).append('\n');
        out.append(name).append("_count{").append(labels).append("} ").append(cumulative).append('\n');
    }
}
