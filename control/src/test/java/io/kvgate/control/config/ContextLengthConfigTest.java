package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code rules[].max_model_len} and {@code rules[].on_context_overflow} (issue #13 item 1). */
class ContextLengthConfigTest {
    private static String config(String keys) {
        return "rules:\n  - name: r\n    models: [m]\n    engine: sglang\n" + keys
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void defaultsAreDiscoveredAndReject() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("")).rules().get(0);
        assertEquals(0, r.maxModelLen(), "0: discovered from the endpoints");
        assertEquals("reject", r.onContextOverflow());
        assertFalse(r.clampsContextOverflow());
        @SuppressWarnings("unchecked")
        Map<String, Object> tree = (Map<String, Object>) ((List<?>) ConfigTree.toTree(GatewayConfig.parse(config("")), false)
            .get("rules")).get(0);
        assertFalse(tree.containsKey("max_model_len"), "an unset context length is not written as a value");
        assertEquals("reject", tree.get("on_context_overflow"));
    }

    @Test
    void configuredValuesParseAndReadBack() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config("    max_model_len: 4096\n    on_context_overflow: clamp\n"));
        RuleConfig r = c.rules().get(0);
        assertEquals(4096, r.maxModelLen());
        assertEquals("clamp", r.onContextOverflow());
        assertTrue(r.clampsContextOverflow());
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))), "read back");
    }

    @Test
    void badValuesNameTheKeyTheValueAndTheRule() {
        String zero = problems(config("    max_model_len: 0\n"));
        assertTrue(zero.contains("rules[0] (name=r).max_model_len: value 0 must be in [1, 16777216]"), zero);
        String negative = problems(config("    max_model_len: -8\n"));
        assertTrue(negative.contains("rules[0] (name=r).max_model_len: value -8 must be in [1, 16777216]"), negative);
        String text = problems(config("    max_model_len: 8k\n"));
        assertTrue(text.contains("rules[0] (name=r).max_model_len: value '8k' must be an integer"), text);
        String fraction = problems(config("    max_model_len: 4096.5\n"));
        assertTrue(fraction.contains("rules[0] (name=r).max_model_len: value 4096.5 must be an integer"), fraction);
        String policy = problems(config("    on_context_overflow: foo\n"));
        assertTrue(policy.contains("rules[0] (name=r).on_context_overflow: value 'foo' must be one of reject|clamp"), policy);
    }

    @Test
    void bothKeysArePatchableAndANullContextLengthReturnsToDiscovery() throws Exception {
        assertTrue(ConfigTree.RULE_TUNABLES.containsAll(List.of("max_model_len", "on_context_overflow")));
        GatewayConfig cur = GatewayConfig.parse(config(""));
        GatewayConfig next = GatewayConfig.parse(ConfigTree.patchRule(cur, "r",
            Map.of("max_model_len", 2048, "on_context_overflow", "clamp")));
        assertEquals(2048, next.rules().get(0).maxModelLen());
        assertEquals("clamp", next.rules().get(0).onContextOverflow());
        assertEquals(List.of("rules[name=r].on_context_overflow: reject -> clamp", "rules[name=r].max_model_len: (absent) -> 2048"),
            ConfigTree.diff(cur, next));
        Map<String, Object> unset = new HashMap<>();
        unset.put("max_model_len", null);
        assertEquals(0, GatewayConfig.parse(ConfigTree.patchRule(next, "r", unset)).rules().get(0).maxModelLen());
        String refused = assertThrows(ConfigException.class, () -> GatewayConfig.parse(ConfigTree.patchRule(cur, "r",
            Map.of("max_model_len", 0)))).getMessage();
        assertTrue(refused.contains("max_model_len: value 0 must be in [1, 16777216]"), refused);
        String refusedPolicy = assertThrows(ConfigException.class, () -> GatewayConfig.parse(ConfigTree.patchRule(cur, "r",
            Map.of("on_context_overflow", "truncate")))).getMessage();
        assertTrue(refusedPolicy.contains("on_context_overflow: value 'truncate' must be one of reject|clamp"), refusedPolicy);
    }
}
