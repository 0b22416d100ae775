package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.model.registry.Collector;
import io.prometheus.metrics.model.registry.MetricType;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot.HistogramDataPointSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricMetadata;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * A histogram family over {@link LatencyHistogram}s owned by a component: on each scrape the owner lists its current
 * histograms with their label values (as {@code CounterWithCallback} does for counters), so the series follow the
 * owner's state (a reload's new rules) while recording stays the owner's allocation-free code.
 */
public final class HistogramFamily implements Collector {
    /** What the owner's callback adds its histograms to. */
    public interface Sink {
        void add(LatencyHistogram histogram, String... labelValues);
    }

    private final MetricMetadata metadata;
    private final String[] labelNames;
    private final Consumer<Sink> callback;

    private HistogramFamily(String name, String help, String[] labelNames, Consumer<Sink> callback) {
        this.metadata = new MetricMetadata(name, help);
        this.labelNames = labelNames.clone();
        this.callback = callback;
    }

    /** Registers the family {@code name} (a {@code _seconds} histogram) on {@code registry}. */
    public static HistogramFamily register(PrometheusRegistry registry, String name, String help, List<String> labelNames,
                                           Consumer<Sink> callback) {
        HistogramFamily f = new HistogramFamily(name, help, labelNames.toArray(String[]::new), callback);
        registry.register(f);
        return f;
    }

    @Override
    public MetricSnapshot collect() {
        List<HistogramDataPointSnapshot> points = new ArrayList<>();
        callback.accept((histogram, values) -> {
            if (values.length != labelNames.length) {
                throw new IllegalArgumentException(metadata.getPrometheusName() + ": " + values.length
                    + " label values for the labels " + List.of(labelNames));
            }
            points.add(histogram.snapshot(Labels.of(labelNames, values)));
        });
        return new HistogramSnapshot(metadata, points);
    }

    /** What the registry checks a new family against (no two families with one name). */
    @Override
    public MetricFamilyDescriptor getMetricFamilyDescriptor() {
        return MetricFamilyDescriptor.of(MetricType.HISTOGRAM, metadata, List.of(labelNames));
    }
}
