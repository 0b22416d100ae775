package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code rules[].failover} (issue #41): read, defaults, and the errors that name the field, value and rule. */
class FailoverConfigTest {
    private static String rule(String policy, String failover) {
        return """
            listen: 127.0.0.1:0
            rules:
              - name: r
                models: [m]
                engine: vllm
                policy: %s
                %s
                endpoints: [{url: "http://127.0.0.1:9001", role: prefill}, {url: "http://127.0.0.1:9002", role: decode}]
            """.formatted(policy, failover);
    }

    private static String plain(String failover) {
        return rule("round_robin", failover).replace(", role: prefill", "").replace(", role: decode", "");
    }

    private static String problems(String yaml) {
        return String.join("\n", assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml)).problems());
    }

    @Test
    void offByDefaultAndReadWhenSet() throws Exception {
        FailoverConfig off = GatewayConfig.parse(plain("")).rules().get(0).failover();
        assertFalse(off.enabled());
        FailoverConfig on = GatewayConfig.parse(plain("failover: {mid_stream: true, stall_ms: 250}")).rules().get(0).failover();
        assertTrue(on.enabled());
        assertEquals(FailoverConfig.DEFAULT_MAX_MIGRATIONS, on.maxMigrations());
        assertEquals(250, on.stallMs());
    }

    @Test
    void errorsNameTheFieldTheValueAndTheRule() {
        String pd = problems(rule("pd", "failover: {mid_stream: true}"));
        assertTrue(pd.contains("failover.mid_stream") && pd.contains("policy 'pd'"), pd);
        String idle = problems(plain("failover: {max_migrations: 3}"));
        assertTrue(idle.contains("failover.max_migrations") && idle.contains("mid_stream: true"), idle);
        String range = problems(plain("failover: {mid_stream: true, max_migrations: 0, stall_ms: 5}"));
        assertTrue(range.contains("max_migrations") && range.contains("stall_ms"), range);
        String unknown = problems(plain("failover: {mid_stream: true, stall: 5}"));
        assertTrue(unknown.contains("failover.stall") && unknown.contains("unknown key"), unknown);
    }
}
