package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve} with a configuration it cannot apply exits 78 (EX_CONFIG, which systemd's
 * {@code RestartPreventExitStatus=78} does not restart) and prints every problem; a wrong command line stays 2.
 */
class GatewayMainExitTest {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    private int serve(String... args) throws Exception {
        return GatewayMain.run(args, new PrintStream(out, true, StandardCharsets.UTF_8),
            new PrintStream(err, true, StandardCharsets.UTF_8));
    }

    @Test
    void aBadConfigurationExits78WithEveryProblem(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("kvgate.yaml");
        Files.writeString(file, """
            listen: 127.0.0.1:0
            shutdown: {drain_delay_ms: -5}
            rules:
              - name: chat
                models: [m]
                policy: no_such_policy
                endpoints:
                  - url: http://127.0.0.1:9
            """);
        assertEquals(GatewayMain.EX_CONFIG, serve("--config", file.toString()));
        assertEquals(78, GatewayMain.EX_CONFIG);
        String e = err.toString(StandardCharsets.UTF_8);
        assertTrue(e.contains("shutdown.drain_delay_ms: value -5 must be in [0, 600000]"), e);
        assertTrue(e.contains("no_such_policy"), e);
        assertTrue(e.contains("invalid configuration (2 problems)"), e);
        assertEquals(GatewayMain.EX_CONFIG, serve("--config", file.toString(), "--check"), "--check tells the same");
    }

    @Test
    void aMissingFileIsAConfigurationProblemAndAWrongCommandLineIsNot(@TempDir Path dir) throws Exception {
        assertEquals(GatewayMain.EX_CONFIG, serve("--config", dir.resolve("absent.yaml").toString()));
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("cannot read configuration file"), err.toString());
        assertEquals(2, serve("--config"));
        assertEquals(2, serve("--no-such-option"));
    }
}
