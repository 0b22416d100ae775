package io.kvgate.control.config;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the key reference of docs/configuration.md from the declarations ({@link ConfigSchema}): the text between
 * {@link #BEGIN} and {@link #END} is replaced, everything around it is kept as written. A test fails when the
 * committed file differs from what this writes.
 *
 * <p>Usage: {@link #REGENERATE}, or {@code ConfigDocs docs/configuration.md} with control's classpath (rewrites the file
 * in place).
 */
public final class ConfigDocs {
    public static final String BEGIN = "<!-- BEGIN GENERATED: key reference (ConfigDocs; do not edit by hand) -->";
    public static final String END = "<!-- END GENERATED: key reference -->";
    /**
     * How to bring the file up to date: the test that compares it rewrites it when asked (the build has no plugin
     * that runs a main class offline), and prints this.
     */
    public static final String REGENERATE = "./mvnw -o -B -q -pl control -am verify -Dtest=ConfigDocsTest"
        + " -Dsurefire.failIfNoSpecifiedTests=false -Dkvgate.docs.regenerate=true";

    private ConfigDocs() {}

    /** The generated reference: one table per section, one row per key. */
    public static String reference() {
        StringBuilder out = new StringBuilder();
        out.append("Scope: `restart` = read at start-up only (a reload that changes it is refused, 409, naming it);")
            .append(" `reload` = applied by a reload for the next request (connection-level limits: the next connection);")
            .append(" `live` = also a per-rule tunable of `ctl patch` (`PATCH /control/v1/rules/{name}`).")
            .append(" A secret is never shown by `GET /admin/v1/config`.\n");
        for (ConfigSection<?> s : ConfigSchema.SECTIONS) {
            if (s.keys().isEmpty()) {
                continue;
            }
            out.append("\n### ").append(s.path().isEmpty() ? "Top level" : "`" + s.path() + "`").append("\n\n")
                .append(capitalize(s.doc())).append(".\n\n")
                .append("| key | type | default | range / values | scope | meaning |\n")
                .append("|---|---|---|---|---|---|\n");
            for (ConfigKey<?, ?> k : s.keys()) {
                out.append("| `").append(k.path()).append("` | ").append(k.typeText()).append(" | ")
                    .append(cell(k.defaultDocText())).append(" | ").append(k.rangeDocText()).append(" | ")
                    .append(k.scope().docName()).append(k.isSecret() ? ", secret" : "").append(" | ")
                    .append(cell(k.doc())).append(" |\n");
            }
        }
        return out.toString();
    }

    /** A table cell: a bare '|' (even inside backticks) would end the cell. */
    private static String cell(String text) {
        return text.replaceAll("(?<!\\\\)\\|", "\\\\|");
    }

    private static String capitalize(String s) {
        return s.isEmpty() ? s : Character.toUpperCase(s.charAt(0)) + s.substring(1);
    }

    /** {@code document} with the text between the markers replaced by {@link #reference()}. */
    public static String regenerate(String document) {
        int b = document.indexOf(BEGIN);
        int e = document.indexOf(END);
        if (b < 0 || e < b) {
            throw new IllegalArgumentException("the document has no " + BEGIN + " ... " + END + " markers");
        }
        return document.substring(0, b + BEGIN.length()) + "\n\n" + reference() + "\n" + document.substring(e);
    }

    public static void main(String[] args) throws IOException {
        Path file = Path.of(args.length > 0 ? args[0] : "docs/configuration.md");
        String before = Files.readString(file, StandardCharsets.UTF_8);
        String after = regenerate(before);
        Files.writeString(file, after, StandardCharsets.UTF_8);
        System.out.println(before.equals(after) ? file + " was up to date" : file + " regenerated");
    }
}
