package io.kvgate.dataplane.upstream;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.EngineProfiles;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * Where an endpoint is probed: the rule's {@code health.path}, else the global {@code health.path}, else its engine
 * profile's health route (the engines' own routes, checked against their servers' sources and docs: vLLM, SGLang,
 * TensorRT-LLM's trtllm-serve and llama-server all serve {@code GET /health}; SGLang's deep {@code /health_generate}
 * is an opt-in of the rule).
 */
class HealthPathTest {
    private static GatewayConfig.Health global(String path) {
        return new GatewayConfig.Health(path, 2_000, 1_000, 2, 3, 5, 5_000, 1);
    }

    @Test
    void eachEngineProfileStatesItsOwnHealthRoute() {
        Map<String, String> byEngine = new TreeMap<>();
        for (EngineProfile p : EngineProfiles.ALL) {
            byEngine.put(p.name(), p.healthPath());
        }
        assertEquals(Map.of("llamacpp", "/health", "sglang", "/health", "trtllm", "/health", "vllm", "/health"), byEngine);
    }

    @Test
    void withNothingConfiguredTheProfileNamesThePath() {
        for (EngineProfile p : EngineProfiles.ALL) {
            assertEquals(p.healthPath(), HealthChecker.probePath(RuleConfig.HealthOverride.NONE, global(null), p), p.name());
        }
    }

    @Test
    void theGlobalKeyOverridesTheProfileAndTheRuleOverridesBoth() {
        EngineProfile sglang = EngineProfiles.of(RuleConfig.Engine.SGLANG);
        assertEquals("/ping", HealthChecker.probePath(RuleConfig.HealthOverride.NONE, global("/ping"), sglang));
        RuleConfig.HealthOverride deep = new RuleConfig.HealthOverride("/health_generate", 0);
        assertEquals("/health_generate", HealthChecker.probePath(deep, global("/ping"), sglang));
        assertEquals("/health_generate", HealthChecker.probePath(deep, global(null), sglang));
    }

    @Test
    void anUnsetGlobalPathParsesAsUnsetAndAWrongOneIsStillRefused() throws Exception {
        String rules = "rules:\n  - name: r\n    models: [m]\n    engine: sglang\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
        assertEquals(null, GatewayConfig.parse(rules).health().path());
        assertEquals("/ping", GatewayConfig.parse("health: {path: /ping}\n" + rules).health().path());
        Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class,
            () -> GatewayConfig.parse("health: {path: ping}\n" + rules));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("health.path: value 'ping' must start with '/'"),
            e.getMessage());
    }
}
