package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Per-rule {@code health.path} / {@code health.timeout_ms} (issue #13 item 7). */
class RuleHealthConfigTest {
    private static String config(String health) {
        return "health: {path: /health, timeout_ms: 1000}\nrules:\n  - name: r\n    models: [m]\n    engine: sglang\n"
            + health + "    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void aRuleOverridesPathAndTimeoutElseTheGlobalOnesApply() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config("    health: {path: /health_generate, timeout_ms: 5000}\n"));
        RuleConfig.HealthOverride h = c.rules().get(0).health();
        assertEquals("/health_generate", h.pathOr(c.health().path()));
        assertEquals(5000, h.timeoutMsOr(c.health().timeoutMs()));
        GatewayConfig plain = GatewayConfig.parse(config(""));
        assertEquals("/health", plain.rules().get(0).health().pathOr(plain.health().path()));
        assertEquals(1000, plain.rules().get(0).health().timeoutMsOr(plain.health().timeoutMs()));
        GatewayConfig pathOnly = GatewayConfig.parse(config("    health: {path: /health_generate}\n"));
        assertEquals(1000, pathOnly.rules().get(0).health().timeoutMsOr(1000), "timeout stays global");
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))), "read back");
        assertEquals(plain, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(plain, true))));
    }

    @Test
    void badValuesNameTheRuleKey() {
        String path = problems(config("    health: {path: health_generate}\n"));
        assertTrue(path.contains("rules[0] (name=r).health.path: value 'health_generate' must start with '/'"), path);
        String timeout = problems(config("    health: {timeout_ms: 0}\n"));
        assertTrue(timeout.contains("rules[0] (name=r).health.timeout_ms: value 0 must be in [1, 600000]"), timeout);
        String unknown = problems(config("    health: {interval_ms: 5}\n"));
        assertTrue(unknown.contains("rules[0] (name=r).health.interval_ms: unknown key"), unknown);
    }
}
