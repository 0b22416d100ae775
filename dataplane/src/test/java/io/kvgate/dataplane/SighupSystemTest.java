package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve} as its own process: SIGHUP reloads the configuration file; a process started with SIGHUP ignored
 * (under {@code nohup}, as some supervisors start it) cannot be told to reload that way, and says so at start instead
 * of leaving every SIGHUP silently without effect (found when a soak run under nohup saw no reload apply).
 */
@Timeout(180) // a child JVM starting on a loaded host: see await
@Tag("system")
class SighupSystemTest {

    /** The serve command as the launcher runs it, in this test's class path. */
    public static final class Serve {
        public static void main(String[] args) throws Exception {
            System.exit(GatewayMain.run(args));
        }
    }

    private static String config(String loadCapFactor) {
        return """
            listen: 127.0.0.1:0
            control_socket: off
            rules:
              - name: r
                models: [m]
                engine: vllm
                policy: least_outstanding
                kv: {load_cap_factor: %s}
                endpoints:
                  - url: http://127.0.0.1:9
            """.formatted(loadCapFactor);
    }

    /** The gateway's output lines, read on a thread so a test can wait for one with a deadline. */
    private record Gateway(Process process, BlockingQueue<String> lines) implements AutoCloseable {
        static Gateway start(Path configFile, boolean ignoreSighup) throws Exception {
            String java = ProcessHandle.current().info().command().orElseThrow();
            List<String> javaCommand = List.of(java, "-cp", System.getProperty("java.class.path"), Serve.class.getName(),
                "--config", configFile.toString());
            // `trap '' HUP` is what nohup does: the signal is ignored before the JVM starts, and exec keeps it so.
            List<String> command = ignoreSighup
                ? List.of("/bin/sh", "-c", "trap '' HUP; exec \"$@\"", "sh") : List.of();
            List<String> all = new java.util.ArrayList<>(command);
            all.addAll(javaCommand);
            Process p = new ProcessBuilder(all).redirectErrorStream(true).start();
            BlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread.ofVirtual().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        lines.add(line);
                    }
                } catch (java.io.IOException e) {
                    // the process ended
                }
            });
            return new Gateway(p, lines);
        }

        /** Waits for a line containing {@code text}; fails with every line seen when none comes in 20 s. */
        String await(String text) throws InterruptedException {
            StringBuilder seen = new StringBuilder();
            // A bound, not an expected time: the child JVM took over 20 s to serve at load average 35 on 2 cores.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline) {
                String line = lines.poll(100, TimeUnit.MILLISECONDS);
                if (line != null) {
                    seen.append(line).append('\n');
                    if (line.contains(text)) {
                        return seen.toString();
                    }
                }
            }
            throw new AssertionError("no line containing '" + text + "' in:\n" + seen);
        }

        void hangUp() throws Exception {
            Process kill = new ProcessBuilder("kill", "-s", "HUP", Long.toString(process.pid())).start();
            assertTrue(kill.waitFor(10, TimeUnit.SECONDS) && kill.exitValue() == 0, "kill -s HUP");
        }

        @Override
        public void close() {
            process.destroy();
            try {
                if (!process.waitFor(10, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    @Test
    void sighupReloadsTheConfigurationFile(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("kvgate.yaml");
        Files.writeString(file, config("1.5"));
        try (Gateway gw = Gateway.start(file, false)) {
            String start = gw.await("serving on");
            assertTrue(!start.contains("SIGHUP is ignored"), start);
            Files.writeString(file, config("2.0"));
            gw.hangUp();
            gw.await("kv.load_cap_factor: 1.5 -> 2.0");
        }
    }

    @Test
    void aProcessStartedWithSighupIgnoredSaysItWillNotReloadOnIt(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("kvgate.yaml");
        Files.writeString(file, config("1.5"));
        try (Gateway gw = Gateway.start(file, true)) {
            gw.await("SIGHUP is ignored by this process");
            gw.await("serving on");
        }
    }
}
