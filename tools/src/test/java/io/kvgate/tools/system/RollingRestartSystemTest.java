package io.kvgate.tools.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A gateway restarted behind a balancer loses no request (issue #38): two {@code serve} processes with the same
 * configuration behind HAProxy (mode http, health check {@code GET /ready}, fall 1, rise 2, no retries) in front of two
 * simulated engines; clients send chat requests through HAProxy without pause while one gateway gets SIGTERM, drains
 * and exits. Every request must be answered 200, and the gateway must exit 0. perf/rolling-restart.sh is the same
 * under {@code ./kvgate bench}, both gateways in turn. HAProxy: .ci/setup installs it.
 */
@Timeout(90)
@Tag("system")
class RollingRestartSystemTest {
    private static final String CHAT = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4}";
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5)).build();

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static Process start(Path dir, String name, List<String> command) throws IOException {
        return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(dir.resolve(name + ".log").toFile()).start();
    }

    private static void await(BooleanSupplier c, long seconds, String what, Path dir) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!c.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                StringBuilder logs = new StringBuilder();
                try (var files = Files.list(dir)) {
                    for (Path f : files.filter(p -> p.toString().endsWith(".log")).toList()) {
                        logs.append("--- ").append(f.getFileName()).append('\n').append(Files.readString(f));
                    }
                }
                throw new AssertionError("timed out waiting: " + what + "\n" + logs);
            }
            Thread.sleep(20);
        }
    }

    /** HAProxy's view of one server ("UP", "DOWN", "UP 1/2" ...), from its CSV statistics. */
    private String status(int statsPort, String server) {
        try {
            String csv = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + statsPort + "/stats;csv"))
                .timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofString()).body();
            for (String line : csv.split("\n")) {
                String[] f = line.split(",");
                if (f.length > 17 && f[0].equals("gateways") && f[1].equals(server)) {
                    return f[17];
                }
            }
        } catch (IOException e) {
            return "unreachable";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "unknown";
    }

    private boolean ready(int port) {
        try {
            return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/ready")).timeout(Duration.ofSeconds(2))
                .build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Test
    void aGatewayGetsSigtermUnderLoadAndNoRequestFails(@TempDir Path dir) throws Exception {
        assertTrue(Files.isExecutable(Path.of("/usr/sbin/haproxy")) || Files.isExecutable(Path.of("/usr/bin/haproxy")),
            "haproxy is not installed: run .ci/setup");
        SimulatorConfig sim = new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(2).itlMs(1)
            .prefillUsPerToken(0);
        List<Process> processes = new ArrayList<>();
        try (EngineSimulator a = EngineSimulator.start(sim); EngineSimulator b = EngineSimulator.start(sim)) {
            int[] gw = {freePort(), freePort()};
            int front = freePort();
            int stats = freePort();
            String java = ProcessHandle.current().info().command().orElseThrow();
            for (int r = 0; r < 2; r++) {
                Path cfg = dir.resolve("gw" + (r + 1) + ".yaml");
                Files.writeString(cfg, """
                    listen: 127.0.0.1:%d
                    admin_listen: 127.0.0.1:0
                    control_socket: off
                    shutdown: {drain_delay_ms: 2000}
                    rules:
                      - name: chat
                        models: [m]
                        policy: least_outstanding
                        endpoints:
                          - url: %s
                          - url: %s
                    """.formatted(gw[r], a.baseUrl(), b.baseUrl()));
                processes.add(start(dir, "gw" + (r + 1), List.of(java, "-cp", System.getProperty("java.class.path"),
                    "io.kvgate.tools.Main", "serve", "--config", cfg.toString(), "--drain-ms", "10000")));
            }
            // Ready before HAProxy starts: it counts a server UP until its first check says otherwise.
            await(() -> ready(gw[0]) && ready(gw[1]), 40, "both gateways ready", dir);
            // Checks every 200 ms: a gateway that answers /ready 503 is out after at most one interval, well inside
            // the 2 s drain delay.
            Path haproxyCfg = dir.resolve("haproxy.cfg");
            Files.writeString(haproxyCfg, """
                global
                    maxconn 1024
                defaults
                    mode http
                    option http-keep-alive
                    retries 0
                    timeout connect 2s
                    timeout client 30s
                    timeout server 30s
                frontend fe
                    bind 127.0.0.1:%d
                    default_backend gateways
                frontend stats
                    bind 127.0.0.1:%d
                    stats enable
                    stats uri /stats
                backend gateways
                    balance roundrobin
                    option httpchk GET /ready
                    http-check expect status 200
                    default-server inter 200ms fall 1 rise 2
                    server gw1 127.0.0.1:%d check
                    server gw2 127.0.0.1:%d check
                """.formatted(front, stats, gw[0], gw[1]));
            processes.add(start(dir, "haproxy", List.of("haproxy", "-db", "-f", haproxyCfg.toString())));
            await(() -> status(stats, "gw1").equals("UP") && status(stats, "gw2").equals("UP"), 40, "both gateways UP", dir);

            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger ok = new AtomicInteger();
            Map<String, Integer> failures = new ConcurrentHashMap<>();
            List<Thread> clients = new ArrayList<>();
            long loadDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            for (int c = 0; c < 4; c++) {
                clients.add(Thread.ofPlatform().start(() -> {
                    while (!stop.get() && System.nanoTime() < loadDeadline) {
                        try {
                            HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + front
                                    + "/v1/chat/completions")).timeout(Duration.ofSeconds(10)).header("content-type", "application/json")
                                .POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(), HttpResponse.BodyHandlers.ofString());
                            if (r.statusCode() == 200) {
                                ok.incrementAndGet();
                            } else {
                                failures.merge(r.statusCode() + " " + r.body(), 1, Integer::sum);
                            }
                        } catch (IOException e) {
                            failures.merge(e.toString(), 1, Integer::sum);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }));
            }
            await(() -> ok.get() >= 200, 30, "200 requests through both gateways", dir);
            Process gw1 = processes.get(0);
            gw1.destroy(); // SIGTERM
            assertTrue(gw1.waitFor(30, TimeUnit.SECONDS), "gw1 exited");
            assertEquals(0, gw1.exitValue(), Files.readString(dir.resolve("gw1.log")));
            int afterExit = ok.get();
            await(() -> ok.get() >= afterExit + 200, 30, "200 more requests through the other gateway", dir);
            stop.set(true);
            for (Thread t : clients) {
                t.join(TimeUnit.SECONDS.toMillis(15));
            }
            assertEquals(Map.of(), failures, ok.get() + " requests answered 200; the failed ones by answer");
            String log = Files.readString(dir.resolve("gw1.log"));
            assertTrue(log.contains("shutting down") && log.contains("stopped"), log);
        } finally {
            for (Process p : processes) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
