package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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

    /**
     * The hand-written explanations below the reference name only declared keys (or sections): a key renamed or
     * removed in the declarations cannot linger there. A row names its key in the first cell; {@code a.b / c} is
     * {@code a.b} and {@code a.c}; rows after the rules' heading are within a rule.
     */
    @Test
    void theExplainedKeysAreDeclared() throws Exception {
        String doc = Files.readString(doc(), StandardCharsets.UTF_8);
        String explained = doc.substring(doc.indexOf("## Keys explained"), doc.indexOf("\n# Reload"));
        List<String> unknown = new ArrayList<>();
        String context = "";
        int rows = 0;
        for (String line : explained.split("\n")) {
            if (line.startsWith("Rules (`rules:` list")) {
                context = "rules[].";
            }
            if (!line.startsWith("| `")) {
                continue;
            }
            rows++;
            String first = line.substring(1, line.indexOf(" |", 1));
            Matcher m = Pattern.compile("`([^`]+)`").matcher(first);
            String previous = null;
            while (m.find()) {
                String token = m.group(1);
                String path = token.contains(".") || previous == null ? context + token
                    : previous.substring(0, previous.lastIndexOf('.') + 1) + token;
                if (ConfigSchema.key(path) == null && ConfigSchema.SECTIONS.stream().noneMatch(s -> s.path().equals(path))) {
                    unknown.add(path + " (row: " + first.strip() + ")");
                }
                previous = path;
            }
        }
        assertTrue(rows > 50, "found " + rows + " explained rows: has the section moved?");
        assertEquals(List.of(), unknown, "keys docs/configuration.md explains that nothing declares");
    }
}
