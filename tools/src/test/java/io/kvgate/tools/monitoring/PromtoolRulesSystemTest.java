package io.kvgate.tools.monitoring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The alert rules as Prometheus reads them: {@code promtool check rules} (syntax, PromQL, templates) and
 * {@code promtool test rules} (each alert fires on its input series and stays quiet on the others). promtool comes
 * from Debian's {@code prometheus} package, which {@code .ci/setup} installs: its absence fails the test.
 */
@Tag("system")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PromtoolRulesSystemTest {
    private static final Path DIR = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
        .resolve("deploy/prometheus");

    private static String promtool(String... args) throws Exception {
        Path promtool = Path.of("/usr/bin/promtool");
        assertTrue(Files.isExecutable(promtool), "promtool missing: run .ci/setup (Debian package prometheus)");
        List<String> cmd = new java.util.ArrayList<>(List.of(promtool.toString()));
        cmd.addAll(List.of(args));
        Path log = Files.createTempFile("promtool-", ".log");
        try {
            Process p = new ProcessBuilder(cmd).directory(DIR.toFile()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            assertTrue(p.waitFor(100, TimeUnit.SECONDS), "promtool " + String.join(" ", args) + " did not finish");
            String out = Files.readString(log, StandardCharsets.UTF_8);
            assertEquals(0, p.exitValue(), "promtool " + String.join(" ", args) + ":\n" + out);
            return out;
        } finally {
            Files.deleteIfExists(log);
        }
    }

    @Test
    void rulesAreValid() throws Exception {
        assertTrue(promtool("check", "rules", "alerts.yml").contains("SUCCESS: 6 rules found"));
    }

    @Test
    void everyAlertFiresOnItsSeriesAndOnlyThere() throws Exception {
        assertTrue(promtool("test", "rules", "alerts_test.yml").contains("SUCCESS"));
    }
}
