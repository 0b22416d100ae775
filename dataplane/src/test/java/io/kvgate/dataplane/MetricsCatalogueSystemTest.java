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
            families = MetricsCatalogue.families((FamilyRegistry) gw.metrics().registry());
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
}
