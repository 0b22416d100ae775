package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.kvgate.control.config.GatewayConfig;
import io.prometheus.metrics.expositionformats.generated.com_google_protobuf_4_36_2.Metrics.MetricFamily;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A live gateway's {@code /metrics} after real traffic (answers, a stream, a refused body, an unknown model):
 * {@code promtool check metrics} accepts the text page (HELP and TYPE on every family, valid histograms, lint-clean),
 * and each format the scraper can ask for by Accept parses as that format on both listeners.
 */
@Timeout(60)
@Tag("system")
class MetricsScrapeSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private FakeEngine engine;
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void setUp() throws Exception {
        engine = new FakeEngine("a");
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            limits:
              max_body_bytes: 65536
              request_read_timeout_ms: 1000
            upstream:
              first_byte_timeout_ms: 1500
              connect_timeout_ms: 500
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: %s
            """.formatted(engine.url())));
        for (int i = 0; i < 3; i++) {
            assertEquals(200, post(CHAT).statusCode());
        }
        engine.mode = FakeEngine.Mode.SSE;
        assertEquals(200, post(CHAT.replace("}]}", "}],\"stream\":true}")).statusCode());
        assertEquals(404, post(CHAT.replace("qwen3", "nobody-serves-this")).statusCode());
        assertEquals(400, post("{\"model\":").statusCode());
        // The exchanges measured the 4 answers' first tokens; one more, recorded here, carries a trace-id exemplar.
        gw.metrics().timeToFirstToken("chat", 120_000_000, "4bf92f3577b34da6a3ce929d0e0e4736");
        gw.metrics().interTokenLatency("chat", 15_000_000, null);
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        engine.close();
    }

    @Test
    void promtoolAcceptsTheTextPageOfALiveGateway() throws Exception {
        assumeTrue(promtool() != null, "promtool is not installed (.ci/setup installs Debian's prometheus package)");
        HttpResponse<byte[]> r = scrape(gw.adminPort(), null);
        assertEquals(200, r.statusCode());
        assertEquals("text/plain; version=0.0.4; charset=utf-8", r.headers().firstValue("content-type").orElseThrow());
        String page = new String(r.body(), StandardCharsets.UTF_8);
        assertTrue(page.contains("kvgate_requests_total{model=\"qwen3\",rule=\"chat\",status=\"200\"} 4.0"), page);
        assertTrue(page.contains("kvgate_requests_total{model=\"unknown\",rule=\"\",status=\"404\"} 1.0"), page);
        assertTrue(page.contains("kvgate_bad_requests_total{reason="), page);
        assertTrue(page.contains("kvgate_time_to_first_token_seconds_count{rule=\"chat\"} 5\n"), page);
        assertTrue(page.contains("# TYPE kvgate_stage_latency_seconds histogram"), page);
        assertTrue(page.contains("kvgate_build_info{"), page);
        assertTrue(page.contains("jvm_memory_used_bytes{"), page);
        assertTrue(page.contains("process_cpu_seconds_total"), page);

        Process p = new ProcessBuilder(promtool().toString(), "check", "metrics").redirectErrorStream(true).start();
        try (var in = p.getOutputStream()) {
            in.write(r.body());
        }
        String out;
        try (InputStream o = p.getInputStream()) {
            out = new String(o.readAllBytes(), StandardCharsets.UTF_8);
        }
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "promtool did not finish");
        assertEquals(0, p.exitValue(), "promtool check metrics:\n" + out);
    }

    @Test
    void theScraperChoosesTheFormatOnEitherListener() throws Exception {
        for (int port : new int[] {gw.port(), gw.adminPort()}) {
            HttpResponse<byte[]> om = scrape(port, "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5");
            assertEquals(200, om.statusCode());
            assertTrue(om.headers().firstValue("content-type").orElseThrow().startsWith("application/openmetrics-text; version=1.0.0"));
            String text = new String(om.body(), StandardCharsets.UTF_8);
            assertTrue(text.endsWith("# EOF\n"), text);
            assertTrue(text.contains("# TYPE kvgate_requests counter\n"), text);
            assertTrue(text.contains("# {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.12"), "the exemplar: " + text);

            HttpResponse<byte[]> pb = scrape(port,
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited");
            assertEquals(200, pb.statusCode());
            assertTrue(pb.headers().firstValue("content-type").orElseThrow().startsWith("application/vnd.google.protobuf"));
            Map<String, MetricFamily> families = new HashMap<>();
            try (InputStream in = new ByteArrayInputStream(pb.body())) {
                for (MetricFamily f; (f = MetricFamily.parseDelimitedFrom(in)) != null; ) {
                    families.put(f.getName(), f);
                }
            }
            MetricFamily requests = families.get("kvgate_requests_total");
            assertTrue(requests != null, families.keySet().toString());
            double ok = requests.getMetricList().stream()
                .filter(m -> m.getLabelList().stream().anyMatch(l -> l.getName().equals("status") && l.getValue().equals("200")))
                .mapToDouble(m -> m.getCounter().getValue()).sum();
            assertEquals(4, ok, requests.toString());
            assertEquals(families.get("kvgate_request_duration_seconds").getMetric(0).getHistogram().getBucketCount(), 25,
                "24 bounds up to 600 s and +Inf");
        }
    }

    @Test
    void theAdminTokenGuardsTheAdminMetricsPage() throws Exception {
        gw.close(100);
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: s3cret
            rules:
              - name: chat
                models: [qwen3]
                endpoints:
                  - url: %s
            """.formatted(engine.url())));
        assertEquals(401, scrape(gw.adminPort(), null).statusCode());
        HttpResponse<byte[]> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + "/metrics"))
            .header("Authorization", "Bearer s3cret").GET().build(), HttpResponse.BodyHandlers.ofByteArray());
        assertEquals(200, r.statusCode());
        assertTrue(new String(r.body(), StandardCharsets.UTF_8).contains("# TYPE kvgate_build_info gauge"));
    }

    private HttpResponse<String> post(String body) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<byte[]> scrape(int port, String accept) throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).GET();
        if (accept != null) {
            b.header("Accept", accept);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    private static Path promtool() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
            Path p = Path.of(dir, "promtool");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }
}
