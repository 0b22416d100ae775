package io.kvgate.tools.quality;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The quality tier (issue #35 item 4), part of {@code ./kvgate test}: short, seeded runs of the routing-quality matrix
 * (perf/routing_quality.py --quick --lockstep) on both engine implementations, so a change that costs cache hits or
 * makes replicas herd fails the build. Each run starts fresh engines (the independent indie engine or the simulator)
 * and gateways on loopback and compares the engines' own hit ratio with the oracle's placement of the same trace.
 *
 * <p>Why the verdicts do not depend on the host's speed: the harness drives in lockstep. Requests enter one at a
 * time in a fixed order, and before each the harness waits (polling, with a hard timeout) until the engines received
 * the last one and every gateway ingested every KV event the engines published; the indie engine holds a wave of
 * requests after prefill until all of them were routed, with zero prefill and decode costs, so the load bound sees
 * exactly that wave; the gateways route on their KV index and their own requests in flight (no scraped load, which
 * is a sample on a timer). What a decision sees no longer follows the host's speed (perf/results/quality-tier-2026-12-07.md:
 * five runs in a row at load 50-92: the same figures but for the three-gateway run's 0.797-0.803). What is left to
 * chance is kv_exact's draw among equal candidates (a per-process seed, by design: replicas must draw differently);
 * the thresholds keep margin for it, and worse policies fail them (round_robin, kv_exact with
 * {@code kv.min_match_fraction} 1 or 0: the same results file). The four runs start at once (their verdicts do not depend on timing, so sharing the CPU does
 * not change them); the tier's wall time is the slowest run's.
 *
 * <p>Needs Debian's {@code python3-msgpack python3-zmq python3-cbor2} for /usr/bin/python3 and HAProxy (the
 * three-gateway run); {@code .ci/setup} installs them, and the test says which one is missing.
 */
@Tag("quality")
@Timeout(value = 8, unit = TimeUnit.MINUTES)
class RoutingQualityTest {
    private static final Path REPO = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
    private static final Path PYTHON = Path.of("/usr/bin/python3");
    /** A run's bound: its gateways' JVMs start in ~60-90 s at load 45 on 2 cores; its traffic takes 40-60 s there. */
    private static final long RUN_SECONDS = 420;

    /** The runs, started together in {@link #startRuns}; each test reads its own. */
    private static final Map<String, Run> RUNS = new LinkedHashMap<>();

