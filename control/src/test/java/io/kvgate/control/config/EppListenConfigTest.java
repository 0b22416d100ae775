package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code epp_listen}: off by default, a host:port when set, restart-only, and refusals naming the key and the rule. */
class EppListenConfigTest {
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
    void offByDefaultAndAHostPortWhenSet() throws Exception {
        assertNull(GatewayConfig.parse(RULES).eppListen());
        GatewayConfig c = GatewayConfig.parse("epp_listen: 0.0.0.0:9002\n" + RULES);
        assertEquals(new GatewayConfig.HostPort("0.0.0.0", 9002), c.eppListen());
        assertEquals(c.eppListen(), c.withRules(c.rules()).eppListen(), "kept when the rules are replaced");
    }

    @Test
    void aChangeNeedsARestart() throws Exception {
        GatewayConfig off = GatewayConfig.parse(RULES);
        GatewayConfig on = GatewayConfig.parse("epp_listen: 127.0.0.1:9002\n" + RULES);
        assertTrue(off.restartOnlyChanges(on).contains("epp_listen"), off.restartOnlyChanges(on).toString());
    }

    @Test
    void refusalsNameTheFieldTheValueAndTheRule() {
        assertEquals("epp_listen: value '9002' must be host:port", problems("epp_listen: '9002'\n" + RULES));
        assertEquals("epp_listen: value '127.0.0.1:99999' must be host:port with a port in [0, 65535]",
            problems("epp_listen: 127.0.0.1:99999\n" + RULES));
        assertEquals("epp_listen: value '127.0.0.1:8080' must differ from listen (the picker speaks gRPC on a port of its own)",
            problems("listen: 127.0.0.1:8080\nepp_listen: 127.0.0.1:8080\n" + RULES));
    }
}
