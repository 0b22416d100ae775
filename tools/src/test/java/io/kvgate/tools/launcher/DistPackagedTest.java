package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.BuildInfo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvgate dist} on the jars this build packaged: the tarball unpacks into a directory that runs with nothing but
 * a JDK (no mvnw, no sources, PATH without the repository), and holds what an operator needs.
 */
@Tag("system")
@Timeout(300)
class DistPackagedTest {

    @Test
    void tarballRunsWithOnlyAJava(@TempDir Path dir) throws Exception {
        Packaged.requireBuilt();
        Launched made = Launched.run(Launched.REPO, Map.of(), List.of("bash", "deploy/dist/make-dist.sh", "--no-build",
            "--out", dir.resolve("out").toString()));
        assertEquals(0, made.exit(), made.err());
        Path tarball = Path.of(made.out().strip());
        assertEquals("kvgate-" + BuildInfo.current().version() + ".tar.gz", tarball.getFileName().toString());
        Path unpacked = Files.createDirectory(dir.resolve("opt"));
        assertEquals(0, Launched.run(unpacked, Map.of(), List.of("tar", "-xzf", tarball.toString())).exit());
        Path home = unpacked.resolve("kvgate-" + BuildInfo.current().version());

        for (String f : List.of("bin/kvgate", "LICENSE", "NOTICE", "config/round-robin.yaml", "config/kv-exact.yaml",
            "models/qwen3/tokenizer_config.json", "systemd/kvgate.service", "completion/kvgate.bash", "lib/kvgate-tools.jar",
            "lib/jvm.options", "lib/kvgate-java.sh")) {
            assertTrue(Files.exists(home.resolve(f)), "tarball lacks " + f);
        }
        try (Stream<Path> all = Files.walk(home)) {
            List<String> strays = all.map(p -> home.relativize(p).toString())
                .filter(p -> p.endsWith(".java") || p.endsWith("pom.xml") || p.contains("mvnw")).toList();
            assertTrue(strays.isEmpty(), "no sources or Maven in a release: " + strays);
        }
        assertTrue(Files.isExecutable(home.resolve("bin/kvgate")));

        // Only a Java: the test JVM's own home, a PATH of system directories, no HOME/.m2 to fall back on.
        Map<String, String> env = Map.of("PATH", "/usr/bin:/bin", "JAVA_HOME", System.getProperty("java.home"),
            "HOME", dir.toString());
        Launched version = Launched.runClean(home, env, "bin/kvgate", "--version");
        assertEquals(0, version.exit(), version.err());
        assertEquals(BuildInfo.current().describe().replaceAll(", Java .*", ""), version.out().strip().replaceAll(", Java .*", ""));
        assertEquals("", version.err());

        Launched check = Launched.runClean(home, env, "bin/kvgate", "serve", "--config", "config/round-robin.yaml", "--check");
        assertEquals(0, check.exit(), check.err());
        assertTrue(check.out().startsWith("configuration OK"), check.out());
        // kv-exact.yaml names ../models/qwen3: the tarball's layout keeps that path valid.
        Launched kv = Launched.runClean(home, env, "bin/kvgate", "serve", "--config", "config/kv-exact.yaml", "--check");
        assertEquals(0, kv.exit(), kv.err());

        Launched ctl = Launched.runClean(home, env, "bin/kvgate", "ctl", "--help");
        assertEquals(0, ctl.exit());
        assertEquals("", ctl.err(), "a CLI command prints no JVM warning");

        // Through a symlink, as /usr/local/bin/kvgate -> /opt/kvgate/bin/kvgate.
        Path link = Files.createSymbolicLink(dir.resolve("kvgate-link"), home.resolve("bin/kvgate"));
        Launched viaLink = Launched.runClean(dir, env, link.toString(), "version");
        assertEquals(0, viaLink.exit(), viaLink.err());

    }
}