    @BeforeAll
    static void startRuns() throws Exception {
        assertTrue(Files.isExecutable(PYTHON), "/usr/bin/python3 missing: run .ci/setup (Debian package python3)");
        Process p = new ProcessBuilder(PYTHON.toString(), "-c", "import cbor2, msgpack, zmq").redirectErrorStream(true).start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "python3 did not start in 30 s");
        String err = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), "/usr/bin/python3 lacks a module the indie engine needs: run .ci/setup (Debian "
            + "packages python3-cbor2 python3-msgpack python3-zmq):\n" + err);
        assertTrue(Files.isExecutable(Path.of("/usr/sbin/haproxy")) || Files.isExecutable(Path.of("/usr/bin/haproxy")),
            "haproxy missing: run .ci/setup (Debian package haproxy); the three-gateway run balances through it");
        assertTrue(Files.isRegularFile(REPO.resolve("tools/target/kvgate-tools.jar")),
            "tools/target/kvgate-tools.jar missing: the quality tier runs after package");
        start("shared-prefix indie", "--engines", "indie", "--workloads", "shared-prefix", "--policies", "kv_exact",
            "--gateways", "1");
        start("shared-prefix sim", "--engines", "sim", "--workloads", "shared-prefix", "--policies", "kv_exact",
            "--gateways", "1");
        start("multi-turn 3 gateways", "--engines", "indie", "--workloads", "multi-turn", "--policies", "kv_exact",
            "--gateways", "3", "--set", "kv.spread=recent_work");
        start("multi-turn chwbl", "--engines", "indie", "--workloads", "multi-turn", "--policies", "chwbl",
            "--gateways", "1");
    }

    @AfterAll
    static void stopRuns() throws Exception {
        for (Run r : RUNS.values()) {
            r.stop();
        }
        RUNS.clear();
    }

    @Test
    void kvExactOnOneGatewayKeepsTheSharedPrefixHitsOnTheIndependentEngine() throws Exception {
        JsonNode row = single("shared-prefix indie");
        // Measured 0.89x the oracle (0.676 of 0.761) and 1.38x in every run: families whose first requests share a
        // wave of held requests lose some hits to blocks pinned by the others. round_robin: 0.32x; kv_exact with
        // kv.min_match_fraction 1 (any partial match unpins): see the results file.
        assertRow(row, KV_EXACT_SHARED_PREFIX);
        assertRouterScore(row, 0.90); // measured 0.95 (predicted 0.725 of reachable 0.761)
    }

    @Test
    void kvExactOnOneGatewayKeepsTheSharedPrefixHitsOnTheSimulator() throws Exception {
        JsonNode row = single("shared-prefix sim");
        assertRow(row, KV_EXACT_SHARED_PREFIX); // one request at a time (the simulator holds none): 1.00x, 1.00x
        assertRouterScore(row, 0.90);
    }

    /**
     * Replicas with {@code kv.spread: recent_work} (the setting for gateway replicas, docs/routing.md) place each new
     * conversation where the fewest new blocks landed lately, every replica's requests seen in the engines' KV events:
     * measured 1.00x the oracle and 1.00x the mean, 2 conversations on each engine (the goal is 1.15x; with
     * kv.spread least_loaded 1.50x, and 1.25x with recent_work's old 1 s window or its count started at a replica's
     * first decision: perf/results/routing-quality-2026-12-08-herding.md). One conversation too many is 1.50x here.
     */
    @Test
    void kvExactThroughThreeGatewaysKeepsConversationsWithoutHerding() throws Exception {
        assertRow(single("multi-turn 3 gateways"), new Bounds(0.97, 1.15));
    }

    @Test
    void chwblKeysWhatDiffersBetweenConversations() throws Exception {
        assertRow(single("multi-turn chwbl"), new Bounds(0.80, 2.25));
    }

    /** What kv_exact must reach on shared-prefix, on either engine. */
    static final Bounds KV_EXACT_SHARED_PREFIX = new Bounds(0.80, 1.6);

    /** A row passes when its hit ratio is at least {@code minOfOracle} of the oracle's and its busiest engine carries at
     * most {@code maxBusiest} times the mean. */
    record Bounds(double minOfOracle, double maxBusiest) {}

    /** No failed request, every planned request sent, the hit ratio and the busiest engine within {@code b}. */
    private static void assertRow(JsonNode row, Bounds b) {
        String what = row.get("engine").asText() + " " + row.get("workload").asText() + " through "
            + row.get("gateways").asInt() + " gateway(s) under " + row.get("policy").asText() + ": " + row;
        assertEquals(0, row.get("failures").asInt(), "failed requests, " + what);
        assertEquals(row.get("planned").asInt(), row.get("requests").asInt(), "not every planned request was sent, " + what);
        assertTrue(row.get("lockstep").asBoolean(), "not a lockstep run, " + what);
        assertTrue(row.get("fraction").asDouble() >= b.minOfOracle(),
            "hit ratio " + row.get("observed").asDouble() + " is below " + b.minOfOracle() + " of the oracle's "
                + row.get("oracle").asDouble() + ", " + what);
        assertTrue(row.get("busiest").asDouble() <= b.maxBusiest(),
            "the busiest engine carries " + row.get("busiest").asDouble() + "x the mean (bound " + b.maxBusiest() + "x), " + what);
    }

    /**
     * The router's own score from the gateway's accounting (docs/routing.md): the prompt share the chosen engines held
     * (predicted) at least {@code minOfReachable} of the share any engine held (reachable).
     */
    private static void assertRouterScore(JsonNode row, double minOfReachable) {
        double reachable = row.get("acc_reachable").asDouble();
        double predicted = row.get("acc_predicted").asDouble();
        assertTrue(reachable > 0, "no reachable prefix accounted: " + row);
        assertTrue(predicted >= minOfReachable * reachable, "the router chose engines holding " + predicted
            + " of the prompts where " + reachable + " was held (at least " + minOfReachable + "x wanted): " + row);
    }

    private static JsonNode single(String name) throws Exception {
        List<JsonNode> rows = RUNS.get(name).rows();
        assertEquals(1, rows.size(), name + ": one row expected, got " + rows);
        JsonNode r = rows.get(0);
        // The figures in the build log, passing or not: what perf/results/quality-tier-*.md records run by run.
        System.out.printf("quality tier, %s: hit %.3f oracle %.3f (%.3fx) busiest %.2fx predicted %.3f of reachable %.3f,"
                + " %d requests, %.0f s of traffic%n", name, r.get("observed").asDouble(), r.get("oracle").asDouble(),
            r.get("fraction").asDouble(), r.get("busiest").asDouble(), r.get("acc_predicted").asDouble(),
            r.get("acc_reachable").asDouble(), r.get("requests").asInt(), r.get("seconds").asDouble());
        return r;
    }

    private static void start(String name, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(PYTHON.toString(), "perf/routing_quality.py", "--quick", "--lockstep",
            "--seed", "35", "--deadline", "300"));
        cmd.addAll(List.of(args));
        RUNS.put(name, new Run(name, cmd));
    }

    /** One harness process, started at once; its rows read when a test asks. */
    private static final class Run {
        final String name;
        final List<String> cmd;
        final Path json;
        final Path log;
        final Process process;
        final long startedNs = System.nanoTime();

        Run(String name, List<String> base) throws IOException {
            this.name = name;
            this.json = Files.createTempFile("routing-quality", ".json");
            this.log = Files.createTempFile("routing-quality", ".log");
            this.cmd = new ArrayList<>(base);
            cmd.addAll(List.of("--json", json.toString()));
            this.process = new ProcessBuilder(cmd).directory(REPO.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        }

        List<JsonNode> rows() throws IOException, InterruptedException {
            long left = RUN_SECONDS - TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - startedNs);
            if (!process.waitFor(Math.max(1, left), TimeUnit.SECONDS)) {
                stop();
                throw new AssertionError(name + ": " + cmd + " did not finish in " + RUN_SECONDS + " s:\n" + Files.readString(log));
            }
            String out = Files.readString(log);
            assertEquals(0, process.exitValue(), name + ": " + cmd + " failed:\n" + out);
            List<JsonNode> rows = new ArrayList<>();
            new ObjectMapper().readTree(json.toFile()).forEach(rows::add);
            assertTrue(!rows.isEmpty(), name + ": no rows from " + cmd + ":\n" + out);
            return rows;
        }

        void stop() throws IOException, InterruptedException {
            if (process.isAlive()) {
                process.destroy(); // the harness stops the engines and gateways it started on SIGTERM
                if (!process.waitFor(20, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            }
            Files.deleteIfExists(json);
            Files.deleteIfExists(log);
        }
    }
}
