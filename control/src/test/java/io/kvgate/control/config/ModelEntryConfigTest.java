package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code rules[].models}: plain names and {@code {name, served_as}} entries (issue #13 item 4). */
class ModelEntryConfigTest {
    private static String config(String models) {
        return "rules:\n  - name: r\n    models: " + models + "\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void plainNamesAndMappingEntriesMix() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("[qwen3, {name: b, served_as: b}, {name: same}]")).rules().get(0);
        assertEquals(List.of("qwen3", "b", "same"), r.models(), "clients' names, in order");
        assertEquals("qwen3", r.entryFor("qwen3").engineName());
        assertFalse(r.entryFor("qwen3").renamed());
        assertEquals("b", r.entryFor("b").engineName());
        assertEquals("same", r.entryFor("same").engineName());
        assertNull(r.entryFor("other"));
        assertFalse(r.renamesModels(), "served_as equal to the name renames nothing");
        ModelEntry renamed = new ModelEntry("gpt-4o-mini", "qwen3");
        assertTrue(renamed.renamed());
        assertEquals("qwen3", renamed.engineName());
    }

    @Test
    void aliasesMapClientNamesToTheEnginesNameAndMayShareIt() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("[qwen3, {name: gpt-4o-mini, served_as: qwen3}, {name: gpt-4o, served_as: qwen3}]"))
            .rules().get(0);
        assertEquals(List.of("qwen3", "gpt-4o-mini", "gpt-4o"), r.models(), "clients' names: what /v1/models lists");
        assertEquals("qwen3", r.entryFor("gpt-4o-mini").engineName());
        assertEquals("qwen3", r.entryFor("gpt-4o").engineName());
        assertTrue(r.entryFor("gpt-4o-mini").renamed());
        assertTrue(r.renamesModels());
    }

    @Test
    void sglangSeesTheServedNameSoOnlyThatOneMustBeFreeOfColons() throws Exception {
        String sglang = "rules:\n  - name: r\n    engine: sglang\n    models: %s\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n";
        RuleConfig r = GatewayConfig.parse(sglang.formatted("[{name: \"org/llama3:v2\", served_as: llama3}]")).rules().get(0);
        assertEquals("llama3", r.entryFor("org/llama3:v2").engineName(), "a client name with ':' is fine when mapped");
        String p = problems(sglang.formatted("[{name: llama3, served_as: \"base:lora\"}]"));
        assertTrue(p.contains("rules[0] (name=r).models: value 'base:lora' contains ':', which SGLang reads as 'base:adapter'"), p);
        String plain = problems(sglang.formatted("[\"llama3:v2\"]"));
        assertTrue(plain.contains("value 'llama3:v2' contains ':'") && plain.contains("served_as: <name without ':'>"), plain);
    }

    @Test
    void greedyNIsReplicateByDefaultAndRejectOnRequest() throws Exception {
        assertEquals(RuleConfig.GreedyN.REPLICATE, GatewayConfig.parse(config("[m]")).rules().get(0).greedyN());
        GatewayConfig c = GatewayConfig.parse(config("[m]") + "    greedy_n: reject\n");
        assertEquals(RuleConfig.GreedyN.REJECT, c.rules().get(0).greedyN());
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))), "read back and parsed again");
        String p = problems(config("[m]") + "    greedy_n: clamp\n");
        assertTrue(p.contains("rules[0] (name=r).greedy_n: value 'clamp' must be one of replicate|reject"), p);
    }

    @Test
    void aSingleStringIsOneModel() throws Exception {
        assertEquals(List.of("m"), GatewayConfig.parse(config("m")).rules().get(0).models());
    }

    @Test
    void readBackWritesPlainNamesAsStrings() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config("[a, {name: b, served_as: b}]"));
        @SuppressWarnings("unchecked")
        Map<String, Object> rule = ((List<Map<String, Object>>) ConfigTree.toTree(c, false).get("rules")).get(0);
        assertEquals(List.of("a", Map.of("name", "b", "served_as", "b")), rule.get("models"));
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))));
    }

    @Test
    void badEntriesAreProblemsNamingTheEntry() {
        String nameless = problems(config("[{served_as: x}]"));
        assertTrue(nameless.contains("rules[0] (name=r).models[0].name: is required"), nameless);
        String empty = problems(config("[{name: a, served_as: \"\"}]"));
        assertTrue(empty.contains("rules[0] (name=r).models[0] (name=a).served_as: value '' must be a non-empty string"), empty);
        String unknown = problems(config("[{name: a, servedas: x}]"));
        assertTrue(unknown.contains("rules[0] (name=r).models[0] (name=a).servedas: unknown key"), unknown);
        String number = problems(config("[a, 7]"));
        assertTrue(number.contains("rules[0] (name=r).models[1]: value 7 must be a non-empty string or a mapping"), number);
        String none = problems(config("[]"));
        assertTrue(none.contains("rules[0] (name=r).models: must list at least one model name"), none);
    }

    @Test
    void aClientNameBelongsToOneRuleWhateverItIsServedAs() {
        String yaml = """
            rules:
              - name: r1
                models: [{name: gpt-4o-mini}]
                endpoints: [{url: "http://127.0.0.1:9001"}]
              - name: r2
                models: [gpt-4o-mini]
                endpoints: [{url: "http://127.0.0.1:9002"}]
            """;
        String p = problems(yaml);
        assertTrue(p.contains("rules (name=r2).models: model 'gpt-4o-mini' is already served by rule 'r1'"), p);
    }

}
