package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The {@code shutdown} section: its default, 0 allowed, and refusals that name the key, the value and the rule. */
class ShutdownConfigTest {
    private static final String RULES = """
        rules:
          - name: chat
            models: [m]
            endpoints:
              - url: http://127.0.0.1:9001
        """;

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    @Test
    void defaultsToFiveSecondsAndZeroIsAllowed() throws Exception {
        assertEquals(5_000, GatewayConfig.parse(RULES).shutdown().drainDelayMs());
        assertEquals(0, GatewayConfig.parse("shutdown: {drain_delay_ms: 0}\n" + RULES).shutdown().drainDelayMs());
        assertEquals(12_000, GatewayConfig.parse("shutdown: {drain_delay_ms: 12000}\n" + RULES).shutdown().drainDelayMs());
    }

    @Test
    void refusalsNameTheFieldTheValueAndTheRule() {
        assertEquals("shutdown.drain_delay_ms: value -1 must be in [0, 600000]",
            problems("shutdown: {drain_delay_ms: -1}\n" + RULES));
        assertEquals("shutdown.drain_delay_ms: value 600001 must be in [0, 600000]",
            problems("shutdown: {drain_delay_ms: 600001}\n" + RULES));
        assertEquals("shutdown.drain_delay_ms: value '5s' must be an integer",
            problems("shutdown: {drain_delay_ms: 5s}\n" + RULES));
        assertEquals("shutdown.drain_delay: unknown key (check the spelling; see docs/configuration.md)",
            problems("shutdown: {drain_delay: 5000}\n" + RULES));
        assertEquals("shutdown: value 5000 must be a mapping", problems("shutdown: 5000\n" + RULES));
    }
}
