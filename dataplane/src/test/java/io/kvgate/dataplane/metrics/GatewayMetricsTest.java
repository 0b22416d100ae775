package io.kvgate.dataplane.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

/** The per-request series: labels bounded by configuration, statuses by slot, buckets in integer nanoseconds. */
class GatewayMetricsTest {
    private static List<String> lines(GatewayMetrics m, String family) {
        List<String> out = new ArrayList<>();
        for (String line : m.render().split("\n")) {
            if (line.startsWith(family + "{")) {
                out.add(line);
            }
        }
        return out;
    }

    @Test
    void requestsAreCountedByRuleModelAndStatusInOrder() {
        GatewayMetrics m = new GatewayMetrics();
        m.modelLabels(Set.of("m"));
        m.request("r", "m", 200, 1_000);
        m.request("r", "m", 200, 1_000);
        m.request("r", "m", 503, 1_000);
        m.request("r", "m", GatewayMetrics.STREAM_ERROR, 1_000);
        m.request("r", "m", "429", 1_000); // a status label given as text is the same series as the number
        m.request("r", "m", 429, 1_000);
        assertEquals(List.of(
            "kvgate_requests_total{model=\"m\",rule=\"r\",status=\"200\"} 2.0",
            "kvgate_requests_total{model=\"m\",rule=\"r\",status=\"429\"} 2.0",
            "kvgate_requests_total{model=\"m\",rule=\"r\",status=\"503\"} 1.0",
            "kvgate_requests_total{model=\"m\",rule=\"r\",status=\"stream_error\"} 1.0"), lines(m, "kvgate_requests_total"));
    }

