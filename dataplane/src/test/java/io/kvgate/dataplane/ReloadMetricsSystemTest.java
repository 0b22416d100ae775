package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A configuration change the gateway refuses shows in {@code /metrics} (what the KvgateConfigReloadFailed alert
 * watches) until a change is applied.
 */
@Timeout(60)
@Tag("system")
class ReloadMetricsSystemTest {
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private FakeEngine engine;
    private Gateway gw;

    @BeforeEach
    void setUp() throws Exception {
        engine = new FakeEngine("a");
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        engine.close();
    }

    private String yaml(String listen, int weight) {
        return """
            listen: %s
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 60000}
            rules:
              - name: chat
                models: [qwen3]
                endpoints:
                  - {url: "%s", weight: %d}
            """.formatted(listen, engine.url(), weight);
    }

    private HttpResponse<String> put(String body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + "/admin/v1/config"))
            .timeout(Duration.ofSeconds(20)).PUT(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private String metrics() throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")).timeout(Duration.ofSeconds(20))
            .build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    @Test
    void refusedChangesShowUntilOneIsApplied() throws Exception {
        gw = Gateway.start(GatewayConfig.parse(yaml("127.0.0.1:0", 1)));
        assertTrue(metrics().contains("kvgate_config_last_reload_successful 1.0\n"));
        assertEquals(409, put(yaml("127.0.0.1:1", 1)).statusCode(), "listen is restart-only");
        // An uploaded document that does not parse is refused to its caller before any reload: not counted.
        assertEquals(400, put(yaml("127.0.0.1:0", 0)).statusCode(), "weight 0 is invalid");
        String m = metrics();
        assertTrue(m.contains("kvgate_config_last_reload_successful 0.0\n"), m);
        assertTrue(m.contains("kvgate_config_reloads_total{result=\"failed\"} 1.0\n"), m);
        HttpResponse<String> ok = put(yaml("127.0.0.1:0", 2));
        assertEquals(200, ok.statusCode(), ok.body());
        m = metrics();
        assertTrue(m.contains("kvgate_config_last_reload_successful 1.0\n"), m);
        assertTrue(m.contains("kvgate_config_reloads_total{result=\"applied\"} 1.0\n"), m);
        assertEquals(2, gw.applied().version());
    }
}
