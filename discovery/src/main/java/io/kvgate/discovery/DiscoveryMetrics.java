package io.kvgate.discovery;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.List;

/**
 * The discovery's metric families, one owner: what each rule's source saw ({@code kvgate_discovery_events_total},
 * {@code kvgate_discovery_errors_total}), what it holds now ({@code kvgate_discovery_endpoints}), and how long a set
 * took from the event that produced it to being applied to the routing table ({@code kvgate_discovery_apply_seconds}:
 * the report queue plus the reload that applies it). {@code source} is the rule's {@code discovery.type}
 * ({@code dns}, {@code kubernetes}, {@code inference_pool}).
 */
public final class DiscoveryMetrics {
    /** Not registered anywhere: for a discovery whose metrics nobody scrapes (tests). */
    public static DiscoveryMetrics unregistered() {
        return new DiscoveryMetrics(null);
    }

    private final Gauge endpoints;
    private final Counter events;
    private final Counter errors;
    private final Histogram apply;

    public DiscoveryMetrics(PrometheusRegistry registry) {
        endpoints = Gauge.builder().name("kvgate_discovery_endpoints")
            .help("Endpoints a discovered rule holds now, by condition: ready (routable), terminating (drained: in flight"
                + " finish, no new request), serving (both: every endpoint the source reports).")
            .labelNames("rule", "source", "state").build();
        events = Counter.builder().name("kvgate_discovery_events_total")
            .help("Events a discovery source saw: add, update, delete (watch), list (a first or fresh list), resolve (DNS).")
            .labelNames("rule", "source", "kind").build();
        errors = Counter.builder().name("kvgate_discovery_errors_total")
            .help("Failed lists and watches (a 410 Gone is not one: the informer lists afresh) and failed DNS resolutions; the last set found stays.")
            .labelNames("rule", "source").build();
        apply = Histogram.builder().name("kvgate_discovery_apply_seconds")
            .help("From a discovery event to its endpoint set applied to the routing table (queue + reload).")
            .classicUpperBounds(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
            .labelNames("rule", "source").build();
        if (registry != null) {
            registry.register(endpoints);
            registry.register(events);
            registry.register(errors);
            registry.register(apply);
        }
    }

    void event(String rule, String source, String kind) {
        events.labelValues(rule, source, kind).inc();
    }

    void error(String rule, String source) {
        errors.labelValues(rule, source).inc();
    }

    /** A set applied: the gauges follow it, and the time since its event is observed. */
    void applied(String rule, String source, List<DiscoveredEndpoint> set, long sinceEventNs) {
        long terminating = set.stream().filter(DiscoveredEndpoint::terminating).count();
        endpoints.labelValues(rule, source, "ready").set(set.size() - terminating);
        endpoints.labelValues(rule, source, "terminating").set(terminating);
        endpoints.labelValues(rule, source, "serving").set(set.size());
        apply.labelValues(rule, source).observe(sinceEventNs / 1e9);
    }

    /** A rule no longer discovered: its series go. */
    void forget(String rule, String source) {
        for (String state : List.of("ready", "terminating", "serving")) {
            endpoints.remove(rule, source, state);
        }
    }

    /** Test view: a counter's value (0 when never counted). */
    public double eventCount(String rule, String source, String kind) {
        return events.labelValues(rule, source, kind).get();
    }

    /** Test view: the errors counted for a rule. */
    public double errorCount(String rule, String source) {
        return errors.labelValues(rule, source).get();
    }

    /** Test view: the endpoints gauge. */
    public double endpointCount(String rule, String source, String state) {
        return endpoints.labelValues(rule, source, state).get();
    }

    /** Test view: how many applies were timed, and their sum in seconds. */
    public long applyCount(String rule, String source) {
        return apply.labelValues(rule, source).getCount();
    }

    public double applySumSeconds(String rule, String source) {
        return apply.labelValues(rule, source).getSum();
    }
}