    @Test
    void statusesOutsideHttpsRangeAreKeptAsTheyAre() {
        GatewayMetrics m = new GatewayMetrics();
        m.request("r", null, 600, 1);
        m.request("r", null, -1, 1);
        m.request("r", null, "007", 1);
        List<String> l = lines(m, "kvgate_requests_total");
        assertEquals(3, l.size(), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"unknown\",rule=\"r\",status=\"600\"} 1.0"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"unknown\",rule=\"r\",status=\"-1\"} 1.0"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"unknown\",rule=\"r\",status=\"007\"} 1.0"), l.toString());
    }

    @Test
    void aModelLabelIsAConfiguredNameOrUnknownAndFollowsASwap() {
        GatewayMetrics m = new GatewayMetrics();
        m.modelLabels(Set.of("a"));
        m.request("r", "a", 200, 1);
        m.request("r", "b", 200, 1);
        m.request(null, null, 400, 1);
        m.modelLabels(Set.of("b"));
        m.request("r", "a", 200, 1);
        m.request("r", "b", 200, 1);
        List<String> l = lines(m, "kvgate_requests_total");
        assertTrue(l.contains("kvgate_requests_total{model=\"a\",rule=\"r\",status=\"200\"} 1.0"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"unknown\",rule=\"r\",status=\"200\"} 2.0"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"b\",rule=\"r\",status=\"200\"} 1.0"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{model=\"unknown\",rule=\"\",status=\"400\"} 1.0"), l.toString());
        assertEquals(4, l.size(), l.toString());
    }

    @Test
    void tokensAndTimeToFirstByteAreRenderedOnlyWhereRecorded() {
        GatewayMetrics m = new GatewayMetrics();
        m.modelLabels(Set.of("m"));
        m.request("", null, 404, 1);
        m.tokens("r", "m", 10, 3, 8);
        m.tokens("r", "m", 1, 1, 0);
        m.timeToFirstByte("r", 2_000_000);
        assertEquals(Set.of("kvgate_tokens_total{kind=\"prompt\",model=\"m\",rule=\"r\"} 11.0",
            "kvgate_tokens_total{kind=\"completion\",model=\"m\",rule=\"r\"} 4.0",
            "kvgate_tokens_total{kind=\"cached\",model=\"m\",rule=\"r\"} 8.0"), Set.copyOf(lines(m, "kvgate_tokens_total")));
        String text = m.render();
        assertTrue(text.contains("kvgate_time_to_first_byte_seconds_count{rule=\"r\"} 1"), text);
        assertFalse(text.contains("kvgate_time_to_first_byte_seconds_count{rule=\"\"}"), "no TTFB was recorded for rule \"\"");
        assertTrue(text.contains("kvgate_request_duration_seconds_count{rule=\"\"} 1"), text);
        assertFalse(text.contains("kvgate_request_duration_seconds_count{rule=\"r\"}"), "no request of rule r ended yet");
    }

    @Test
    void aValueOnABucketBoundGoesInThatBucket() {
        GatewayMetrics m = new GatewayMetrics();
        m.timeToFirstByte("x", 0);             // le 1e-05
        m.timeToFirstByte("x", 100_000);       // exactly 100 µs: le 1e-04
        m.timeToFirstByte("x", 100_001);       // le 2.5e-04
        m.timeToFirstByte("x", 1_000_000_000L); // exactly 1 s: le 1.0
        m.timeToFirstByte("x", 600_000_000_000L); // exactly 10 minutes: le 600.0, the top bucket
        m.timeToFirstByte("x", Long.MAX_VALUE); // +Inf
        String t = m.render();
        String b = "kvgate_time_to_first_byte_seconds_bucket{rule=\"x\",le=\"";
        assertTrue(t.contains(b + "1.0E-5\"} 1\n"), t);
        assertTrue(t.contains(b + "1.0E-4\"} 2\n"), t);
        assertTrue(t.contains(b + "2.5E-4\"} 3\n"), t);
        assertTrue(t.contains(b + "0.5\"} 3\n"), t);
        assertTrue(t.contains(b + "1.0\"} 4\n"), t);
        assertTrue(t.contains(b + "300.0\"} 4\n"), t);
        assertTrue(t.contains(b + "600.0\"} 5\n"), t);
        assertTrue(t.contains(b + "+Inf\"} 6\n"), t);
        assertTrue(t.contains("kvgate_time_to_first_byte_seconds_count{rule=\"x\"} 6\n"), t);
    }

    @Test
    void firstTokenAndInterTokenLatencyAreHistogramsPerRuleWithTraceExemplars() {
        GatewayMetrics m = new GatewayMetrics();
        m.timeToFirstToken("chat", 150_000_000, "4bf92f3577b34da6a3ce929d0e0e4736");
        m.timeToFirstToken("chat", 40_000_000, null);
        m.interTokenLatency("chat", 20_000_000, null);
        m.interTokenLatency("chat", 30_000_000, "0af7651916cd43dd8448eb211c80319c");
        m.interTokenLatency("code", 5_000_000, null);
        String t = m.render();
        assertTrue(t.contains("# TYPE kvgate_time_to_first_token_seconds histogram\n"), t);
        assertTrue(t.contains("kvgate_time_to_first_token_seconds_bucket{rule=\"chat\",le=\"0.05\"} 1\n"), t);
        assertTrue(t.contains("kvgate_time_to_first_token_seconds_bucket{rule=\"chat\",le=\"0.25\"} 2\n"), t);
        assertTrue(t.contains("kvgate_time_to_first_token_seconds_sum{rule=\"chat\"} 0.19\n"), t);
        assertTrue(t.contains("kvgate_inter_token_latency_seconds_count{rule=\"chat\"} 2\n"), t);
        assertTrue(t.contains("kvgate_inter_token_latency_seconds_count{rule=\"code\"} 1\n"), t);
        assertFalse(t.contains("kvgate_time_to_first_token_seconds_count{rule=\"code\"}"), "no first token was recorded for code");
        // Exemplars exist in OpenMetrics only: the traced observation is its bucket's, the untraced ones carry none.
        String om = new String(MetricsExposition.scrape(m.registry(), "application/openmetrics-text; version=1.0.0").body(),
            java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(om.contains("kvgate_time_to_first_token_seconds_bucket{rule=\"chat\",le=\"0.25\"} 2 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.15"), om);
        assertTrue(om.contains("kvgate_inter_token_latency_seconds_bucket{rule=\"chat\",le=\"0.05\"} 2 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\"} 0.03"), om);
        assertFalse(om.contains("kvgate_time_to_first_token_seconds_bucket{rule=\"chat\",le=\"0.05\"} 1 #"), om);
    }

    @Test
    void aRequestDurationCarriesItsTraceIdAsAnExemplar() {
        GatewayMetrics m = new GatewayMetrics();
        m.request("r", null, 200, 2_000_000_000L, "a3ce929d0e0e47364bf92f3577b34da6");
        m.request("r", null, 500, 3_000_000L);
        String om = new String(MetricsExposition.scrape(m.registry(), "application/openmetrics-text").body(),
            java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(om.contains("kvgate_request_duration_seconds_bucket{rule=\"r\",le=\"2.5\"} 2 # {trace_id=\"a3ce929d0e0e47364bf92f3577b34da6\"} 2.0"), om);
        assertTrue(om.contains("kvgate_requests_total{model=\"unknown\",rule=\"r\",status=\"500\"} 1"), om);
    }

    @Test
    void buildInfoNamesTheVersionCommitAndJava() {
        var b = io.kvgate.control.BuildInfo.current();
        String t = new GatewayMetrics().render();
        assertTrue(t.contains("kvgate_build_info{commit=\"" + b.commit() + "\",java=\"" + b.javaVersion() + "\",version=\""
            + b.version() + "\"} 1"), t);
    }

    @Test
    void stageLatencyIsAHistogramWithoutAMaxSample() {
        GatewayMetrics m = new GatewayMetrics();
        m.stages.recordNs(StageTimers.Stage.PARSE, 20_000);
        m.stages.recordNs(StageTimers.Stage.PARSE, 7_000);
        m.stages.recordNs(StageTimers.Stage.PARSE, -1); // a clock step back: not a latency
        String t = m.render();
        assertTrue(t.contains("# TYPE kvgate_stage_latency_seconds histogram\n"), t);
        assertTrue(t.contains("kvgate_stage_latency_seconds_bucket{stage=\"parse\",le=\"1.0E-5\"} 1\n"), t);
        assertTrue(t.contains("kvgate_stage_latency_seconds_bucket{stage=\"parse\",le=\"2.5E-5\"} 2\n"), t);
        assertTrue(t.contains("kvgate_stage_latency_seconds_count{stage=\"parse\"} 2\n"), t);
        assertTrue(t.contains("kvgate_stage_latency_max_seconds{stage=\"parse\"} 2.0E-5\n"), t);
        assertTrue(t.contains("kvgate_stage_latency_seconds_count{stage=\"decide\"} 0\n"), t);
        assertFalse(t.contains("kvgate_stage_latency_seconds_max"), t);
        assertFalse(t.contains("quantile="), t);
    }

    @Test
    void everyScrapeFormatIsNegotiatedByAccept() {
        GatewayMetrics m = new GatewayMetrics();
        m.badRequest("too_large");
        var text = MetricsExposition.scrape(m.registry(), null);
        assertEquals("text/plain; version=0.0.4; charset=utf-8", text.contentType());
        assertTrue(new String(text.body(), java.nio.charset.StandardCharsets.UTF_8)
            .contains("kvgate_bad_requests_total{reason=\"too_large\"} 1.0\n"));
        assertEquals("text/plain; version=0.0.4; charset=utf-8", MetricsExposition.scrape(m.registry(), "*/*").contentType());
        var om = MetricsExposition.scrape(m.registry(), "application/openmetrics-text;version=1.0.0,text/plain;q=0.5");
        assertTrue(om.contentType().startsWith("application/openmetrics-text; version=1.0.0"), om.contentType());
        assertTrue(new String(om.body(), java.nio.charset.StandardCharsets.UTF_8).endsWith("# EOF\n"));
        var pb = MetricsExposition.scrape(m.registry(),
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited");
        assertTrue(pb.contentType().startsWith("application/vnd.google.protobuf"), pb.contentType());
        assertTrue(new String(pb.body(), java.nio.charset.StandardCharsets.ISO_8859_1).contains("kvgate_bad_requests_total"));
    }

    @Test
    void everyFamilyOfGatewayMetricsHasItsRowInDocsMetrics() throws Exception {
        String table = MetricsCatalogue.tableOf(java.nio.file.Files.readString(java.nio.file.Path.of("..", "docs", "metrics.md")));
        assertTrue(table != null, "docs/metrics.md has no generated table");
        List<MetricsCatalogue.Family> families = MetricsCatalogue.families((FamilyRegistry) new GatewayMetrics().registry());
        assertTrue(families.size() >= 20, families.toString());
        for (MetricsCatalogue.Family f : families) {
            assertTrue(table.contains(f.row() + "\n"), "docs/metrics.md lacks (or has a stale) row " + f.row()
                + "; regenerate it as docs/development.md (Metrics catalogue) says");
        }
    }

    @Test
    void aHistogramFamilyRefusesLabelValuesThatDoNotMatchItsLabels() {
        var registry = new io.prometheus.metrics.model.registry.PrometheusRegistry();
        LatencyHistogram h = new LatencyHistogram();
        HistogramFamily.register(registry, "kvgate_x_seconds", "x", List.of("rule", "class"), sink -> sink.add(h, "only-one"));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, registry::scrape);
        assertTrue(e.getMessage().contains("kvgate_x_seconds: 1 label values for the labels [rule, class]"), e.getMessage());
    }

    @Test
    void aComponentCannotRegisterAFamilyTwice() {
        GatewayMetrics m = new GatewayMetrics();
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
            () -> HistogramFamily.register(m.registry(), "kvgate_request_duration_seconds", "again", List.of("rule"), sink -> {}));
        assertTrue(e.getMessage().contains("kvgate_request_duration_seconds"), e.getMessage());
    }

    @Test
    void recordsFromManyThreadsAllCount() throws Exception {
        GatewayMetrics m = new GatewayMetrics();
        m.modelLabels(Set.of("m"));
        int threads = 4;
        int each = 20_000;
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < each; i++) {
                    m.request(id % 2 == 0 ? "r" : "s", "m", 200 + (i % 2), 1_000);
                    m.tokens("r", "m", 1, 0, 0);
                }
            });
            th.start();
            ts.add(th);
        }
        go.countDown();
        for (Thread th : ts) {
            th.join(30_000);
            assertFalse(th.isAlive(), "a recording thread did not finish");
        }
        List<String> l = lines(m, "kvgate_requests_total");
        for (String rule : new String[] {"r", "s"}) {
            for (String st : new String[] {"200", "201"}) {
                assertTrue(l.contains("kvgate_requests_total{model=\"m\",rule=\"" + rule + "\",status=\"" + st + "\"} " + (double) each),
                    l.toString());
            }
        }
        assertTrue(lines(m, "kvgate_tokens_total").contains(
            "kvgate_tokens_total{kind=\"prompt\",model=\"m\",rule=\"r\"} " + (double) (threads * each)));
    }
}
