package io.kvgate.tools.monitoring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The checked-in Grafana dashboard and alert rules: the dashboard's shape (schema version, the datasource, instance
 * and rule variables, every panel queried through the datasource variable), and every series either file queries is
 * one the gateway exposes (metric-families.txt, itself checked against a live scrape by StatusPageSystemTest).
 */
class DashboardAndAlertsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Path ROOT = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();

    private static JsonNode dashboard() throws Exception {
        return JSON.readTree(Files.readString(ROOT.resolve("deploy/grafana/kvgate.json")));
    }

    /** Every panel, rows' nested panels included. */
    private static List<JsonNode> panels(JsonNode dash) {
        List<JsonNode> out = new ArrayList<>();
        for (JsonNode p : dash.get("panels")) {
            out.add(p);
            p.path("panels").forEach(out::add);
        }
        return out;
    }

    @Test
    void dashboardHasTheVariablesAndEveryPanelQueriesThroughTheDatasourceVariable() throws Exception {
        JsonNode dash = dashboard();
        assertTrue(dash.get("schemaVersion").asInt() >= 39, "schemaVersion " + dash.get("schemaVersion"));
        assertEquals("kvgate-overview", dash.get("uid").asText());
        Set<String> vars = new TreeSet<>();
        for (JsonNode v : dash.at("/templating/list")) {
            vars.add(v.get("name").asText());
            if (v.get("name").asText().equals("datasource")) {
                assertEquals("datasource", v.get("type").asText());
                assertEquals("prometheus", v.get("query").asText());
            }
        }
        assertEquals(Set.of("datasource", "instance", "rule"), vars);
        int queried = 0;
        Set<String> titles = new TreeSet<>();
        for (JsonNode p : panels(dash)) {
            assertTrue(titles.add(p.get("title").asText()), "duplicate panel title " + p.get("title"));
            if (p.get("type").asText().equals("row")) {
                continue;
            }
            assertFalse(p.path("description").asText().isBlank(), "panel " + p.get("title") + " says what it shows");
            assertEquals("${datasource}", p.at("/datasource/uid").asText(), "panel " + p.get("title"));
            assertTrue(p.get("targets").size() > 0, "panel " + p.get("title") + " has a query");
            for (JsonNode t : p.get("targets")) {
                String expr = t.get("expr").asText();
                assertEquals("${datasource}", t.at("/datasource/uid").asText(), "panel " + p.get("title"));
                assertTrue(expr.contains("instance=~\"$instance\""), "panel " + p.get("title") + " follows $instance: " + expr);
                queried++;
            }
        }
        assertTrue(queried >= 30, queried + " queries");
    }

    @Test
    void dashboardCoversWhatTheIssueAsksFor() throws Exception {
        String text = Files.readString(ROOT.resolve("deploy/grafana/kvgate.json"));
        for (String series : List.of("kvgate_requests_total", "kvgate_time_to_first_token_seconds_bucket",
            "kvgate_inter_token_latency_seconds_bucket", "kvgate_endpoint_load", "kvgate_kv_matched_blocks_total",
            "kvgate_kv_misses_total", "kvgate_admission_queue_depth", "kvgate_kv_subscriber_up", "kvgate_kv_events_total")) {
            assertTrue(text.contains(series), "the dashboard shows " + series);
        }
    }

    @Test
    void everySeriesTheDashboardAndAlertsQueryExists() throws Exception {
        MetricFamilies known = MetricFamilies.load();
        Set<String> unknown = new TreeSet<>();
        for (String f : MetricFamilies.MONITORING_FILES) {
            Set<String> u = known.unknownIn(Files.readString(ROOT.resolve(f)));
            u.forEach(n -> unknown.add(f + ": " + n));
        }
        assertTrue(unknown.isEmpty(), "queried but no such series (see metric-families.txt): " + unknown);
    }

    @Test
    void theCheckFailsOnASeriesNoFamilyYields() {
        MetricFamilies known = MetricFamilies.load();
        assertEquals(Set.of("kvgate_request_duration_seconds_total", "kvgate_requests"),
            known.unknownIn("rate(kvgate_request_duration_seconds_total[5m]) / kvgate_requests"
                + " + histogram_quantile(0.9, rate(kvgate_request_duration_seconds_bucket[5m]))"));
        assertEquals(Set.of(), known.unknownIn("sum(kvgate_stage_latency_seconds_count) + kvgate_build_info"));
    }

    @Test
    void everyAlertHasForSeverityAndARunbookSectionThatExists() throws Exception {
        String rules = Files.readString(ROOT.resolve("deploy/prometheus/alerts.yml"));
        String ops = Files.readString(ROOT.resolve("docs/operations.md"));
        Matcher m = Pattern.compile("- alert: (\\w+)\\n(.*?)(?=\\n      - alert: |\\z)", Pattern.DOTALL).matcher(rules);
        Set<String> alerts = new TreeSet<>();
        while (m.find()) {
            String name = m.group(1);
            String body = m.group(2);
            alerts.add(name);
            assertTrue(body.contains("\n        for: "), name + " has a for:");
            assertTrue(Pattern.compile("severity: (critical|warning)").matcher(body).find(), name + " has a severity");
            assertTrue(body.contains("summary: ") && body.contains("description: "), name + " has summary and description");
            String anchor = "alert-" + name.toLowerCase(Locale.ROOT);
            assertTrue(body.contains("runbook_url: \"docs/operations.md#" + anchor + "\""), name + " points at its runbook");
            assertTrue(ops.contains("### Alert: " + name + "\n"), "docs/operations.md has the section " + anchor);
        }
        assertEquals(Set.of("KvgateEngineDown", "KvgateKvSubscriberDown", "KvgateCacheHitRatioDrop", "KvgateShedding",
            "KvgateEngineLoadStale", "KvgateConfigReloadFailed"), alerts);
        String tests = Files.readString(ROOT.resolve("deploy/prometheus/alerts_test.yml"));
        for (String a : alerts) {
            assertTrue(tests.contains("alertname: " + a + "\n        exp_alerts: []"), a + " has a not-firing case");
            assertTrue(Pattern.compile("alertname: " + a + "\\n        exp_alerts:\\n          - exp_labels").matcher(tests).find(),
                a + " has a firing case");
        }
    }
}
