package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * Model readiness probe: every {@code health.interval_ms} (read per tick, so a reload applies), asks each endpoint
 * of the current rule set for {@code GET /v1/models} and records the model ids it lists in {@link Readiness}. Runs
 * on its own daemon thread with the JDK HTTP client: rare, small requests, off the data path.
 */
public final class ModelProbe implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final Readiness readiness;
    private final Supplier<RouteTable> table;
    private final Supplier<GatewayConfig.Health> health;
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "kvgate-model-probe");
        t.setDaemon(true);
        return t;
    });
    private final HttpClient http;

    public ModelProbe(Readiness readiness, Supplier<RouteTable> table, Supplier<GatewayConfig.Health> health) {
        this.readiness = readiness;
        this.table = table;
        this.health = health;
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(health.get().timeoutMs())).executor(timer).build();
    }

    public void start() {
        timer.execute(this::tick);
    }

    private void tick() {
        GatewayConfig.Health h = health.get();
        try {
            readiness.observeSubscribers();
            Map<String, EndpointState> distinct = new LinkedHashMap<>();
            for (Rule r : table.get().rules()) {
                for (EndpointState ep : r.endpoints()) {
                    distinct.put(ep.key(), ep);
                }
            }
            for (EndpointState ep : distinct.values()) {
                probe(ep, h);
            }
        } finally {
            if (!timer.isShutdown()) {
                timer.schedule(this::tick, Math.max(100, h.intervalMs()), TimeUnit.MILLISECONDS);
            }
        }
    }

    private void probe(EndpointState ep, GatewayConfig.Health h) {
        HttpRequest req = HttpRequest.newBuilder(URI.create(ep.config().url() + "/v1/models"))
            .timeout(Duration.ofMillis(h.timeoutMs())).header("user-agent", "kvgate-ready").GET().build();
        http.sendAsync(req, HttpResponse.BodyHandlers.ofString()).whenComplete((r, e) -> {
            if (e != null) {
                readiness.recordModels(ep.key(), null, "GET /v1/models failed: " + e.getClass().getSimpleName());
            } else if (r.statusCode() != 200) {
                readiness.recordModels(ep.key(), null, "GET /v1/models answered " + r.statusCode());
            } else {
                try {
                    Set<String> ids = new HashSet<>();
                    for (JsonNode m : JSON.readTree(r.body()).path("data")) {
                        if (m.path("id").isTextual()) {
                            ids.add(m.path("id").asText());
                        }
                    }
                    readiness.recordModels(ep.key(), ids, null);
                } catch (java.io.IOException ex) {
                    readiness.recordModels(ep.key(), null, "GET /v1/models is not JSON");
                }
            }
        });
    }

    @Override
    public void close() {
        timer.shutdownNow();
    }
}
