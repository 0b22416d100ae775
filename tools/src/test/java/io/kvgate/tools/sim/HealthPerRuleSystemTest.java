package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Per-rule {@code health.path} / {@code health.timeout_ms} (issue #13 item 7, review row 29): SGLang's {@code /health}
 * answers 200 while the scheduler is wedged, so only a rule probing {@code /health_generate} (the deep probe, which a
 * wedged engine never answers) takes the endpoint out. Both rules run over SGLang simulators with the same fault.
 */
@Tag("system")
@Timeout(60)
class HealthPerRuleSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(20);

    @Test
    void aWedgedSglangEngineIsTakenOutOnlyByTheRuleProbingHealthGenerate() throws Exception {
        try (EngineSimulator shallow = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model("a").healthTimeoutMs(60_000));
             EngineSimulator deep = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model("b").healthTimeoutMs(60_000))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 50, timeout_ms: 1000, healthy_threshold: 1, unhealthy_threshold: 1}
                rules:
                  - name: shallow
                    models: [a]
                    engine: sglang
                    endpoints: [{url: "%s"}]
                  - name: deep
                    models: [b]
                    engine: sglang
                    health: {path: /health_generate, timeout_ms: 200}
                    endpoints: [{url: "%s"}]
                """.formatted(shallow.baseUrl(), deep.baseUrl())));
            try {
                EndpointState s = gw.routeTable().ruleByName("shallow").endpoints().get(0);
                EndpointState d = gw.routeTable().ruleByName("deep").endpoints().get(0);
                Await.until(WAIT, "the deep rule probes /health_generate", () -> deep.stats().get("health_generate_requests") >= 2);
                assertTrue(s.probeHealthy() && d.probeHealthy(), "both answer while the engines are well");
                assertEquals(0, shallow.stats().get("health_generate_requests"), "the other rule keeps the global /health");

                shallow.injectFaults("{\"unhealthy\":true}");
                deep.injectFaults("{\"unhealthy\":true}");
                Await.until(WAIT, "the wedged engine fails /health_generate within timeout_ms", () -> !d.probeHealthy());
                long shallowProbes = shallow.stats().get("health_requests");
                Await.until(WAIT, "three more /health probes", () -> shallow.stats().get("health_requests") >= shallowProbes + 3);
                assertTrue(s.probeHealthy(), "SGLang's /health still answers 200 for the same fault (shallow probe)");
                assertFalse(d.probeHealthy());

                deep.injectFaults("{\"unhealthy\":false}");
                Await.until(WAIT, "the deep probe brings the endpoint back once the engine generates again", d::probeHealthy);
            } finally {
                gw.close(100);
            }
        }
    }
}
