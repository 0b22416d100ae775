package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code rules[].tool_call_parser} (issue #13, review row 18). */
class ToolCallParserConfigTest {
    private static String config(String keys) {
        return "rules:\n  - name: r\n    models: [m]\n    engine: vllm\n" + keys
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    @Test
    void absentMeansNotDeclaredAndIsNotWrittenBack() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("")).rules().get(0);
        assertNull(r.toolCallParser());
        assertFalse(r.withoutToolCallParser());
        @SuppressWarnings("unchecked")
        Map<String, Object> tree = (Map<String, Object>) ((List<?>) ConfigTree.toTree(GatewayConfig.parse(config("")), false)
            .get("rules")).get(0);
        assertFalse(tree.containsKey("tool_call_parser"));
    }

    @Test
    void noneAndANameParseAndReadBack() throws Exception {
        GatewayConfig none = GatewayConfig.parse(config("    tool_call_parser: none\n"));
        assertTrue(none.rules().get(0).withoutToolCallParser());
        assertEquals(none, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(none, true))));
        GatewayConfig hermes = GatewayConfig.parse(config("    tool_call_parser: hermes\n"));
        assertEquals("hermes", hermes.rules().get(0).toolCallParser());
        assertFalse(hermes.rules().get(0).withoutToolCallParser());
        assertEquals(hermes, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(hermes, true))));
    }

    @Test
    void aBadNameNamesTheKeyTheValueAndTheRule() {
        String p = String.join("\n", assertThrows(ConfigException.class,
            () -> GatewayConfig.parse(config("    tool_call_parser: \"llama 3\"\n"))).problems());
        assertTrue(p.contains("rules[0] (name=r).tool_call_parser: value 'llama 3' must be the parser name the engines were"
            + " launched with (--tool-call-parser, e.g. hermes, llama3_json) or none (launched without one)"), p);
    }

    @Test
    void itIsALiveTunable() throws Exception {
        assertTrue(ConfigTree.RULE_TUNABLES.contains("tool_call_parser"));
        GatewayConfig cur = GatewayConfig.parse(config(""));
        GatewayConfig next = GatewayConfig.parse(ConfigTree.patchRule(cur, "r", Map.of("tool_call_parser", "none")));
        assertTrue(next.rules().get(0).withoutToolCallParser());
    }
}
