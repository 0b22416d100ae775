package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.BuildInfo;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every command, started as its own JVM with the options the launcher gives it: help asked for is on stdout with 0,
 * an unknown option is refused with 2 and usage on stderr, and the short CLI commands print no JVM warning.
 */
@Tag("system")
@Timeout(300)
class CliConventionsSystemTest {

    @ParameterizedTest
    @ValueSource(strings = {"demo", "serve", "sim", "bench", "hash", "render", "ctl"})
    void helpOnStdoutExitZeroAndUnknownOptionExitTwo(String command) throws Exception {
        for (String help : List.of("--help", "-h")) {
            Launched l = Launched.kvgate(command, help);
            assertEquals(0, l.exit(), command + " " + help + ": " + l.err());
            assertTrue(l.out().toLowerCase().contains("usage"), command + " " + help + " stdout: " + l.out());
            assertEquals("", l.err(), command + " " + help + " stderr");
        }
        Launched bad = Launched.kvgate(command, "--no-such-option");
        assertEquals(2, bad.exit(), command + ": " + bad.out() + bad.err());
        assertTrue(bad.err().contains("--no-such-option"), command + " stderr: " + bad.err());
    }

    @Test
    void versionEverySpelling() throws Exception {
        for (String v : List.of("--version", "-V", "version")) {
            Launched l = Launched.kvgate(v);
            assertEquals(0, l.exit(), l.err());
            assertTrue(l.out().startsWith("kvgate " + BuildInfo.current().version() + " (commit "), l.out());
            assertEquals("", l.err(), v);
        }
    }

    @Test
    void topLevelHelpUnknownCommandAndNoArguments() throws Exception {
        Launched help = Launched.kvgate("--help");
        assertEquals(0, help.exit());
        assertTrue(help.out().contains("ctl") && help.out().contains("completion"), help.out());
        assertEquals("", help.err());
        Launched unknown = Launched.kvgate("frobnicate");
        assertEquals(2, unknown.exit());
        assertTrue(unknown.err().contains("unknown command 'frobnicate'") && unknown.err().contains("usage"), unknown.err());
        Launched none = Launched.kvgate();
        assertEquals(2, none.exit());
        assertTrue(none.err().contains("usage"), none.err());
    }

    @Test
    void ctlOptionsAfterTheVerbAndItsOldSpellings() throws Exception {
        // Nothing listens on this socket: exit 3 (unreachable) proves the line parsed; 2 would be a usage error.
        String sock = "/nonexistent-kvgate-test/kvgate.sock";
        for (List<String> line : List.of(List.of("ctl", "--socket", sock, "--json", "rules"), List.of("ctl", "rules", "--json", "--socket", sock),
            List.of("ctl", "--socket", sock, "rules", "--json"), List.of("ctl", "--socket=" + sock, "status"))) {
            Launched l = Launched.kvgate(line.toArray(String[]::new));
            assertEquals(3, l.exit(), line + ": " + l.err());
            assertTrue(l.err().contains("cannot reach") && l.err().contains(sock), l.err());
        }
        Launched help = Launched.kvgate("ctl", "rules", "-h");
        assertEquals(0, help.exit());
        assertTrue(help.out().contains("usage: ./kvgate ctl"), help.out());
        Launched verb = Launched.kvgate("ctl", "frobnicate");
        assertEquals(2, verb.exit());
        assertTrue(verb.err().contains("frobnicate") && verb.err().contains("usage"), verb.err());
        Launched none = Launched.kvgate("ctl");
        assertEquals(2, none.exit());
    }

    @Test
    void cliCommandsPrintNoJvmWarningTheGatewayKeepsTheVectorModule() throws Exception {
        for (String command : List.of("ctl", "hash", "render", "version", "completion")) {
            assertTrue(Launched.launcherJvmArgs(command).stream().noneMatch(a -> a.contains("jdk.incubator.vector")), command);
        }
        for (String command : List.of("serve", "demo", "sim", "bench")) {
            // the request path lexes bodies with the Vector API; asking for its help lexes nothing
            assertTrue(Launched.launcherJvmArgs(command, "--config", "x.yaml").contains("--add-modules=jdk.incubator.vector"), command);
            assertTrue(Launched.launcherJvmArgs(command, "--config", "x.yaml", "-h").stream()
                .noneMatch(a -> a.contains("jdk.incubator.vector")), command);
        }
    }

    @Test
    void completionScriptIsBashAndKnowsCtlVerbs() throws Exception {
        Launched l = Launched.kvgate("completion", "bash");
        assertEquals(0, l.exit(), l.err());
        assertTrue(l.out().contains("complete -F") && l.out().contains("kvgate"), l.out());
        assertTrue(l.out().contains("explain") && l.out().contains("--socket"), "ctl's verbs and options complete");
        // every other command's options, as its --help documents them
        for (String option : List.of("--config", "--drain-ms", "--model-dir", "--tokens-file", "--dialect", "--rate", "--replicas")) {
            assertTrue(l.out().contains(option), "completion lacks " + option);
        }
        Launched check = Launched.run(Launched.REPO, java.util.Map.of(), List.of("bash", "-n", "-c", l.out()));
        assertEquals(0, check.exit(), check.err());
        Launched bad = Launched.kvgate("completion", "fish");
        assertEquals(2, bad.exit());
        assertTrue(bad.err().contains("usage: kvgate completion bash"), bad.err());
    }
}
