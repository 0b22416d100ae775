package io.kvgate.dataplane.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.metrics.MetricsExposition;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import org.junit.jupiter.api.Test;

/** The reload outcome families: counts by result, and the last-successful gauge a later good reload clears. */
class ReloadMetricsTest {
    private static String text(ReloadMetrics m) {
        PrometheusRegistry registry = new PrometheusRegistry();
        m.register(registry);
        return MetricsExposition.text(registry);
    }

    @Test
    void aRefusedChangeSetsTheGaugeToZeroUntilAChangeSucceeds() {
        ReloadMetrics m = new ReloadMetrics();
        assertTrue(text(m).contains("kvgate_config_last_reload_successful 1.0\n"), "nothing refused yet");
        m.succeeded(true);
        m.failed();
        m.failed();
        assertFalse(m.lastSuccessful());
        String t = text(m);
        assertTrue(t.contains("kvgate_config_last_reload_successful 0.0\n"), t);
        assertTrue(t.contains("kvgate_config_reloads_total{result=\"failed\"} 2.0\n"), t);
        assertTrue(t.contains("kvgate_config_reloads_total{result=\"applied\"} 1.0\n"), t);
        assertTrue(t.contains("# TYPE kvgate_config_reloads_total counter\n"), t);
        m.succeeded(false);
        t = text(m);
        assertTrue(t.contains("kvgate_config_last_reload_successful 1.0\n"), "an unchanged reload is a successful one: " + t);
        assertTrue(t.contains("kvgate_config_reloads_total{result=\"unchanged\"} 1.0\n"), t);
        assertEquals(2, m.failures());
    }
}
