package io.kvgate.epp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.epp.check.EnvoyEmulator;
import io.kvgate.epp.check.EppCheck;
import io.kvgate.epp.protocol.EppProtocol;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The picker's answers on every path a client or Envoy can reach, through the Envoy emulator: the front door's
 * refusals as ImmediateResponse with the OpenAI error object (401, 404, draining 503), no endpoint 503, admission's
 * shed 429 with Retry-After, the P/D pick (decode pod, prefill pod in {@code x-prefiller-host-port}), the served-endpoint
 * report moving the blame to the pick that did not answer, the load handed back, and readiness following the gateway's.
 */
@Tag("system")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EppPickerSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final HttpClient HTTP = HttpClient.newHttpClient();

    private static EnvoyEmulator.Request chat(String model, String... headers) {
        Map<String, String> h = new LinkedHashMap<>();
        h.put("content-type", "application/json");
        for (int i = 0; i < headers.length; i += 2) {
            h.put(headers[i], headers[i + 1]);
        }
        return EnvoyEmulator.Request.post("/v1/chat/completions", h, ("{\"model\":\"" + model
            + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}").getBytes(StandardCharsets.UTF_8));
    }

    private static String gatewayYaml(String rule) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            epp_listen: 127.0.0.1:0
            api_keys: [epp-key]
            health: {interval_ms: 60000}
            rules:
            """ + rule;
    }

    private static String metrics(Gateway g) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.adminPort() + "/metrics"))
            .header("authorization", "Bearer epp-key").build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    /** The value of the sample {@code series} (name and labels as printed) in a text exposition. */
    private static double value(String exposition, String series) {
        return exposition.lines().filter(l -> l.startsWith(series + " ")).mapToDouble(l -> Double.parseDouble(l.substring(series.length() + 1)))
            .findFirst().orElseThrow(() -> new AssertionError(series + " not in " + exposition.lines()
                .filter(l -> l.startsWith(series.substring(0, series.indexOf('{')))).toList()));
    }

    @Test
    void refusalsAreImmediateResponsesWithTheOpenAiErrorObject() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(gatewayYaml("""
                 - name: chat
                   models: [m]
                   endpoints:
                     - url: %s
                 """.formatted(a.baseUrl()))));
             EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
            EnvoyEmulator.Outcome noKey = envoy.exchange(chat("m"), EppCheck.scripted(false), null);
            assertEquals(401, noKey.immediateStatus, noKey.immediateBody);
            assertTrue(noKey.immediateBody.contains("\"type\":\"authentication_error\""), noKey.immediateBody);
            assertEquals("Bearer", noKey.immediateHeaders.get("www-authenticate"));
            assertEquals("application/json", noKey.immediateHeaders.get("content-type"));
            assertNull(noKey.destinationHeader);
            assertTrue(noKey.streamCompleted && noKey.violations.isEmpty(), noKey.violations.toString());

            EnvoyEmulator.Outcome unknown = envoy.exchange(chat("nope", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertEquals(404, unknown.immediateStatus);
            assertEquals("{\"error\":{\"message\":\"The model `nope` does not exist.\",\"type\":\"invalid_request_error\","
                + "\"param\":\"model\",\"code\":\"model_not_found\"}}", unknown.immediateBody);

            EnvoyEmulator.Outcome models = envoy.exchange(new EnvoyEmulator.Request("GET", "/v1/models",
                Map.of("authorization", "Bearer epp-key"), new byte[0], 1, false, null), EppCheck.scripted(false), null);
            assertEquals(404, models.immediateStatus, "the picker routes generation requests only: " + models.immediateBody);

            EndpointState ep = g.routeTable().ruleByName("chat").endpoints().get(0);
            assertTrue(g.router().drain(ep, true));
            EnvoyEmulator.Outcome none = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertEquals(503, none.immediateStatus, none.immediateBody);
            assertTrue(none.immediateBody.contains("\"type\":\"server_error\"") && none.immediateBody.contains("no_endpoint"),
                none.immediateBody);
            assertTrue(g.router().drain(ep, false));

            var health = HealthGrpc.newBlockingStub(envoy.channel()).withDeadlineAfter(20, TimeUnit.SECONDS);
            assertEquals(ServingStatus.SERVING, health.check(HealthCheckRequest.newBuilder()
                .setService(EppProtocol.HEALTH_EXT_PROC).build()).getStatus());
            g.drain(true);
            EnvoyEmulator.Outcome draining = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertEquals(503, draining.immediateStatus, draining.immediateBody);
            assertNotNull(draining.immediateHeaders.get("retry-after"));
            for (String s : List.of(EppProtocol.HEALTH_READINESS, EppProtocol.HEALTH_EXT_PROC)) {
                assertEquals(ServingStatus.NOT_SERVING, health.check(HealthCheckRequest.newBuilder().setService(s).build())
                    .getStatus(), s + " follows the gateway's readiness");
            }
            assertEquals(ServingStatus.SERVING, health.check(HealthCheckRequest.newBuilder()
                .setService(EppProtocol.HEALTH_LIVENESS).build()).getStatus());
            String m = metrics(g);
            assertEquals(1.0, value(m, "kvgate_bad_requests_total{reason=\"unauthorized\"}"), "refusals are counted as the front door's");
            assertEquals(1.0, value(m, "kvgate_shed_total{reason=\"no_endpoint\"}"));
        }
    }

    @Test
    void admissionShedsWith429AndRetryAfterWhileThePickIsInFlight() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(gatewayYaml("""
                 - name: chat
                   models: [m]
                   admission: {max_outstanding: 1, max_queue: 0}
                   endpoints:
                     - url: %s
                 """.formatted(a.baseUrl()))));
             EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
            CountDownLatch forwarded = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            EnvoyEmulator.Upstream held = (endpoint, req, body, added) -> {
                forwarded.countDown();
                assertTrue(release.await(30, TimeUnit.SECONDS));
                return EppCheck.scripted(false).forward(endpoint, req, body, added);
            };
            CompletableFuture<EnvoyEmulator.Outcome> first = CompletableFuture.supplyAsync(() -> {
                try {
                    return envoy.exchange(chat("m", "authorization", "Bearer epp-key"), held, null);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            assertTrue(forwarded.await(30, TimeUnit.SECONDS), "the first request was picked");
            EnvoyEmulator.Outcome shed = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertEquals(429, shed.immediateStatus, shed.immediateBody);
            assertTrue(shed.immediateBody.contains("\"type\":\"rate_limit_error\""), shed.immediateBody);
            assertNotNull(shed.immediateHeaders.get("retry-after"));
            release.countDown();
            EnvoyEmulator.Outcome done = first.get(30, TimeUnit.SECONDS);
            assertTrue(done.violations.isEmpty() && done.streamCompleted, done.violations.toString());
            EndpointState ep = g.routeTable().ruleByName("chat").endpoints().get(0);
            Await.until(WAIT, "the finished pick hands its load back", () -> ep.outstanding() == 0, () -> "outstanding " + ep.outstanding());
            EnvoyEmulator.Outcome again = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertNull(again.immediateStatus, "admitted again once the first ended: " + again.immediateBody);
        }
    }

    /** {@link #gatewayYaml} of one rule over {@code engine}, with {@code extra} (top-level keys) before the rules. */
    private static String withTenants(String extra, EngineSimulator engine) {
        return gatewayYaml("""
            - name: chat
              models: [m]
              endpoints:
                - url: %s
            """.formatted(engine.baseUrl())).replace("rules:\n", extra + "rules:\n");
    }

    @Test
    void theTenantsLimitsHoldThroughThePickerAndEachPickIsSettled() throws Exception {
        String acme = """
            tenants:
              - name: acme
                api_key_sha256: [%s]
                limits: {max_concurrent: 1, requests_per_minute: 3}
            """.formatted(io.kvgate.control.config.TenancyConfig.sha256Hex("acme-key"));
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(withTenants(acme, a)));
             EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
            for (int i = 1; i <= 3; i++) {
                // max_concurrent 1: each pick's slot must be given back when its response ends, or the next is a 429.
                EnvoyEmulator.Outcome o = envoy.exchange(chat("m", "authorization", "Bearer acme-key"), EppCheck.scripted(false), null);
                assertNull(o.immediateStatus, "request " + i + ": " + o.immediateBody);
                assertNotNull(o.destinationHeader, "request " + i);
            }
            EnvoyEmulator.Outcome fourth = envoy.exchange(chat("m", "authorization", "Bearer acme-key"), EppCheck.scripted(false), null);
            assertEquals(429, fourth.immediateStatus, fourth.immediateBody);
            assertTrue(fourth.immediateBody.contains("\"code\":\"rate_limit_exceeded\"")
                && fourth.immediateBody.contains("requests_per_minute"), fourth.immediateBody);
            assertNotNull(fourth.immediateHeaders.get("retry-after"));
        }
    }

    @Test
    void thePickerReservesInTheConfiguredSharedStore() throws Exception {
        try (io.kvgate.testkit.RefusedPort down = io.kvgate.testkit.TestPorts.refused()) {
            String acme = """
                rate_limit_store: {url: "redis://127.0.0.1:%d", on_failure: deny, timeout_ms: 50}
                tenants:
                  - name: acme
                    api_key_sha256: [%s]
                    limits: {requests_per_minute: 100}
                """.formatted(down.port(), io.kvgate.control.config.TenancyConfig.sha256Hex("acme-key"));
            try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast());
                 Gateway g = Gateway.start(GatewayConfig.parse(withTenants(acme, a)));
                 EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
                // The store cannot be reached and on_failure is deny: a picker that held the request in this replica's
                // memory would route it; through the store it is refused as the front door refuses it.
                EnvoyEmulator.Outcome o = envoy.exchange(chat("m", "authorization", "Bearer acme-key"), EppCheck.scripted(false), null);
                assertEquals(503, o.immediateStatus, o.immediateBody);
                assertTrue(o.immediateBody.contains("rate_limit_store_unavailable"), o.immediateBody);
                assertNull(o.destinationHeader);
                assertTrue(value(metrics(g), "kvgate_rate_limit_store_failures_total{cause=\"error\",decision=\"deny\"}") >= 1);
            }
        }
    }

    @Test
    void aServedReportOfAnotherEndpointBlamesThePickAndUsageIsCounted() throws Exception {
        try (EngineSimulator a = EngineSimulator.start(EppCheckSystemTest.fast()); EngineSimulator b = EngineSimulator.start(EppCheckSystemTest.fast());
             Gateway g = Gateway.start(GatewayConfig.parse(gatewayYaml("""
                 - name: chat
                   models: [m]
                   policy: round_robin
                   endpoints:
                     - url: %s
                     - url: %s
                 """.formatted(a.baseUrl(), b.baseUrl()))));
             EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
            EnvoyEmulator.Outcome o = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false),
                "192.0.2.1:9");
            assertTrue(o.violations.isEmpty(), o.violations.toString());
            String[] listed = o.destinationHeader.split(",");
            assertEquals(2, listed.length, "the pick, then the other endpoint as Envoy's fallback: " + o.destinationHeader);
            EndpointState picked = g.routeTable().ruleByName("chat").endpoints().stream()
                .filter(e -> e.hostHeader().equals(o.endpoint())).findFirst().orElseThrow();
            Await.until(WAIT, "the routing stage applied the report", () -> picked.breaker().failures() == 1 && picked.outstanding() == 0,
                () -> "failures " + picked.breaker().failures() + ", outstanding " + picked.outstanding());
            String m = metrics(g);
            assertTrue(m.contains("cause=\"epp_served_elsewhere\""), "counted as the pick's upstream error");
            assertTrue(m.lines().anyMatch(l -> l.startsWith("kvgate_tokens_total") && l.contains("prompt") && l.endsWith(" 12.0")),
                "the usage of the streamed answer: " + m.lines().filter(l -> l.startsWith("kvgate_tokens_total")).toList());
        }
    }

    @Test
    void aPdPickIsTheDecodePodWithItsPrefillPodNamed() throws Exception {
        try (EngineSimulator p = EngineSimulator.start(EppCheckSystemTest.fast().role(SimulatorConfig.Role.PREFILL));
             EngineSimulator d = EngineSimulator.start(EppCheckSystemTest.fast().role(SimulatorConfig.Role.DECODE));
             Gateway g = Gateway.start(GatewayConfig.parse(gatewayYaml("""
                 - name: pd
                   models: [m]
                   engine: vllm
                   policy: pd
                   endpoints:
                     - url: %s
                       role: prefill
                     - url: %s
                       role: decode
                 """.formatted(p.baseUrl(), d.baseUrl()))));
             EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 20_000)) {
            EnvoyEmulator.Outcome o = envoy.exchange(chat("m", "authorization", "Bearer epp-key"), EppCheck.scripted(false), null);
            assertTrue(o.violations.isEmpty(), o.violations.toString());
            assertEquals("127.0.0.1:" + d.port(), o.endpoint(), "Envoy sends the request to the decode pod");
            assertEquals("127.0.0.1:" + p.port(), o.prefiller, "its sidecar prefills on the prefill pod");
            var rule = g.routeTable().ruleByName("pd");
            Await.until(WAIT, "both pods' load handed back", () -> rule.endpoints().get(0).outstanding() == 0
                && rule.prefillEndpoints().get(0).outstanding() == 0, () -> "decode " + rule.endpoints().get(0).outstanding()
                + ", prefill " + rule.prefillEndpoints().get(0).outstanding());
        }
    }
}
