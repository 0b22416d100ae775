package io.kvgate.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class BuildInfoTest {

    @Test
    void versionAndCommitAreFilteredByTheBuild() {
        BuildInfo b = BuildInfo.current();
        // The reactor filters build.properties: the version is the pom's, the commit git's (this test runs in a checkout).
        assertTrue(b.version().matches("\\d+\\.\\d+\\.\\d+.*"), b.version());
        assertTrue(b.commit().matches("[0-9a-f]{12}"), b.commit());
        assertEquals(Runtime.version().toString(), b.javaVersion());
        assertTrue(b.describe().startsWith("kvgate " + b.version() + " (commit "), b.describe());
    }
}
