package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code rules[].models[].adapters}: LoRA adapters served on a base model (issue #13 item 4). */
class LoraAdaptersConfigTest {
    private static String config(String engine, String models) {
        return "rules:\n  - name: r\n    engine: " + engine + "\n    models: " + models
            + "\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void adaptersSelectTheirBaseRuleAndNameTheLora() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("vllm", "[{name: qwen3, adapters: [sql-lora, chat-lora]}, other]"))
            .rules().get(0);
        assertEquals(List.of("qwen3", "other"), r.models(), "adapters are not base models");
        assertEquals(List.of("sql-lora", "chat-lora"), r.adapterNames());
        assertEquals("sql-lora", r.loraFor("sql-lora"));
        assertNull(r.loraFor("qwen3"));
        assertNull(r.loraFor("unknown"));
    }

    @Test
    void readBackKeepsAdaptersAndRoundTrips() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config("vllm", "[{name: qwen3, adapters: [sql-lora]}]"));
        @SuppressWarnings("unchecked")
        Map<String, Object> rule = ((List<Map<String, Object>>) ConfigTree.toTree(c, false).get("rules")).get(0);
        assertEquals(List.of(Map.of("name", "qwen3", "adapters", List.of("sql-lora"))), rule.get("models"));
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))));
    }

    @Test
    void badAdapterListsAreProblemsNamingEntryAndValue() {
        String p = problems(config("vllm", "[{name: qwen3, adapters: [qwen3, a, a]}]"));
        assertTrue(p.contains("rules[0] (name=r).models[0] (name=qwen3).adapters: value 'qwen3' is the base model's own name"), p);
        assertTrue(p.contains("rules[0] (name=r).models[0] (name=qwen3).adapters: value 'a' is listed twice"), p);
    }

    @Test
    void anAdapterNameIsAClientNameUniqueAcrossRules() {
        String yaml = "rules:\n  - name: r\n    models: [{name: qwen3, adapters: [sql-lora]}]\n"
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n"
            + "  - name: s\n    models: [sql-lora]\n    endpoints: [{url: \"http://127.0.0.1:9002\"}]\n";
        String p = problems(yaml);
        assertTrue(p.contains("model 'sql-lora' is already served by rule 'r'"), p);
    }

    @Test
    void sglangServesAdaptersButRefusesColonNames() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("sglang", "[{name: qwen3, adapters: [sql-lora]}]")).rules().get(0);
        assertEquals("sql-lora", r.loraFor("sql-lora"), "SGLang rules serve adapters (sent with lora_path)");
        String p = problems(config("sglang", "[\"qwen3:sql\"]"));
        assertTrue(p.contains("rules[0] (name=r).models: value 'qwen3:sql' contains ':', which SGLang reads as 'base:adapter'"
            + " (it would run the LoRA adapter 'sql')"), p);
        p = problems(config("sglang", "[{name: qwen3, adapters: [\"team:sql\"]}]"));
        assertTrue(p.contains("rules[0] (name=r).models: value 'qwen3' lists adapter 'team:sql' with ':', which SGLang"
            + " reads as 'base:adapter' before the lora_path the gateway sends (it would run adapter 'sql')"), p);
    }

    @Test
    void trtllmAndLlamacppRefuseAdapters() {
        for (String engine : List.of("trtllm", "llamacpp")) {
            String p = problems(config(engine, "[{name: qwen3, adapters: [sql-lora]}]"));
            assertTrue(p.contains(".models: value 'qwen3' lists adapters [sql-lora], which are not supported on engine '"
                + engine + "'"), p);
        }
    }

    @Test
    void vllmAcceptsColonNames() throws Exception {
        assertEquals(List.of("org/qwen3:v2"), GatewayConfig.parse(config("vllm", "[\"org/qwen3:v2\"]")).rules().get(0).models());
    }
}
