package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * deploy/dist/Dockerfile cannot be built here (no container engine): this lints what matters. Two stages; the build
 * stage makes the release tarball with kvgate dist and the runtime stage unpacks that same tarball on a JRE 25; the
 * image runs as a non-root user through the release launcher.
 */
class DockerfileTest {

    @Test
    void multiStageFromTheTarballNonRoot() throws Exception {
        List<String> lines = Files.readAllLines(Launched.REPO.resolve("deploy/dist/Dockerfile")).stream()
            .map(String::strip).filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
        List<String> from = lines.stream().filter(l -> l.startsWith("FROM ")).toList();
        assertEquals(2, from.size(), "build and runtime stages: " + from);
        assertTrue(from.get(0).matches("FROM \\S+:25-jdk\\S* AS build"), from.get(0));
        assertTrue(from.get(1).matches("FROM \\S+:25-jre\\S*"), from.get(1));
        String text = String.join("\n", lines);
        assertTrue(text.contains("./kvgate dist") && text.contains("kvgate-*.tar.gz"), "builds and unpacks the release tarball");
        assertTrue(text.contains("COPY --from=build"), "the runtime stage takes the build stage's unpacked tarball");
        String user = lines.stream().filter(l -> l.startsWith("USER ")).reduce((a, b) -> b).orElse("USER root");
        assertTrue(!user.matches("USER (root|0)(:.*)?"), "runs as a non-root user: " + user);
        assertTrue(text.indexOf("USER ") > text.lastIndexOf("FROM "), "USER is set in the runtime stage");
        assertTrue(text.contains("ENTRYPOINT [\"/opt/kvgate/bin/kvgate\"]"), "runs the release launcher");
    }
}
