package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** B-9: {@code control_socket: off} written unquoted (YAML 1.1 boolean false) means no socket, not a file "false". */
class ControlSocketConfigTest {
    private static final String BASE = """
        listen: 127.0.0.1:8080
        rules:
          - name: chat
            models: [qwen3]
            endpoints:
              - url: http://127.0.0.1:9001
        """;

    @Test
    void b9_offUnquotedQuotedOrFalseMeansNoSocket() throws Exception {
        for (String v : new String[] {"off", "Off", "false", "no", "'off'", "\"off\""}) {
            assertEquals("off", GatewayConfig.parse("control_socket: " + v + "\n" + BASE).controlSocket(), v);
        }
    }

    @Test
    void aPathIsKeptAndTrueIsRefusedNamingTheField() throws Exception {
        assertEquals("/run/kvgate/k.sock", GatewayConfig.parse("control_socket: /run/kvgate/k.sock\n" + BASE).controlSocket());
        assertEquals(null, GatewayConfig.parse(BASE).controlSocket());
        for (String v : new String[] {"on", "true", "yes"}) {
            ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse("control_socket: " + v + "\n" + BASE));
            String p = String.join("\n", e.problems());
            assertTrue(p.contains("control_socket: value true must be a socket path or off"), p);
        }
    }
}
