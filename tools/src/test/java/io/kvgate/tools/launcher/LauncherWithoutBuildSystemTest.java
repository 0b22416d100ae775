package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.BuildInfo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * ./kvgate --help and --version on a fresh clone (nothing built) answer at once. The copy here has the launcher, its
 * sourced helper and the pom, and no mvnw: had the launcher tried to build, it would fail instead of answering.
 */
@Tag("system")
@Timeout(120)
class LauncherWithoutBuildSystemTest {

    @Test
    void helpAndVersionWithoutBuilding(@TempDir Path clone) throws Exception {
        Files.createDirectories(clone.resolve("deploy"));
        Files.copy(Launched.REPO.resolve("kvgate"), clone.resolve("kvgate"));
        Files.copy(Launched.REPO.resolve("deploy/kvgate-java.sh"), clone.resolve("deploy/kvgate-java.sh"));
        Files.copy(Launched.REPO.resolve("pom.xml"), clone.resolve("pom.xml"));
        Map<String, String> env = Map.of("JAVA_HOME", System.getProperty("java.home"));
        for (String help : List.of("--help", "-h", "help")) {
            Launched l = Launched.run(clone, env, List.of("bash", "kvgate", help));
            assertEquals(0, l.exit(), help + ": " + l.err());
            assertEquals("", l.err(), help);
            // The launcher's own help names every command Main's table has (they must not drift apart).
            for (String command : io.kvgate.tools.Main.commandNames()) {
                assertTrue(l.out().contains("\n  " + command + " "), "launcher help lacks " + command + ":\n" + l.out());
            }
        }
        for (String v : List.of("--version", "version")) {
            Launched l = Launched.run(clone, env, List.of("bash", "kvgate", v));
            assertEquals(0, l.exit(), v + ": " + l.err());
            assertTrue(l.out().startsWith("kvgate " + BuildInfo.current().version() + " (commit "), l.out());
            assertTrue(l.out().contains("not built yet"), l.out());
        }
        assertTrue(Files.notExists(clone.resolve("target")), "nothing was built");
    }
}
