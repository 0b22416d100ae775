package io.kvgate.tools.launcher;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;

/** The build's packaged output, which *PackagedTest classes read (they run in the package phase, see tools/pom.xml). */
final class Packaged {
    static final Path TOOLS_JAR = Launched.REPO.resolve("tools/target/kvgate-tools.jar");
    static final Path LIB = Launched.REPO.resolve("tools/target/lib");

    private Packaged() {}

    /**
     * A -Dtest filter also selects these in the test phase, where the jar is absent or from an earlier build: they
     * run only in the package phase's execution, which sets kvgate.packaged.phase.
     */
    static void requireBuilt() {
        assumeTrue(Boolean.getBoolean("kvgate.packaged.phase"), "runs in the package phase (tools/pom.xml, execution packaged)");
        assumeTrue(Files.isRegularFile(TOOLS_JAR) && Files.isDirectory(LIB), "kvgate-tools.jar and tools/target/lib exist");
    }
}
