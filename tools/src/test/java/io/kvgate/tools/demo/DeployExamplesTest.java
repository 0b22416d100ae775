package io.kvgate.tools.demo;

import static org.junit.jupiter.api.Assertions.assertFalse;

import io.kvgate.dataplane.config.ConfigCheck;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every example configuration shipped in deploy/examples passes every start-up check (users copy them): parsing
 * and the checks that build objects (hash seed and algorithm, tokenizer directories loadable).
 */
class DeployExamplesTest {
    @Test
    void examplesValidate() throws Exception {
        Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        List<Path> files;
        try (Stream<Path> s = Files.list(root.resolve("deploy/examples"))) {
            files = s.filter(p -> p.toString().endsWith(".yaml")).toList();
        }
        assertFalse(files.isEmpty());
        for (Path f : files) {
            ConfigCheck.load(f); // exactly what `serve --check` and start-up run; throws with every problem named
        }
    }
}
