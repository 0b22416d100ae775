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
            "kvgate_requests_total{rule=\"r\",model=\"m\",status=\"200\"} 2",
            "kvgate_requests_total{rule=\"r\",model=\"m\",status=\"429\"} 2",
            "kvgate_requests_total{rule=\"r\",model=\"m\",status=\"503\"} 1",
            "kvgate_requests_total{rule=\"r\",model=\"m\",status=\"stream_error\"} 1"), lines(m, "kvgate_requests_total"));
    }

    @Test
    void statusesOutsideHttpsRangeAreKeptAsTheyAre() {
        GatewayMetrics m = new GatewayMetrics();
        m.request("r", null, 600, 1);
        m.request("r", null, -1, 1);
        m.request("r", null, "007", 1);
        List<String> l = lines(m, "kvgate_requests_total");
        assertEquals(3, l.size(), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"unknown\",status=\"600\"} 1"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"unknown\",status=\"-1\"} 1"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"unknown\",status=\"007\"} 1"), l.toString());
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
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"a\",status=\"200\"} 1"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"unknown\",status=\"200\"} 2"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"r\",model=\"b\",status=\"200\"} 1"), l.toString());
        assertTrue(l.contains("kvgate_requests_total{rule=\"\",model=\"unknown\",status=\"400\"} 1"), l.toString());
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
        assertEquals(List.of("kvgate_tokens_total{rule=\"r\",model=\"m\",kind=\"prompt\"} 11",
            "kvgate_tokens_total{rule=\"r\",model=\"m\",kind=\"completion\"} 4",
            "kvgate_tokens_total{rule=\"r\",model=\"m\",kind=\"cached\"} 8"), lines(m, "kvgate_tokens_total"));
        String text = m.render();
        assertTrue(text.contains("kvgate_time_to_first_byte_seconds_count{rule=\"r\"} 1"), text);
        assertFalse(text.contains("kvgate_time_to_first_byte_seconds_count{rule=\"\"}"), "no TTFB was recorded for rule \"\"");
        assertTrue(text.contains("kvgate_request_duration_seconds_count{rule=\"\"} 1"), text);
        assertFalse(text.contains("kvgate_request_duration_seconds_count{rule=\"r\"}"), "no request of rule r ended yet");
    }

    @Test
    void aValueOnABucketBoundGoesInThatBucket() {
        LatencyHistogram h = new LatencyHistogram();
        h.recordNs(0);            // le 0.0001
        h.recordNs(100_000);      // exactly 100 µs: le 0.0001
        h.recordNs(100_001);      // le 0.00025
        h.recordNs(1_000_000_000L); // exactly 1 s: le 1.0
        h.recordNs(Long.MAX_VALUE); // +Inf
        StringBuilder out = new StringBuilder();
        h.write(out, "x", "");
        String t = out.toString();
        assertTrue(t.contains("x_bucket{le=\"1.0E-4\"} 2\n"), t);
        assertTrue(t.contains("x_bucket{le=\"2.5E-4\"} 3\n"), t);
        assertTrue(t.contains("x_bucket{le=\"0.5\"} 3\n"), t);
        assertTrue(t.contains("x_bucket{le=\"1.0\"} 4\n"), t);
        assertTrue(t.contains("x_bucket{le=\"100.0\"} 4\n"), t);
        assertTrue(t.contains("x_bucket{le=\"+Inf\"} 5\n"), t);
        assertTrue(t.contains("x_count{} 5\n"), t);
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
                assertTrue(l.contains("kvgate_requests_total{rule=\"" + rule + "\",model=\"m\",status=\"" + st + "\"} " + each),
                    l.toString());
            }
        }
        assertTrue(lines(m, "kvgate_tokens_total").contains(
            "kvgate_tokens_total{rule=\"r\",model=\"m\",kind=\"prompt\"} " + threads * each));
    }
}
