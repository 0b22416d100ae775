package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The lookup: one profile per configured engine kind, each answering to its configuration spelling. */
class EngineProfilesTest {
    @Test
    void everyConfiguredEngineHasExactlyOneProfileUnderItsConfigurationName() throws Exception {
        assertEquals(RuleConfig.Engine.values().length, EngineProfiles.ALL.size());
        List<String> names = new ArrayList<>();
        for (RuleConfig.Engine kind : RuleConfig.Engine.values()) {
            EngineProfile p = EngineProfiles.of(kind);
            assertSame(kind, p.kind());
            names.add(p.name());
            RuleConfig rule = GatewayConfig.parse("rules:\n  - name: r\n    models: [m]\n    engine: " + p.name()
                + "\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n").rules().get(0);
            assertSame(p, EngineProfiles.of(rule), "a rule with engine: " + p.name());
        }
        assertEquals(RuleConfig.ENGINES, names, "the configuration's vocabulary, in order");
    }

    @Test
    void noLoadFamilyBelongsToTwoEngines() {
        Set<String> seen = new HashSet<>();
        for (EngineProfile p : EngineProfiles.ALL) {
            LoadMetrics m = p.loadMetrics();
            if (m != null) {
                for (List<String> kind : List.of(m.running(), m.waiting(), m.usage())) {
                    assertTrue(!kind.isEmpty(), p.name());
                    for (String family : kind) {
                        assertTrue(seen.add(family), family + " twice");
                        // vLLM, SGLang, llama.cpp prefix "engine:"; TensorRT-LLM's collector "trtllm_"
                        assertTrue(family.startsWith(p.name() + ":") || family.startsWith(p.name() + "_"),
                            family + " is " + p.name() + "'s");
                    }
                }
            }
        }
    }

    @Test
    void aNullKindIsAnError() {
        assertThrows(IllegalArgumentException.class, () -> EngineProfiles.of((RuleConfig.Engine) null));
    }
}
