package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code rules[].hedge} (issue #41 item 3): off by default, on with {@code after_ms}, bad values named. */
class HedgeConfigTest {
    private static String config(String hedge) {
        return "rules:\n  - name: r\n    models: [m]\n    engine: vllm\n" + hedge
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}, {url: \"http://127.0.0.1:9002\"}]\n";
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void offByDefaultOnWithAfterMs() throws Exception {
        RuleConfig.HedgeConfig off = GatewayConfig.parse(config("")).rules().get(0).hedge();
        assertFalse(off.enabled());
        assertEquals(RuleConfig.HedgeConfig.OFF, off);
        GatewayConfig c = GatewayConfig.parse(config("    hedge: {after_ms: 150}\n"));
        RuleConfig.HedgeConfig h = c.rules().get(0).hedge();
        assertTrue(h.enabled());
        assertEquals(150, h.afterMs());
        assertEquals(0.1, h.maxExtraRatio());
        assertEquals(60_000, h.windowMs());
        GatewayConfig all = GatewayConfig.parse(config("    hedge: {after_ms: 80, max_extra_ratio: 0.25, window_ms: 5000}\n"));
        assertEquals(new RuleConfig.HedgeConfig(80, 0.25, 5000), all.rules().get(0).hedge());
        assertEquals(all, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(all, true))), "read back");
        assertEquals(0.0, h.ttftFactor(), "ttft_factor off by default: a fixed wait");
        assertEquals(150_000_000L, h.waitNs(400_000_000L));
        GatewayConfig k = GatewayConfig.parse(config("    hedge: {after_ms: 100, ttft_factor: 3}\n"));
        RuleConfig.HedgeConfig f = k.rules().get(0).hedge();
        assertEquals(3.0, f.ttftFactor());
        assertEquals(100_000_000L, f.waitNs(-1), "no estimate yet: after_ms");
        assertEquals(100_000_000L, f.waitNs(20_000_000L), "after_ms is the floor");
        assertEquals(150_000_000L, f.waitNs(50_000_000L), "3 x 50 ms");
        assertEquals(k, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(k, true))), "read back");
    }

    @Test
    void badValuesNameTheRuleKey() {
        String after = problems(config("    hedge: {after_ms: 0}\n"));
        assertTrue(after.contains("rules[0] (name=r).hedge.after_ms: value 0 must be in [1, 600000]"), after);
        String ratio = problems(config("    hedge: {after_ms: 100, max_extra_ratio: 1.5}\n"));
        assertTrue(ratio.contains("rules[0] (name=r).hedge.max_extra_ratio: value 1.5 must be in"), ratio);
        String window = problems(config("    hedge: {after_ms: 100, window_ms: 10}\n"));
        assertTrue(window.contains("rules[0] (name=r).hedge.window_ms: value 10 must be in [1000, 3600000]"), window);
        String noAfter = problems(config("    hedge: {max_extra_ratio: 0.2}\n"));
        assertTrue(noAfter.contains("rules[0] (name=r).hedge.after_ms: hedge settings without after_ms do nothing"), noAfter);
        String factor = problems(config("    hedge: {after_ms: 100, ttft_factor: 0.5}\n"));
        assertTrue(factor.contains("rules[0] (name=r).hedge.ttft_factor: value 0.5 must be in [1.0, 100.0]"), factor);
        String factorAlone = problems(config("    hedge: {ttft_factor: 2}\n"));
        assertTrue(factorAlone.contains("rules[0] (name=r).hedge.after_ms: hedge.ttft_factor needs after_ms"), factorAlone);
        String unknown = problems(config("    hedge: {after_ms: 100, ttft: 3}\n"));
        assertTrue(unknown.contains("rules[0] (name=r).hedge.ttft: unknown key"), unknown);
    }
}
