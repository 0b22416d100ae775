package io.kvgate.tools.system.soak;

import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.client.ControlClient;
import io.kvgate.testkit.TestPorts;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 item 5: the gateway under a long mixed run. The gateway runs as its own JVM (so the RSS read from
 * {@code /proc/PID/status} is the gateway's alone) in front of simulated vLLM engines, each its own process, on a
 * {@code kv_exact} rule with the real Qwen3 tokenizer and real ZeroMQ KV events (the first engines publish on a
 * socket they bind, the last one connects to the gateway's bind socket). For the configured duration:
 *
 * <ul>
 *   <li>closed-loop clients (streaming and not, shared prompt prefixes) through the gateway;</li>
 *   <li>every {@code killEverySeconds} one engine (round robin) is SIGKILLed by its PID and restarted on its ports;</li>
 *   <li>every {@code reloadEverySeconds} the config file changes and is reloaded, by SIGHUP and {@code ctl reload}
 *       (the control socket) in turn;</li>
 *   <li>every {@code hostileEverySeconds} the enabled hostile peers: a negative-size ZMTP frame to the KV bind socket
 *       (review B-1), {@code GET /health} pipelined without reading (B-3), slowloris heads;</li>
 *   <li>throughout, a slow-reader streaming client.</li>
 * </ul>
 *
 * Asserts the issue's criteria: no failed request beyond those in flight on an engine when it was killed; RSS flat
 * (every sample after warm-up within ±10 % of the first one after it); every KV subscription {@code up} at the end and
 * still indexing its engine's events. Prints the numbers and writes them, with every process's log, under
 * {@code tools/target/soak/}.
 *
 * <p>Switches (system properties, e.g. {@code ./kvgate test --soak -Dkvgate.soak.minutes=30}):
 * {@code kvgate.soak.minutes} (2), {@code .engines} (4), {@code .clients} (4), {@code .killEverySeconds} (60),
 * {@code .reloadEverySeconds} (30), {@code .hostileEverySeconds} (45), {@code .warmupSeconds} (a quarter of the run,
 * at most 120), {@code .hostile.zmtp}, {@code .hostile.pipeline}, {@code .hostile.slowloris}, {@code .slowReader}
 * (each true).
 */
@Tag("soak")
@Timeout(value = 200, unit = TimeUnit.MINUTES) // backstop: the run's own hard timeout is its duration + 10 min
class GatewaySoakTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String ADMIN_TOKEN = "soak-admin-token-0123456789";
    private static final Duration START_WAIT = Duration.ofSeconds(90);
    private static final Pattern SERVING = Pattern.compile("serving on 127\\.0\\.0\\.1:(\\d+) .*admin on 127\\.0\\.0\\.1:(\\d+)");
    private static final Pattern SIM_LISTENING = Pattern.compile("listening on http://127\\.0\\.0\\.1:\\d+");
    private static final Pattern ROUTED_TO = Pattern.compile("endpoint=([^;]+)");
    private static final long RSS_EVERY_NS = TimeUnit.SECONDS.toNanos(10);
    /** An engine stays dead this long before its restart: long enough for the gateway to notice and route around. */
    private static final long DOWN_NS = TimeUnit.SECONDS.toNanos(5);
    /** Shared prompt prefixes, so kv_exact finds cached blocks and the engines publish stores and evictions. */
    private static final int DOCUMENTS = 6;

    private final int minutes = intProperty("kvgate.soak.minutes", 2, 1, 180);
    private final int engineCount = intProperty("kvgate.soak.engines", 4, 2, 8);
    private final int clientCount = intProperty("kvgate.soak.clients", 4, 1, 64);
    private final int killEverySeconds = intProperty("kvgate.soak.killEverySeconds", 60, 10, 3600);
    private final int reloadEverySeconds = intProperty("kvgate.soak.reloadEverySeconds", 30, 5, 3600);
    private final int hostileEverySeconds = intProperty("kvgate.soak.hostileEverySeconds", 45, 10, 3600);
    private final int warmupSeconds = intProperty("kvgate.soak.warmupSeconds", Math.min(120, minutes * 15), 0, 3600);
    private final boolean hostileZmtp = boolProperty("kvgate.soak.hostile.zmtp");
    private final boolean hostilePipeline = boolProperty("kvgate.soak.hostile.pipeline");
    private final boolean hostileSlowloris = boolProperty("kvgate.soak.hostile.slowloris");
    private final boolean slowReader = boolProperty("kvgate.soak.slowReader");

    private final Path root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
    private final Path modelDir = root.resolve("deploy/models/qwen3");
    private final Path runDir = root.resolve("tools/target/soak/"
        + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
    /** Every process this test started, ended by PID in the finally (and by a shutdown hook if the JVM dies). */
    private final List<KvgateProcess> processes = new CopyOnWriteArrayList<>();
    private final List<Engine> engines = new ArrayList<>();
    private final SoakLedger ledger = new SoakLedger();
    private final List<String> events = new CopyOnWriteArrayList<>();
    /** Every 10 s: {seconds since start, gateway RSS KiB, KV events indexed so far}. */
    private final List<long[]> rss = new CopyOnWriteArrayList<>();
    private final HttpClient admin = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final AtomicInteger reloadsApplied = new AtomicInteger();
    private final List<String> reloadFailures = new CopyOnWriteArrayList<>();
    private KvgateProcess gateway;
    private Path configFile;
    private int port;
    private int adminPort;
    private long t0;

    /** One simulated engine: fixed ports across restarts (the gateway's config names them). */
    private record Engine(int index, int httpPort, int kvPort, boolean gatewayBinds, AtomicReference<KvgateProcess> process,
                          AtomicInteger runs) {
        String key() {
            return "127.0.0.1:" + httpPort;
        }
    }

    @Test
    void mixedFaultsHoldTheIssueCriteria() throws Exception {
        Thread reaper = new Thread(() -> processes.forEach(KvgateProcess::close), "soak-reaper");
        Runtime.getRuntime().addShutdownHook(reaper);
        try {
            assertTimeoutPreemptively(Duration.ofMinutes(minutes + 10), this::run,
                () -> "the soak exceeded its hard timeout; logs in " + runDir);
        } finally {
            processes.forEach(KvgateProcess::close);
            Runtime.getRuntime().removeShutdownHook(reaper);
        }
    }

    private void run() throws Exception {
        Files.createDirectories(runDir);
        log("soak: " + minutes + " min, " + engineCount + " engines, " + clientCount + " clients; kill every "
            + killEverySeconds + " s, reload every " + reloadEverySeconds + " s, hostile every " + hostileEverySeconds
            + " s (zmtp " + hostileZmtp + ", pipeline " + hostilePipeline + ", slowloris " + hostileSlowloris
            + "), slow reader " + slowReader + "; logs in " + runDir);
        for (int i = 0; i < engineCount; i++) {
            Engine e = new Engine(i, TestPorts.free(), TestPorts.free(), i == engineCount - 1, new AtomicReference<>(),
                new AtomicInteger());
            engines.add(e);
            startEngine(e);
        }
        for (Engine e : engines) {
            e.process().get().awaitLine(SIM_LISTENING, START_WAIT);
        }
        configFile = runDir.resolve("gateway.yaml");
        Files.writeString(configFile, gatewayYaml(1.5));
        gateway = KvgateProcess.start("gateway", root, runDir.resolve("gateway.log"),
            List.of("-Xms384m", "-Xmx384m", "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=256m"),
            List.of("serve", "--config", configFile.toString(), "--drain-ms", "1000"));
        processes.add(gateway);
        Matcher serving = gateway.awaitLine(SERVING, START_WAIT);
        port = Integer.parseInt(serving.group(1));
        adminPort = Integer.parseInt(serving.group(2));
        awaitSubscribersUp(Duration.ofSeconds(60));
        awaitEndpointsHealthy(Duration.ofSeconds(60)); // until then a request may rightly get 503 no_healthy_endpoint
        log("gateway pid " + gateway.pid() + " on " + port + " (admin " + adminPort + "), RSS " + gateway.rssKb() + " KiB");

        t0 = System.nanoTime();
        long end = t0 + TimeUnit.MINUTES.toNanos(minutes);
        List<Thread> load = new ArrayList<>();
        for (int c = 0; c < clientCount; c++) {
            int client = c;
            load.add(Thread.ofVirtual().name("soak-client-" + c).start(() -> closedLoopClient(client, end)));
        }
        AtomicLong slowStreams = new AtomicLong();
        AtomicLong slowBytes = new AtomicLong();
        List<String> slowEnds = new CopyOnWriteArrayList<>();
        if (slowReader) {
            load.add(Thread.ofVirtual().name("soak-slow-reader").start(() -> slowReaderClient(end, slowStreams, slowBytes, slowEnds)));
        }
        chaos(end);
        for (Thread t : load) {
            t.join(TimeUnit.SECONDS.toMillis(90));
        }
        long runNs = System.nanoTime() - t0;

        // The end state: every engine up again, every subscription up and still indexing its engine's events.
        for (Engine e : engines) {
            if (!e.process().get().alive()) {
                startEngine(e);
                e.process().get().awaitLine(SIM_LISTENING, START_WAIT);
            }
        }
        List<String> stuck = stuckSubscriptions();
        JsonNode inv = adminGet("/admin/v1/inventory");
        String report = report(runNs, slowStreams.get(), slowBytes.get(), slowEnds, stuck, inv);
        Files.writeString(runDir.resolve("soak-report.txt"), report);
        System.out.println(report);

        SoakLedger.Attribution a = ledger.attribute();
        List<String> broken = new ArrayList<>();
        if (ledger.ok() == 0) {
            broken.add("no request succeeded");
        }
        if (!a.unexplained().isEmpty()) {
            broken.add(a.unexplained().size() + " failed requests not in flight on a killed engine, first: "
                + a.unexplained().subList(0, Math.min(10, a.unexplained().size())).stream().map(this::describe).toList());
        }
        String rssProblem = rssProblem();
        if (rssProblem != null) {
            broken.add(rssProblem);
        }
        if (!stuck.isEmpty()) {
            broken.add("stuck subscriptions: " + stuck);
        }
        if (!reloadFailures.isEmpty()) {
            broken.add("reloads failed: " + reloadFailures);
        }
        if (!broken.isEmpty()) {
            throw new AssertionError(String.join("\n", broken) + "\n(report and logs in " + runDir + ")");
        }
    }

    // ---- processes ------------------------------------------------------------------------------------------

    private void startEngine(Engine e) throws IOException {
        int run = e.runs().incrementAndGet();
        List<String> args = new ArrayList<>(List.of("sim", "--dialect", "vllm", "--port", Integer.toString(e.httpPort()),
            "--model", "qwen3", "--model-dir", modelDir.toString(), "--seed", Integer.toString(e.index()),
            "--ttft-ms", "10", "--itl-ms", "5", "--prefill-us-per-token", "1", "--block-size", "16",
            "--hash-seed", "0", "--cache-blocks", "2048",
            "--kv-events", "tcp://127.0.0.1:" + e.kvPort(), "--kv-events-mode", e.gatewayBinds() ? "connect" : "bind"));
        KvgateProcess p = KvgateProcess.start("engine " + e.index(), root,
            runDir.resolve("engine-" + e.index() + "-run-" + run + ".log"),
            List.of("-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"), args);
        processes.add(p);
        e.process().set(p);
    }

    private String gatewayYaml(double loadCapFactor) {
        StringBuilder eps = new StringBuilder();
        for (Engine e : engines) {
            eps.append("      - url: http://").append(e.key()).append('\n')
                .append("        kv_events: tcp://127.0.0.1:").append(e.kvPort()).append('\n');
            if (e.gatewayBinds()) {
                eps.append("        kv_events_bind: true\n");
            }
        }
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            control_socket: %s
            health: {interval_ms: 1000}
            limits: {request_read_timeout_ms: 3000, client_stall_timeout_ms: 15000}
            rules:
              - name: soak
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                tokenizer: %s
                block_size: 16
                hash_seed: "0"
                explain: true
                kv: {load_cap_factor: %s}
                endpoints:
            %s""".formatted(ADMIN_TOKEN, runDir.resolve("kvgate.sock"), modelDir, loadCapFactor, eps);
    }

    // ---- the chaos schedule ---------------------------------------------------------------------------------

    /** Runs the kills, reloads, hostile peers and RSS samples on schedule until {@code end}. */
    private void chaos(long end) throws Exception {
        long nextRss = t0;
        long nextKill = t0 + TimeUnit.SECONDS.toNanos(killEverySeconds);
        long nextReload = t0 + TimeUnit.SECONDS.toNanos(reloadEverySeconds);
        long nextHostile = t0 + TimeUnit.SECONDS.toNanos(hostileEverySeconds);
        Thread killer = null;
        Thread hostile = null;
        Thread reloader = null;
        int kills = 0;
        int reloads = 0;
        while (System.nanoTime() - end < 0) {
            long now = System.nanoTime();
            if (now - nextRss >= 0) {
                long kb = gateway.rssKb();
                if (!gateway.alive()) {
                    throw new AssertionError("the gateway died:\n" + gateway.logTail(4000));
                }
                rss.add(new long[] {TimeUnit.NANOSECONDS.toSeconds(now - t0), kb, indexedEvents()});
                nextRss += RSS_EVERY_NS;
            }
            if (now - nextKill >= 0 && (killer == null || !killer.isAlive())) {
                Engine victim = engines.get(kills++ % engines.size());
                killer = Thread.ofVirtual().name("soak-killer").start(() -> killAndRestart(victim));
                nextKill += TimeUnit.SECONDS.toNanos(killEverySeconds);
            }
            if (now - nextReload >= 0 && (reloader == null || !reloader.isAlive())) {
                int round = reloads++;
                reloader = Thread.ofVirtual().name("soak-reloader").start(() -> reload(round));
                nextReload += TimeUnit.SECONDS.toNanos(reloadEverySeconds);
            }
            if (now - nextHostile >= 0 && (hostile == null || !hostile.isAlive())) {
                hostile = Thread.ofVirtual().name("soak-hostile").start(this::hostileRound);
                nextHostile += TimeUnit.SECONDS.toNanos(hostileEverySeconds);
            }
            long next = Math.min(Math.min(nextRss, nextKill), Math.min(nextReload, Math.min(nextHostile, end)));
            long waitMs = Math.max(1, Math.min(1_000, TimeUnit.NANOSECONDS.toMillis(next - System.nanoTime())));
            Thread.sleep(waitMs); // the schedule's pace; nothing measured depends on it
        }
        for (Thread t : new Thread[] {killer, hostile, reloader}) {
            if (t != null) {
                t.join(TimeUnit.SECONDS.toMillis(120));
            }
        }
        rss.add(new long[] {TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0), gateway.rssKb(), indexedEvents()});
    }

    /** KV events the gateway has taken from all engines so far (-1 when the admin API did not answer). */
    private long indexedEvents() {
        try {
            long n = 0;
            for (JsonNode ep : adminGet("/admin/v1/inventory").path("rules").get(0).path("endpoints")) {
                for (JsonNode s : ep.path("subscribers")) {
                    n += s.path("events").asLong();
                }
            }
            return n;
        } catch (IOException | InterruptedException | RuntimeException e) {
            return -1;
        }
    }

    private void killAndRestart(Engine e) {
        try {
            KvgateProcess p = e.process().get();
            long start = System.nanoTime();
            p.kill();
            long gone = System.nanoTime();
            ledger.killed(new SoakLedger.Kill(e.key(), start, gone));
            log(String.format(Locale.ROOT, "t=%ds killed engine %d (pid %d, %s)", sinceStart(start), e.index(), p.pid(),
                e.key()));
            Thread.sleep(TimeUnit.NANOSECONDS.toMillis(DOWN_NS)); // dead for a while, as a crashed engine is
            // The kernel may still hold the ports for a moment after SIGKILL: retry the restart a few times.
            for (int attempt = 1; ; attempt++) {
                startEngine(e);
                try {
                    e.process().get().awaitLine(SIM_LISTENING, START_WAIT);
                    break;
                } catch (AssertionError notUp) {
                    if (attempt == 5) {
                        throw notUp;
                    }
                    e.process().get().close();
                    Thread.sleep(1_000);
                }
            }
            log(String.format(Locale.ROOT, "t=%ds restarted engine %d (pid %d)", sinceStart(System.nanoTime()),
                e.index(), e.process().get().pid()));
        } catch (Exception | AssertionError ex) {
            log("engine " + e.index() + " kill/restart failed: " + ex);
        }
    }

    /** Changes a tunable in the file, then reloads it by SIGHUP (even rounds) or {@code ctl reload} (odd rounds). */
    private void reload(int round) {
        try {
            long before = adminGet("/control/v1/status").get("config_version").asLong();
            Files.writeString(configFile, gatewayYaml(round % 2 == 0 ? 2.0 : 1.5));
            String how;
            if (round % 2 == 0) {
                how = "SIGHUP";
                gateway.signal("HUP");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (adminGet("/control/v1/status").get("config_version").asLong() <= before) {
                    if (System.nanoTime() - deadline > 0) {
                        throw new AssertionError("SIGHUP: config version still " + before + " after 20 s");
                    }
                    Thread.sleep(50);
                }
            } else {
                how = "ctl reload";
                ControlClient.Response r = ControlClient.socket(runDir.resolve("kvgate.sock"))
                    .send("POST", "/control/v1/reload", "");
                if (r.status() != 200 || !JSON.readTree(r.body()).path("applied").asBoolean()) {
                    throw new AssertionError("ctl reload: " + r.status() + " " + r.body());
                }
            }
            reloadsApplied.incrementAndGet();
            log(String.format(Locale.ROOT, "t=%ds reload %d by %s applied", sinceStart(System.nanoTime()), round, how));
        } catch (Exception | AssertionError e) {
            reloadFailures.add("round " + round + ": " + e);
            log("reload " + round + " failed: " + e);
        }
    }

    private void hostileRound() {
        long t = sinceStart(System.nanoTime());
        List<Thread> peers = new ArrayList<>();
        if (hostileZmtp) {
            Engine bound = engines.get(engines.size() - 1);
            peers.add(Thread.ofVirtual().start(() -> hostile(t, "negative-size ZMTP frame to bind socket :" + bound.kvPort(),
                () -> HostilePeers.negativeZmtpFrame(bound.kvPort(), 3_000))));
        }
        if (hostilePipeline) {
            peers.add(Thread.ofVirtual().start(() -> hostile(t, "pipelined GET /health, never read",
                () -> HostilePeers.pipelinedHealthWithoutReading(port, 1_000_000, 10))));
        }
        if (hostileSlowloris) {
            peers.add(Thread.ofVirtual().start(() -> hostile(t, "slowloris heads",
                () -> HostilePeers.slowlorisHeads(port, 16, 15))));
        }
        for (Thread p : peers) {
            try {
                p.join(TimeUnit.SECONDS.toMillis(40));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    @FunctionalInterface
    private interface Attack {
        String run() throws Exception;
    }

    private void hostile(long t, String what, Attack attack) {
        try {
            log("t=" + t + "s hostile: " + what + ": " + attack.run());
        } catch (Exception e) {
            log("t=" + t + "s hostile: " + what + ": " + e);
        }
    }

    // ---- clients --------------------------------------------------------------------------------------------

    private void closedLoopClient(int client, long end) {
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();
        // Bounded in count as well as time: far more than a closed loop of ~100 ms requests can send.
        long maxRequests = TimeUnit.MINUTES.toSeconds(minutes) * 1_000L;
        for (long n = 0; n < maxRequests && System.nanoTime() - end < 0; n++) {
            boolean stream = n % 2 == 1;
            String body = chatBody(client, n, stream, 12);
            long start = System.nanoTime();
            String endpoint = null;
            try {
                HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port
                        + "/v1/chat/completions")).timeout(Duration.ofSeconds(60)).header("content-type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
                endpoint = r.headers().firstValue("x-kvgate-route").map(GatewaySoakTest::routedTo).orElse(null);
                String problem = problem(r, stream);
                ledger.record(new SoakLedger.Outcome(start, System.nanoTime(), endpoint, problem == null,
                    problem == null ? null : (stream ? "stream " : "json ") + problem));
            } catch (IOException e) {
                ledger.record(new SoakLedger.Outcome(start, System.nanoTime(), endpoint, false, "io: " + e));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Why a response is a failure, or null when it is a complete answer. */
    private static String problem(HttpResponse<String> r, boolean stream) {
        String b = r.body();
        if (r.statusCode() != 200) {
            return r.statusCode() + " " + b.substring(0, Math.min(200, b.length()));
        }
        if (stream) {
            if (b.contains("\"error\"")) {
                int at = b.indexOf("\"error\"");
                return "error event: " + b.substring(at, Math.min(b.length(), at + 200));
            }
            return b.contains("data: [DONE]") ? null : "no [DONE] (" + b.length() + " bytes)";
        }
        return b.contains("\"choices\"") ? null : "no choices: " + b.substring(0, Math.min(200, b.length()));
    }

    private static String routedTo(String route) {
        Matcher m = ROUTED_TO.matcher(route);
        return m.find() ? m.group(1).trim() : null;
    }

    private static String chatBody(int client, long n, boolean stream, int maxTokens) {
        int doc = (int) ((client * 7 + n) % DOCUMENTS);
        String system = ("Reference document " + doc + " for the logistics desk: shipments, customs, pallets and "
            + "delivery windows are tracked per depot " + doc + ". ").repeat(12);
        return "{\"model\":\"qwen3\",\"max_tokens\":" + maxTokens + (stream ? ",\"stream\":true" : "")
            + ",\"messages\":[{\"role\":\"system\",\"content\":\"" + system + "\"},{\"role\":\"user\",\"content\":"
            + "\"Client " + client + " asks question " + n + " about depot " + doc + ".\"}]}";
    }

    /**
     * A streaming client that reads slowly (4 KiB receive buffer, 512 bytes every 100 ms) for the whole run: each
     * stream asks for 600 tokens and is read for at most 60 s, then the next one starts.
     */
    private void slowReaderClient(long end, AtomicLong streams, AtomicLong bytes, List<String> ends) {
        byte[] body = chatBody(99, 0, true, 600).getBytes(StandardCharsets.UTF_8);
        byte[] head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + body.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
        byte[] buf = new byte[512];
        for (int n = 0; n < 10_000 && System.nanoTime() - end < 0; n++) {
            long streamEnd = Math.min(end, System.nanoTime() + TimeUnit.SECONDS.toNanos(60));
            String how = "read limit";
            try (Socket s = new Socket()) {
                s.setReceiveBufferSize(4096);
                s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 5_000);
                s.setSoTimeout(100); // paces the reads: at most 512 bytes per 100 ms
                OutputStream out = s.getOutputStream();
                out.write(head);
                out.write(body);
                out.flush();
                InputStream in = s.getInputStream();
                StringBuilder tail = new StringBuilder();
                streams.incrementAndGet();
                while (System.nanoTime() - streamEnd < 0) {
                    int k;
                    try {
                        k = in.read(buf);
                    } catch (SocketTimeoutException e) {
                        continue;
                    }
                    if (k < 0) {
                        how = tail.indexOf("[DONE]") >= 0 ? "complete" : "closed without [DONE]";
                        break;
                    }
                    bytes.addAndGet(k);
                    tail.append(new String(buf, 0, k, StandardCharsets.ISO_8859_1));
                    if (tail.length() > 64) {
                        tail.delete(0, tail.length() - 64);
                    }
                    Thread.sleep(100);
                }
            } catch (IOException e) {
                how = "io: " + e.getMessage();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            ends.add(how);
        }
    }

    // ---- the end state --------------------------------------------------------------------------------------

    private void awaitSubscribersUp(Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        List<String> notUp = subscriberStates(false);
        while (!notUp.isEmpty()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("KV subscriptions not up within " + timeout.toSeconds() + " s: " + notUp
                    + "\n" + gateway.logTail(3000));
            }
            Thread.sleep(100);
            notUp = subscriberStates(false);
        }
    }

    private void awaitEndpointsHealthy(Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            List<String> unhealthy = new ArrayList<>();
            for (JsonNode ep : adminGet("/admin/v1/endpoints").path("rules").get(0).path("endpoints")) {
                if (!ep.path("healthy").asBoolean()) {
                    unhealthy.add(ep.path("url").asText());
                }
            }
            if (unhealthy.isEmpty()) {
                return;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("endpoints not healthy within " + timeout.toSeconds() + " s: " + unhealthy);
            }
            Thread.sleep(100);
        }
    }

    /** Subscriptions not {@code up} (or all of them with {@code all}), as "endpoint rank state". */
    private List<String> subscriberStates(boolean all) throws Exception {
        List<String> out = new ArrayList<>();
        for (JsonNode ep : adminGet("/admin/v1/inventory").path("rules").get(0).path("endpoints")) {
            for (JsonNode s : ep.path("subscribers")) {
                if (all || !s.path("state").asText().equals("up")) {
                    out.add(ep.path("url").asText() + " rank " + s.path("rank").asText() + " " + s.path("state").asText()
                        + (all ? " events " + s.path("events").asLong() + " reconnects " + s.path("reconnects").asLong()
                            + " restarts " + s.path("restarts").asLong() : " (" + s.path("last_error").asText() + ")"));
                }
            }
        }
        return out;
    }

    /**
     * Subscriptions that are stuck: not {@code up} within 60 s of the run's end (every engine is up again), or up but
     * no longer indexing: a prompt sent straight to the engine (new blocks, so a BlockStored event) must raise the
     * subscription's event count.
     */
    private List<String> stuckSubscriptions() throws Exception {
        List<String> stuck = new ArrayList<>();
        try {
            awaitSubscribersUp(Duration.ofSeconds(60));
        } catch (AssertionError e) {
            stuck.add(e.getMessage().lines().findFirst().orElse(""));
        }
        HttpClient http = HttpClient.newHttpClient();
        for (Engine e : engines) {
            long before = subscriberEvents(e);
            boolean flowing = false;
            for (int attempt = 0; attempt < 40 && !flowing; attempt++) {
                http.send(HttpRequest.newBuilder(URI.create("http://" + e.key() + "/v1/completions"))
                    .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
                        "{\"model\":\"qwen3\",\"max_tokens\":1,\"prompt\":" + freshTokens(e.index(), attempt) + "}")).build(),
                    HttpResponse.BodyHandlers.discarding());
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                while (!flowing && System.nanoTime() - deadline < 0) {
                    flowing = subscriberEvents(e) > before;
                    Thread.sleep(20);
                }
            }
            if (!flowing) {
                stuck.add(e.key() + ": up but its engine's events no longer reach the index (events stay " + before + ")");
            }
        }
        return stuck;
    }

    private long subscriberEvents(Engine e) throws Exception {
        for (JsonNode ep : adminGet("/admin/v1/inventory").path("rules").get(0).path("endpoints")) {
            if (ep.path("url").asText().endsWith(e.key())) {
                return ep.path("subscribers").get(0).path("events").asLong();
            }
        }
        throw new AssertionError("no endpoint " + e.key() + " in the inventory");
    }

    /** Two blocks of token ids no chat prompt contains, distinct per engine and attempt. */
    private static String freshTokens(int engine, int attempt) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 32; t++) {
            sb.append(t == 0 ? "" : ",").append(50_000 + (engine * 100 + attempt) * 32 + t);
        }
        return sb.append(']').toString();
    }

    private JsonNode adminGet(String path) throws IOException, InterruptedException {
        HttpResponse<String> r = admin.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + adminPort + path))
            .timeout(Duration.ofSeconds(10)).header("authorization", "Bearer " + ADMIN_TOKEN).build(),
            HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IOException("GET " + path + ": " + r.statusCode() + " " + r.body());
        }
        return JSON.readTree(r.body());
    }

    // ---- numbers --------------------------------------------------------------------------------------------

    /** RSS after warm-up: every sample within ±10 % of the first sample at or after the warm-up; null when it holds. */
    private String rssProblem() {
        long[] base = warmRss();
        if (base == null) {
            return "no RSS sample after the " + warmupSeconds + " s warm-up";
        }
        for (long[] s : rss) {
            if (s[0] >= base[0] && (s[1] < base[1] * 0.9 || s[1] > base[1] * 1.1)) {
                return "RSS not flat: " + s[1] + " KiB at t=" + s[0] + " s vs " + base[1] + " KiB at t=" + base[0]
                    + " s (ratio " + String.format(Locale.ROOT, "%.3f", (double) s[1] / base[1]) + "); samples " + rssSamples();
            }
        }
        return null;
    }

    private long[] warmRss() {
        for (long[] s : rss) {
            if (s[0] >= warmupSeconds && s[1] > 0) {
                return s;
            }
        }
        return null;
    }

    private String rssSamples() {
        StringBuilder sb = new StringBuilder();
        for (long[] s : rss) {
            sb.append(sb.isEmpty() ? "" : ", ").append(s[0]).append("s=").append(s[1] / 1024).append("M/").append(s[2]).append("ev");
        }
        return sb.toString();
    }

    private String report(long runNs, long slowStreams, long slowBytes, List<String> slowEnds, List<String> stuck,
                          JsonNode inventory) throws Exception {
        SoakLedger.Attribution a = ledger.attribute();
        long failed = a.onKilledEngine().size() + a.inKillWindowEngineUnknown().size() + a.unexplained().size();
        StringBuilder r = new StringBuilder("==== kvgate soak report ====\n");
        r.append(String.format(Locale.ROOT, "run %.1f min, %d engines, %d closed-loop clients%n", runNs / 6e10,
            engineCount, clientCount));
        r.append(String.format(Locale.ROOT, "requests: %d ok, %d failed (%.1f req/s)%n", ledger.ok(), failed,
            (ledger.ok() + failed) / (runNs / 1e9)));
        r.append("  failed in flight on the killed engine (by X-Kvgate-Route): ").append(a.onKilledEngine().size()).append('\n');
        r.append("  failed in a kill window, engine unknown (no response head): ").append(a.inKillWindowEngineUnknown().size()).append('\n');
        r.append("  failed beyond those: ").append(a.unexplained().size()).append('\n');
        for (SoakLedger.Outcome f : ledger.failures()) {
            r.append("    ").append(describe(f)).append('\n');
        }
        r.append("engine kills: ").append(ledger.kills().size()).append(", reloads applied: ").append(reloadsApplied.get())
            .append(", reloads failed: ").append(reloadFailures.size()).append('\n');
        long[] base = warmRss();
        long minAfter = Long.MAX_VALUE;
        long maxAfter = 0;
        for (long[] s : rss) {
            if (base != null && s[0] >= base[0] && s[1] > 0) {
                minAfter = Math.min(minAfter, s[1]);
                maxAfter = Math.max(maxAfter, s[1]);
            }
        }
        if (base != null) {
            r.append(String.format(Locale.ROOT, "gateway RSS after warm-up (t>=%ds): base %d KiB, min %d (%.3f), max %d (%.3f)%n",
                base[0], base[1], minAfter, (double) minAfter / base[1], maxAfter, (double) maxAfter / base[1]));
        }
        r.append("samples (t=RSS/KV events indexed so far): ").append(rssSamples()).append('\n');
        if (slowReader) {
            r.append("slow reader: ").append(slowStreams).append(" streams, ").append(slowBytes / 1024).append(" KiB read; ends ")
                .append(countEach(slowEnds)).append('\n');
        }
        r.append("subscriptions at the end: ").append(subscriberStates(true)).append('\n');
        r.append("stuck subscriptions: ").append(stuck.isEmpty() ? "none" : stuck).append('\n');
        JsonNode ingest = inventory.path("ingest");
        r.append("ingest: io_thread_errors ").append(ingest.path("io_thread_errors").asText()).append(", agent_errors ")
            .append(ingest.path("agent_errors").asText()).append(", last_agent_error ").append(ingest.path("last_agent_error").asText())
            .append('\n');
        String gwLog = gateway.logText();
        r.append("gateway log: ").append(gwLog.lines().count()).append(" lines, ")
            .append(gwLog.lines().filter(l -> l.contains("error") || l.contains("Error")).count()).append(" with 'error', ")
            .append(gwLog.lines().filter(l -> l.contains("OutOfMemory")).count()).append(" with 'OutOfMemory'\n");
        r.append("timeline:\n");
        for (String e : events) {
            r.append("  ").append(e).append('\n');
        }
        return r.toString();
    }

    private String describe(SoakLedger.Outcome o) {
        return String.format(Locale.ROOT, "t=%.1f..%.1fs endpoint=%s %s", (o.startNs() - t0) / 1e9, (o.endNs() - t0) / 1e9,
            o.endpoint(), o.detail());
    }

    private static String countEach(List<String> values) {
        java.util.Map<String, Integer> counts = new java.util.TreeMap<>();
        values.forEach(v -> counts.merge(v, 1, Integer::sum));
        return counts.toString();
    }

    private long sinceStart(long ns) {
        return TimeUnit.NANOSECONDS.toSeconds(ns - t0);
    }

    private void log(String line) {
        events.add(line);
        System.out.println("soak: " + line);
    }

    private static int intProperty(String name, int def, int min, int max) {
        String v = System.getProperty(name);
        if (v == null || v.isBlank()) {
            return def;
        }
        int n;
        try {
            n = Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + ": value '" + v + "' must be an integer in [" + min + ", " + max + "]");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(name + ": value " + n + " must be in [" + min + ", " + max + "]");
        }
        return n;
    }

    private static boolean boolProperty(String name) {
        String v = System.getProperty(name, "true").trim();
        if (!v.equals("true") && !v.equals("false")) {
            throw new IllegalArgumentException(name + ": value '" + v + "' must be true or false");
        }
        return v.equals("true");
    }
}
