package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.FamilyRegistry;
import io.kvgate.dataplane.metrics.MetricsCatalogue;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code docs/metrics.md} lists exactly the families a gateway registers (its components' and the JVM's): a family
 * without a row, or a row whose family is gone or changed, fails here with the command that regenerates the table.
 */
@Timeout(60)
@Tag("system")
class MetricsCatalogueSystemTest {
    static final Path DOC = Path.of("..", "docs", "metrics.md");
    static final Path REGENERATED = Path.of("target", "metrics.md");

    @Test
    void docsMetricsListsEveryFamilyOfAGatewayAndNoOther() throws Exception {
        List<MetricsCatalogue.Family> families;
        try (Gateway gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                endpoints:
                  - url: http://127.0.0.1:9
            """))) {
            families = afterAGc((FamilyRegistry) gw.metrics().registry());
        }
        assertTrue(families.stream().anyMatch(f -> f.name().equals("kvgate_kv_subscriber_up")), families.toString());
        assertTrue(families.stream().anyMatch(f -> f.name().startsWith("jvm_")), families.toString());
        String page = Files.exists(DOC) ? Files.readString(DOC) : "";
        String want = MetricsCatalogue.table(families);
        if (!want.equals(MetricsCatalogue.tableOf(page))) {
            Files.createDirectories(REGENERATED.getParent());
            Files.writeString(REGENERATED, MetricsCatalogue.withTable(page, want));
        }
        assertEquals(want, MetricsCatalogue.tableOf(page), "docs/metrics.md is out of date with the registry. Regenerate it:"
            + " ./mvnw -o -q -pl dataplane -am verify -Dgroups=system -Dtest=MetricsCatalogueSystemTest"
            + " -Dsurefire.failIfNoSpecifiedTests=false; cp dataplane/target/metrics.md docs/metrics.md");
    }

    /**
     * The registry's families once a collection has been seen: the JVM's per-pool allocation counter has no series,
     * hence no {@code pool} label, until the first GC notification (which the JVM delivers asynchronously), so a
     * catalogue taken before one would differ by that label alone. Polls for the notification (at most 10 s; then
     * the comparison below names the difference).
     */
    private static List<MetricsCatalogue.Family> afterAGc(FamilyRegistry registry) throws InterruptedException {
        for (int tries = 0; ; tries++) {
            List<MetricsCatalogue.Family> families = MetricsCatalogue.families(registry);
            if (tries == 500) {
                return families;
            }
            if (families.stream()
                .anyMatch(f -> f.name().equals("jvm_memory_pool_allocated_bytes_total") && !f.labels().isEmpty())) {
                return families;
            }
            System.gc();
            Thread.sleep(20);
        }
    }
}
