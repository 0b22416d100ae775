package io.kvgate.control;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Properties;

/**
 * What this build is: the project version and the commit it was built from (filtered into {@code build.properties}
 * by Maven; the commit is "unknown" when built outside a git checkout), and the Java runtime it runs on. Read once;
 * shown by {@code kvgate --version}, {@code ctl status} and the {@code kvgate_build_info} metric.
 */
public record BuildInfo(String version, String commit, String javaVersion) {

    private static final BuildInfo CURRENT = load();

    public static BuildInfo current() {
        return CURRENT;
    }

    /** One line for humans: {@code kvgate 0.1.0-SNAPSHOT (commit 9bfd0b3a1c2d, Java 25.0.1)}. */
    public String describe() {
        return "kvgate " + version + " (commit " + commit + ", Java " + javaVersion + ")";
    }

    private static BuildInfo load() {
        Properties p = new Properties();
        try (InputStream in = BuildInfo.class.getResourceAsStream("build.properties")) {
            if (in != null) {
                p.load(in);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("reading io/kvgate/control/build.properties", e);
        }
        return new BuildInfo(resolved(p.getProperty("version")), resolved(p.getProperty("commit")),
                Runtime.version().toString());
    }

    /** An unfiltered placeholder (an IDE build that skipped resource filtering) reads as unknown, not as "${...}". */
    private static String resolved(String v) {
        return v == null || v.isBlank() || v.startsWith("${") ? "unknown" : v.trim();
    }
}
