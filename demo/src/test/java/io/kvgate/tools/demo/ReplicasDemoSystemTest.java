package io.kvgate.tools.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Smoke test of {@code ./kvgate demo --replicas N} at its smallest (2 engines, 2 replicas, 1 s per run): it completes
 * without request errors, prints every run and the probe, and under {@code session.mode: hash} every probe
 * conversation stays on one engine through alternating replicas. Bad flags exit 2 with a message.
 */
@Timeout(180)
@Tag("system")
class ReplicasDemoSystemTest {
    private static int demo(PrintStream out, String... args) throws Exception {
        PrintStream saved = System.out;
        String home = System.getProperty("kvgate.home");
        System.setOut(out);
        System.setProperty("kvgate.home", Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize().toString());
        try {
            return DemoCommand.run(args);
        } finally {
            System.setOut(saved);
            if (home == null) {
                System.clearProperty("kvgate.home");
            } else {
                System.setProperty("kvgate.home", home);
            }
        }
    }

    @Test
    void theSmallestReplicaRunCompletesAndHashedSessionsStayOnOneEngine(@TempDir Path dir) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Path report = dir.resolve("replicas.md");
        int rc = demo(new PrintStream(bytes, true, StandardCharsets.UTF_8), "--replicas", "2", "--engines", "2", "--seconds", "1",
            "--rate", "10", "--report", report.toString());
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, out);
        assertTrue(out.contains("kvgate demo --replicas 2: 2 simulated vLLM engines"), out);
        assertTrue(out.contains("the issue's numbers use 8 engines and real HAProxy"), out);
        for (String row : new String[] {"shared-prefix / kv_exact               1", "shared-prefix / kv_exact          2 (RR)",
            "multi-turn / session hash         2 (RR)", "multi-turn / session table        2 (RR)"}) {
            assertTrue(out.contains(row), row + "\n" + out);
        }
        assertTrue(out.contains("session.mode hash:  12/12"), out);
        assertTrue(out.contains("demo: OK"), out);
        assertTrue(Files.readString(report).contains("session.mode hash:  12/12"));
    }

    @Test
    void badFlagsExitTwoWithAMessage() throws Exception {
        PrintStream saved = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
            assertEquals(2, demo(o, "--replicas", "1"));
            assertEquals(2, demo(o, "--replicas", "x"));
            assertEquals(2, demo(o, "--replicas"));
            assertEquals(2, demo(o, "--bogus", "1"));
            assertEquals(0, demo(o, "--help"));
            assertTrue(out.toString(StandardCharsets.UTF_8).contains("./kvgate demo --replicas N"));
        } finally {
            System.setErr(saved);
        }
        String e = err.toString(StandardCharsets.UTF_8);
        assertTrue(e.contains("demo: --replicas 1 must be in [2, 16] (the run compares them with one gateway)"), e);
        assertTrue(e.contains("demo: --replicas x is not a number"), e);
        assertTrue(e.contains("demo: --replicas needs a value"), e);
        assertTrue(e.contains("demo: unknown option '--bogus'"), e);
    }
}
