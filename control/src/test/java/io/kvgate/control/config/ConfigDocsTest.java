package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md's key reference is what {@link ConfigDocs} writes from the declarations. With
 * {@code -Dkvgate.docs.regenerate=true} the test writes it instead ({@link ConfigDocs#REGENERATE}).
 */
class ConfigDocsTest {
    private static Path doc() {
        String root = System.getProperty("kvgate.repo.root");
        // Surefire runs in the module's directory; the docs are the repository's.
        return (root == null || root.isEmpty() ? Path.of("..") : Path.of(root)).resolve("docs").resolve("configuration.md");
    }

    @Test
    void theCommittedReferenceIsTheGeneratedOne() throws Exception {
        String committed = Files.readString(doc(), StandardCharsets.UTF_8);
        String generated = ConfigDocs.regenerate(committed);
        if (Boolean.getBoolean("kvgate.docs.regenerate")) {
            Files.writeString(doc(), generated, StandardCharsets.UTF_8);
            return;
        }
        assertEquals(generated, committed,
            "docs/configuration.md is not what the declarations generate; regenerate it: " + ConfigDocs.REGENERATE);
    }

    @Test
    void everyDeclaredKeyHasARowWithItsDocLine() {
        String reference = ConfigDocs.reference();
        for (ConfigKey<?, ?> k : ConfigSchema.keys()) {
            assertTrue(reference.contains("| `" + k.path() + "` |"), k.path());
            assertFalse(k.doc().isBlank(), k.path() + " has no doc line");
            assertFalse(k.doc().contains("\n"), k.path() + "'s doc is more than one line");
        }
    }
}
