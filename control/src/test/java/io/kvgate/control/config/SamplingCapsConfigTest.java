package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code rules[].speculative} and {@code rules[].max_logit_bias} (issue #13, review rows 13 and 14). */
class SamplingCapsConfigTest {
    private static String config(String extra) {
        return "rules:\n  - name: r\n    models: [m]\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n" + extra;
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void defaultsAreNotSpeculativeAndOpenAisCap() throws Exception {
        RuleConfig r = GatewayConfig.parse(config("")).rules().get(0);
        assertFalse(r.speculative());
        assertEquals(300, r.maxLogitBias());
        assertEquals(RuleConfig.DEFAULT_MAX_LOGIT_BIAS, r.maxLogitBias());
    }

    @Test
    void bothAreSetReadBackAndParsedAgain() throws Exception {
        GatewayConfig c = GatewayConfig.parse(config("    speculative: true\n    max_logit_bias: 0\n"));
        assertTrue(c.rules().get(0).speculative());
        assertEquals(0, c.rules().get(0).maxLogitBias());
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))), "read back and parsed again");
        assertTrue(ConfigTree.RULE_TUNABLES.contains("speculative"));
        assertTrue(ConfigTree.RULE_TUNABLES.contains("max_logit_bias"));
    }

    @Test
    void badValuesNameTheKeyTheValueAndTheRule() {
        String neg = problems(config("    max_logit_bias: -1\n"));
        assertTrue(neg.contains("rules[0] (name=r).max_logit_bias") && neg.contains("-1"), neg);
        String big = problems(config("    max_logit_bias: 2000000\n"));
        assertTrue(big.contains("rules[0] (name=r).max_logit_bias") && big.contains("2000000"), big);
        String spec = problems(config("    speculative: maybe\n"));
        assertTrue(spec.contains("rules[0] (name=r).speculative") && spec.contains("maybe"), spec);
    }
}
