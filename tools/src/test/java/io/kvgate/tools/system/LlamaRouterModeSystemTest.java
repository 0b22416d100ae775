package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * llama.cpp router mode (issue #36 item 10, review L2): a llama-server started without a model says
 * {@code role: "router"} in its {@code /props} and states no context there; the gateway then reads the rule's model's
 * own {@code /props?model=}, its {@code /slots?model=} and its metrics page at {@code ?model=} (never loading a model
 * for a probe: {@code autoload=false}), and counts the model ready only once {@code /v1/models} says it is loaded.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class LlamaRouterModeSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private final HttpClient http = HttpClient.newHttpClient();

    @Test
    void aRouterIsProbedPerModelAndItsModelIsReadyOnlyOnceLoaded() throws Exception {
        // The model loads until the test says it has (POST /sim/loaded): the loading window is the test's, not a timer's.
        try (EngineSimulator sim = EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.LLAMACPP)
            .model("m").ttftMs(1).itlMs(1).maxConcurrency(2).contextLen(8192).enableMetrics(true).llamaRouter(true)
            .loadMs(600_000))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 100}
                load: {scrape_interval_ms: 50}
                rules:
                  - name: llama
                    models: [m]
                    engine: llamacpp
                    policy: session
                    session: {pin_slot: true}
                    endpoints:
                      - url: %s
                """.formatted(sim.baseUrl())));
            try {
                EndpointState ep = endpoint(gw);
                Await.until(WAIT, "the router recognised", () -> "m".equals(ep.facts().routerModel()),
                    () -> "router props asked " + sim.stats().get("router_props_requests") + " times");
                // Loading: listed by the router, not ready; its context is not read (autoload=false: 400, retried).
                HttpResponse<String> waiting = get("http://127.0.0.1:" + gw.port() + "/ready/engines");
                assertEquals(503, waiting.statusCode(), waiting.body());
                assertTrue(waiting.body().contains("m"), waiting.body());
                assertEquals(0, ep.facts().engineContextLen(), "no context from the router's own /props (n_ctx 0)");

                assertEquals(200, post(sim.baseUrl() + "/sim/loaded").statusCode());
                Await.until(WAIT, "the model's own /props read", () -> ep.facts().engineContextLen() == 4096,
                    () -> "context " + ep.facts().engineContextLen());
                Await.until(WAIT, "the model ready", () -> get("http://127.0.0.1:" + gw.port() + "/ready/engines")
                    .statusCode() == 200, () -> get("http://127.0.0.1:" + gw.port() + "/ready/engines").body());
                Await.until(WAIT, "the model's slots read", () -> ep.facts().engineSlots() == 2,
                    () -> "slots " + ep.facts().engineSlots());
                Await.until(WAIT, "its metrics page scraped", () -> gw.loadScraper() != null
                    && gw.loadScraper().scrapes(ep.key(), io.kvgate.dataplane.load.EngineLoadScraper.Result.OK) > 0,
                    () -> "scrapes not ok yet");
                assertEquals(4096, rule(gw).contextLength(), "the rule's context: one slot's, from the model's /props");

                HttpResponse<String> answer = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                    + "/v1/chat/completions")).header("content-type", "application/json").POST(HttpRequest.BodyPublishers
                    .ofString("{\"model\":\"m\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(200, answer.statusCode(), answer.body());
                assertTrue(sim.stats().get("router_model_requests") > 0, "per-model routes were asked with ?model=");
            } finally {
                gw.close(100);
            }
        }
    }

    private static Rule rule(Gateway gw) {
        return gw.routeTable().rules().get(0);
    }

    private static EndpointState endpoint(Gateway gw) {
        return rule(gw).endpoints().get(0);
    }

    private HttpResponse<String> get(String url) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString());
        } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    private HttpResponse<String> post(String url) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.noBody()).build(),
            HttpResponse.BodyHandlers.ofString());
    }
}
