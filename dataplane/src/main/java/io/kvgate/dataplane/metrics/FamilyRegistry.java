package io.kvgate.dataplane.metrics;

import io.prometheus.metrics.model.registry.Collector;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A {@link PrometheusRegistry} that remembers what was registered in it, so the family catalogue
 * ({@link MetricsCatalogue}, {@code docs/metrics.md}) lists every family a gateway registers, including the ones
 * that have no sample yet (the text format leaves those out).
 */
public final class FamilyRegistry extends PrometheusRegistry {
    private final List<Collector> collectors = new CopyOnWriteArrayList<>();
    private final List<MultiCollector> multiCollectors = new CopyOnWriteArrayList<>();

    @Override
    public void register(Collector collector) {
        super.register(collector);
        collectors.add(collector);
    }

    @Override
    public void register(MultiCollector collector) {
        super.register(collector);
        multiCollectors.add(collector);
    }

    List<Collector> collectors() {
        return List.copyOf(collectors);
    }

    List<MultiCollector> multiCollectors() {
        return List.copyOf(multiCollectors);
    }
}
