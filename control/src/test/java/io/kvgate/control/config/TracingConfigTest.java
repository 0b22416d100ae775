package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The {@code tracing} section: off by default, its settings, refusals naming field, value and rule, restart-only. */
class TracingConfigTest {
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
    void offByDefault() throws Exception {
        GatewayConfig c = GatewayConfig.parse(RULES);
        assertEquals(TracingConfig.OFF, c.tracing());
        assertFalse(c.tracing().enabled());
        assertEquals("kvgate", c.tracing().serviceName());
    }

    @Test
    void settings() throws Exception {
        GatewayConfig c = GatewayConfig.parse("tracing: {otlp_endpoint: 'https://otel.example:4318/v1/traces', "
            + "sample_ratio: 0.5, service_name: gw-a}\n" + RULES);
        assertEquals(new TracingConfig("https://otel.example:4318/v1/traces", 0.5, "gw-a"), c.tracing());
        assertTrue(c.tracing().enabled());
        // A ratio of 0 with an endpoint is off entirely (the "default 0: off").
        assertFalse(GatewayConfig.parse("tracing: {otlp_endpoint: 'http://127.0.0.1:4318/v1/traces'}\n" + RULES)
            .tracing().enabled());
        assertEquals(1.0, GatewayConfig.parse("tracing: {otlp_endpoint: 'http://h:1/v1/traces', sample_ratio: 1}\n"
            + RULES).tracing().sampleRatio());
    }

    @Test
    void refusalsNameFieldValueAndRule() {
        String p = problems("tracing: {otlp_endpoint: 'http://h:1/v1/traces', sample_ratio: 1.5}\n" + RULES);
        assertTrue(p.contains("tracing.sample_ratio: value 1.5 must be in [0.0, 1.0]"), p);
        p = problems("tracing: {otlp_endpoint: 'http://h:1/v1/traces', sample_ratio: -0.1}\n" + RULES);
        assertTrue(p.contains("tracing.sample_ratio: value -0.1 must be in [0.0, 1.0]"), p);
        p = problems("tracing: {otlp_endpoint: 'http://h:1/v1/traces', sample_ratio: half}\n" + RULES);
        assertTrue(p.contains("tracing.sample_ratio: value 'half' must be a number"), p);
        p = problems("tracing: {otlp_endpoint: 'grpc://h:4317', sample_ratio: 1}\n" + RULES);
        assertTrue(p.contains("tracing.otlp_endpoint: value 'grpc://h:4317' must be an http:// or https:// URL"), p);
        p = problems("tracing: {otlp_endpoint: 'http:///v1/traces'}\n" + RULES);
        assertTrue(p.contains("tracing.otlp_endpoint: value 'http:///v1/traces' must be an http:// or https:// URL"), p);
        p = problems("tracing: {sample_ratio: 0.1}\n" + RULES);
        assertTrue(p.contains("tracing.sample_ratio: value 0.1 needs tracing.otlp_endpoint"), p);
        p = problems("tracing: {otlp_endpoint: 'http://h:1/v1/traces', service_name: ' '}\n" + RULES);
        assertTrue(p.contains("tracing.service_name: value ' ' must be a non-empty string"), p);
        p = problems("tracing: {endpoint: 'http://h:1'}\n" + RULES);
        assertTrue(p.contains("tracing.endpoint: unknown key"), p);
    }

    @Test
    void restartOnly() throws Exception {
        GatewayConfig off = GatewayConfig.parse(RULES);
        GatewayConfig on = GatewayConfig.parse("tracing: {otlp_endpoint: 'http://h:1/v1/traces', sample_ratio: 1}\n" + RULES);
        assertEquals(List.of("tracing"), off.restartOnlyChanges(on));
        assertEquals(List.of(), on.restartOnlyChanges(on));
        assertTrue(GatewayConfig.RESTART_ONLY.contains("tracing"));
    }
}
