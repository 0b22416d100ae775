package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.Exemplar;
import io.prometheus.metrics.model.snapshots.Exemplars;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot.HistogramDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * A Prometheus histogram with fixed exponential buckets (cumulative on export), recorded lock-free from any thread
 * into {@link LongAdder}s: recording allocates nothing, which the client library's own histogram cannot promise (its
 * per-observation scrape buffer and exemplar sampler). Buckets, unlike quantiles, can be aggregated across gateway
 * replicas and never freeze into a process-lifetime view. Exported by {@link HistogramFamily} as the library's
 * snapshot, so the exposition formats are the library's.
 */
public final class LatencyHistogram {
    /**
     * Upper bounds in seconds: 10 µs (the request path's parse and hash stages) … 600 s (a long generation: the
     * first-byte timeout defaults to 300 s, and streams run for minutes).
     */
    static final double[] BOUNDS = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
        0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 300, 600};
    /** The bounds in nanoseconds: a value goes in the first bucket whose bound it does not exceed. */
    private static final long[] BOUNDS_NS = new long[BOUNDS.length];
    /** The bounds the library exports, {@code +Inf} last. */
    private static final double[] EXPORTED_BOUNDS = new double[BOUNDS.length + 1];

    static {
        for (int i = 0; i < BOUNDS.length; i++) {
            BOUNDS_NS[i] = Math.round(BOUNDS[i] * 1e9);
            EXPORTED_BOUNDS[i] = BOUNDS[i];
        }
        EXPORTED_BOUNDS[BOUNDS.length] = Double.POSITIVE_INFINITY;
    }

    private final LongAdder[] counts = new LongAdder[BOUNDS.length + 1];
    private final LongAdder sumNs = new LongAdder();
    /** The latest trace-carrying observation per bucket (OpenMetrics exemplars); null until one is recorded. */
    private final AtomicReferenceArray<Exemplar> exemplars = new AtomicReferenceArray<>(BOUNDS.length + 1);

    public LatencyHistogram() {
        for (int i = 0; i < counts.length; i++) {
            counts[i] = new LongAdder();
        }
    }

    public void recordNs(long ns) {
        int i = bucket(ns);
        counts[i].increment();
        sumNs.add(ns);
    }

    /**
     * As {@link #recordNs(long)}, and when {@code traceId} is not null, the observation becomes its bucket's exemplar
     * ({@code trace_id}): a dashboard jumps from a slow bucket to a trace. Only a traced request pays the exemplar.
     */
    public void recordNs(long ns, String traceId) {
        int i = bucket(ns);
        counts[i].increment();
        sumNs.add(ns);
        if (traceId != null) {
            exemplars.set(i, Exemplar.builder().value(ns / 1e9).traceId(traceId).timestampMillis(System.currentTimeMillis()).build());
        }
    }

    private static int bucket(long ns) {
        int i = 0;
        while (i < BOUNDS_NS.length && ns > BOUNDS_NS[i]) {
            i++;
        }
        return i;
    }

    /** Observations so far (all buckets). */
    public long count() {
        long n = 0;
        for (LongAdder c : counts) {
            n += c.sum();
        }
        return n;
    }

    /** The library's view of this histogram now, with {@code labels}. Scrape side only. */
    HistogramDataPointSnapshot snapshot(Labels labels) {
        long[] perBucket = new long[counts.length];
        for (int i = 0; i < counts.length; i++) {
            perBucket[i] = counts[i].sum();
        }
        List<Exemplar> ex = new ArrayList<>(0);
        for (int i = 0; i < counts.length; i++) {
            Exemplar e = exemplars.get(i);
            if (e != null) {
                ex.add(e);
            }
        }
        return new HistogramDataPointSnapshot(ClassicHistogramBuckets.of(EXPORTED_BOUNDS, perBucket), sumNs.sum() / 1e9,
            labels, ex.isEmpty() ? Exemplars.EMPTY : Exemplars.of(ex), 0L);
    }
}
