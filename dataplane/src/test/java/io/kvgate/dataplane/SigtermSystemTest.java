package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code serve} as its own process gets SIGTERM: {@code /ready} answers 503 at once, requests on new connections are
 * still answered 200 during {@code shutdown.drain_delay_ms}, a second SIGTERM skips the rest of the delay, and the
 * process exits 0 (the JVM's default for SIGTERM is 143, which systemd counts as a failure).
 */
@Timeout(180) // a child JVM starting on a loaded host: see await
@Tag("system")
class SigtermSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private HttpResponse<String> send(int port, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(10));
        if (body != null) {
            b.header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String await(BlockingQueue<String> lines, String text, StringBuilder seen) throws InterruptedException {
        // A bound, not an expected time: the child JVM took over 20 s to serve at load average 35 on 2 cores.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            String line = lines.poll(100, TimeUnit.MILLISECONDS);
            if (line != null) {
                seen.append(line).append('\n');
                if (line.contains(text)) {
                    return line;
                }
            }
        }
        throw new AssertionError("no line containing '" + text + "' in:\n" + seen);
    }

    private static void signal(Process p, String sig) throws Exception {
        Process kill = new ProcessBuilder("kill", "-s", sig, Long.toString(p.pid())).start();
        assertTrue(kill.waitFor(10, TimeUnit.SECONDS) && kill.exitValue() == 0, "kill -s " + sig);
    }

    @Test
    void sigtermTurnsReadyOffServesThroughTheDelayAndExitsZero(@TempDir Path dir) throws Exception {
        try (FakeEngine engine = new FakeEngine("a")) {
            Path file = dir.resolve("kvgate.yaml");
            // A delay far longer than the test: the second SIGTERM ends it, so nothing here waits on time.
            Files.writeString(file, """
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                control_socket: off
                shutdown: {drain_delay_ms: 600000}
                rules:
                  - name: chat
                    models: [qwen3]
                    endpoints:
                      - url: %s
                """.formatted(engine.url()));
            String java = ProcessHandle.current().info().command().orElseThrow();
            Process p = new ProcessBuilder(List.of(java, "-cp", System.getProperty("java.class.path"),
                SighupSystemTest.Serve.class.getName(), "--config", file.toString())).redirectErrorStream(true).start();
            BlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread.ofVirtual().start(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = r.readLine()) != null; ) {
                        lines.add(line);
                    }
                } catch (java.io.IOException e) {
                    // the process ended
                }
            });
            StringBuilder seen = new StringBuilder();
            try {
                Matcher m = Pattern.compile("serving on 127\\.0\\.0\\.1:(\\d+)").matcher(await(lines, "serving on", seen));
                assertTrue(m.find());
                int port = Integer.parseInt(m.group(1));
                assertEquals(200, send(port, "/ready", null).statusCode());
                signal(p, "TERM");
                await(lines, "shutting down", seen);
                HttpResponse<String> ready = send(port, "/ready", null);
                assertEquals(503, ready.statusCode(), ready.body());
                assertTrue(ready.body().contains("the gateway is shutting down"), ready.body());
                for (int i = 0; i < 3; i++) {
                    HttpResponse<String> r = send(port, "/v1/chat/completions", CHAT);
                    assertEquals(200, r.statusCode(), "served during the delay: " + r.body());
                }
                assertTrue(p.isAlive(), "still serving: " + seen);
                signal(p, "TERM");
                assertTrue(p.waitFor(30, TimeUnit.SECONDS), "exited after the second SIGTERM: " + seen);
                assertEquals(0, p.exitValue(), "exit status after SIGTERM: " + seen);
                await(lines, "stopped", seen);
                assertEquals(3, engine.requests.get());
            } finally {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
