package io.kvgate.dataplane.config;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What became of the configuration changes asked of this gateway (SIGHUP, {@code ctl reload}, {@code PUT
 * /admin/v1/config}, PATCH, weight): {@code kvgate_config_reloads_total{result}} and
 * {@code kvgate_config_last_reload_successful}, the gauge the {@code KvgateConfigReloadFailed} alert watches (the
 * convention of Prometheus's own {@code prometheus_config_last_reload_successful}): a refused change leaves the old
 * configuration serving and says nothing to anyone but the caller, so the fleet's operators learn of it here.
 *
 * <p>Thread-safe: reloads are serialized by the gateway, scrapes read from any thread.
 */
public final class ReloadMetrics {
    private final AtomicLong applied = new AtomicLong();
    private final AtomicLong unchanged = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private volatile boolean lastSuccessful = true;

    /** A change was applied ({@code changed}) or was the configuration already in effect. */
    public void succeeded(boolean changed) {
        (changed ? applied : unchanged).incrementAndGet();
        lastSuccessful = true;
    }

    /** A change was refused (invalid, unreadable, or restart-only): the previous configuration keeps serving. */
    public void failed() {
        failed.incrementAndGet();
        lastSuccessful = false;
    }

    public long failures() {
        return failed.get();
    }

    public boolean lastSuccessful() {
        return lastSuccessful;
    }

    /** Registers the two families, read from these counters on scrape. */
    public void register(PrometheusRegistry registry) {
        CounterWithCallback.builder().name("kvgate_config_reloads_total")
            .help("Configuration changes asked of this gateway, by result (applied, unchanged, failed: refused, the"
                + " previous configuration keeps serving).")
            .labelNames("result")
            .callback(cb -> {
                cb.call(applied.get(), "applied");
                cb.call(unchanged.get(), "unchanged");
                cb.call(failed.get(), "failed");
            }).register(registry);
        GaugeWithCallback.builder().name("kvgate_config_last_reload_successful")
            .help("1 when the last configuration change asked of this gateway was applied (or changed nothing), 0 when"
                + " it was refused.")
            .callback(cb -> cb.call(lastSuccessful ? 1 : 0)).register(registry);
    }

    /**
     * Registers the applied configuration's version and digest ({@code applied}: the generation in effect), which say
     * which configuration a scrape was taken under.
     */
    public static void registerApplied(PrometheusRegistry registry, java.util.function.Supplier<AppliedConfig> applied) {
        GaugeWithCallback.builder().name("kvgate_config_version")
            .help("Version of the applied configuration (1 at start-up, +1 per accepted change).")
            .callback(cb -> cb.call(applied.get().version())).register(registry);
        GaugeWithCallback.builder().name("kvgate_config_info")
            .help("The applied configuration's digest (SHA-256 of its redacted effective form).").labelNames("version", "digest")
            .callback(cb -> {
                AppliedConfig a = applied.get();
                cb.call(1, Long.toString(a.version()), a.digest());
            }).register(registry);
    }
}
