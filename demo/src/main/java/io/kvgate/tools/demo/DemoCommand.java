package io.kvgate.tools.demo;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.tools.bench.BenchConfig;
import io.kvgate.tools.bench.BenchRunner;
import io.kvgate.tools.bench.TargetReport;
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
import java.util.Locale;

/**
 * {@code ./kvgate demo}: four simulated vLLM engines (real Qwen3 tokenizer and chat template, paged prefix caches
 * too small for every prefix, real KV events over ZeroMQ) behind one gateway. The same shared-prefix chat workload
 * runs under each routing policy — the rule set is hot-swapped between runs, the engines' caches are restarted — and
 * the engines' own accounting says how much of the prompt they served from cache. Exits 0 when every run completed.
 */
public final class DemoCommand {
    static final int CACHE_BLOCKS = 220;
    private static final String[] POLICIES = {"round_robin", "least_outstanding", "chwbl", "kv_exact"};

    private DemoCommand() {}

    public static int run(String[] args) throws Exception {
        double seconds = 6;
        double rate = 24;
        int engines = 4;
        int replicas = 0;
        Path report = null;
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--help") || flag.equals("-h")) {
                System.out.println("usage: ./kvgate demo [--seconds S per policy (6)] [--rate R requests/s (24)] [--engines N (4)]"
                    + " [--report FILE.md (also writes FILE.svg)]\n"
                    + "       ./kvgate demo --replicas N [--engines E (4)] [--seconds S per run (6)] [--rate R (24)] [--report FILE.md]\n"
                    + "         N >= 2 gateway replicas behind a TCP round-robin balancer vs one gateway (kv_exact, session hash/table)");
                return 0;
            }
            if (!List.of("--seconds", "--rate", "--engines", "--replicas", "--report").contains(flag)) {
                System.err.println("demo: unknown option '" + flag + "' (see --help)");
                return 2;
            }
            if (i + 1 >= args.length) {
                System.err.println("demo: " + flag + " needs a value (see --help)");
                return 2;
            }
            String v = args[++i];
            try {
                switch (flag) {
                    case "--seconds" -> seconds = Double.parseDouble(v);
                    case "--rate" -> rate = Double.parseDouble(v);
                    case "--engines" -> engines = Integer.parseInt(v);
                    case "--replicas" -> replicas = Integer.parseInt(v);
                    default -> report = Path.of(v);
                }
            } catch (NumberFormatException e) {
                System.err.println("demo: " + flag + " " + v + " is not a number (see --help)");
                return 2;
            }
        }
        if (!(seconds > 0 && seconds <= 3600) || !(rate > 0 && rate <= 10_000)) {
            System.err.println("demo: --seconds must be in (0, 3600] and --rate in (0, 10000]");
            return 2;
        }
        Path home = Path.of(System.getProperty("kvgate.home", ".")).toAbsolutePath();
        // deploy/models in a source tree, models/ in the release tarball (kvgate dist)
        Path modelDir = Files.isDirectory(home.resolve("deploy/models")) ? home.resolve("deploy/models/qwen3")
            : home.resolve("models/qwen3");
        if (!Files.isDirectory(modelDir)) {
            System.err.println("demo: model directory " + modelDir + " not found (run from the repository or an unpacked release)");
            return 1;
        }
        if (replicas != 0) {
            if (replicas < 2 || replicas > 16) {
                System.err.println("demo: --replicas " + replicas + " must be in [2, 16] (the run compares them with one gateway)");
                return 2;
            }
            if (engines < 2 || engines > 32) {
                System.err.println("demo: --engines " + engines + " must be in [2, 32] with --replicas");
                return 2;
            }
            return ReplicasDemo.run(home, modelDir, replicas, engines, rate, seconds, report);
        }
        say("kvgate demo: %d simulated vLLM engines (Qwen3 tokenizer + chat template, 16-token blocks, " + CACHE_BLOCKS + "-block caches,"
            + " prefill 120 µs per uncached token), one gateway, a shared-prefix chat workload (12 prompt families"
            + " × ~700-token system prompts) at %.0f req/s for %.0f s per policy.%n", engines, rate, seconds);
        List<EngineSimulator> sims = new ArrayList<>();
        Gateway gw = null;
        try {
            StringBuilder endpoints = new StringBuilder();
            for (int i = 0; i < engines; i++) {
                int kvPort = freePort();
                EngineSimulator sim = EngineSimulator.start(engine(modelDir, i, CACHE_BLOCKS, 6).kvEvents("tcp://*:" + kvPort));
                sims.add(sim);
                endpoints.append("      - url: ").append(sim.baseUrl()).append('\n')
                    .append("        kv_events: tcp://127.0.0.1:").append(kvPort).append('\n');
            }
            // The bound for hit ratio: one engine holding the whole fleet's cache capacity (no placement can beat it).
            EngineSimulator oracle = EngineSimulator.start(engine(modelDir, 99, CACHE_BLOCKS * engines, 64 * engines));
            sims.add(oracle);
            gw = Gateway.start(GatewayConfig.parse(config("round_robin", endpoints.toString(), modelDir), home));
            String url = "http://127.0.0.1:" + gw.port();
            say("gateway on %s (admin %d); engines on %s%n%n", url, gw.adminPort(),
                sims.stream().map(s -> String.valueOf(s.port())).toList());
            showRender(url);

            List<String[]> rows = new ArrayList<>();
            List<double[]> plot = new ArrayList<>();
            double rrTtftP90 = 0;
            double bestHit = 0;
            boolean allOk = true;
            List<EngineSimulator> fleet = sims.subList(0, engines);
            String oracleEndpoint = "      - url: " + oracle.baseUrl() + "\n";
            for (String policy : RUNS) {
                boolean isOracle = policy.equals(ORACLE);
                List<EngineSimulator> measured = isOracle ? List.of(oracle) : fleet;
                gw.applyConfig(GatewayConfig.parse(config(isOracle ? "round_robin" : policy,
                    isOracle ? oracleEndpoint : endpoints.toString(), modelDir), home));
                resetCaches(gw, fleet);
                oracle.resetPrefixCache();
                long prompt0 = sum(measured, "prompt_tokens");
                long cached0 = sum(measured, "cached_tokens");
                BenchConfig.Builder load = BenchConfig.builder().target(policy + "=" + url).model("qwen3")
                    .workload(BenchConfig.Workload.SHARED_PREFIX).rate(rate).duration(seconds).stream(true).maxTokens(12)
                    .seed(7).progress(false).timeout(30);
                load.groups = 12;
                load.systemTokens = 520;
                load.questionTokens = 30;
                TargetReport t = BenchRunner.run(load.build()).first();
                long prompt = sum(measured, "prompt_tokens") - prompt0;
                long cached = sum(measured, "cached_tokens") - cached0;
                double hit = prompt == 0 ? 0 : 100.0 * cached / prompt;
                allOk &= t.errors == 0 && t.requests > 0;
                if (isOracle) {
                    bestHit = hit;
                    say("best placement possible for this capacity (one engine with the fleet's %d-block cache): %s %% of"
                        + " prompt tokens from cache (%d requests, %d errors %s)%n", CACHE_BLOCKS * engines, fmt(hit), t.requests,
                        t.errors, t.errorsByClass);
                    continue;
                }
                if (policy.equals("round_robin")) {
                    rrTtftP90 = t.ttftMs.p90();
                }
                rows.add(new String[] {policy, String.valueOf(t.requests), String.valueOf(t.errors), fmt(hit) + " %",
                    fmt(hit - bestHit), fmt(t.ttftMs.p50()), fmt(t.ttftMs.p90()), fmt(t.achievedRps),
                    rrTtftP90 > 0 ? fmt(rrTtftP90 / Math.max(0.001, t.ttftMs.p90())) + "×" : "-"});
                plot.add(new double[] {hit, t.ttftMs.p50(), t.ttftMs.p90(), t.achievedRps});
            }
            String table = table(rows);
            say("%n%s", table);
            if (report != null) {
                writeReport(report, table, rows, plot, engines, rate, seconds, bestHit);
                say("report written to %s (+ .svg)%n", report);
            }
            RuleStats kv = gw.router().stats("demo");
            say("%nkv_exact decisions: %d by longest cached prefix, %d fell back (%d had no match yet, %d over the load bound);"
                + " zero-hit watchdog fired %d times.%n", kv.tierCount(RuleStats.Tier.KV_EXACT), kv.tierCount(RuleStats.Tier.FALLBACK),
                kv.missCount(RuleStats.MissReason.NO_MATCH), kv.missCount(RuleStats.MissReason.OVER_LOAD_BOUND), kv.watchdogFirings());
            showExplain(url);
            say("%nWhat to look at next: ./kvgate serve --config deploy/examples/kv-exact.yaml, ./kvgate ctl inventory,"
                + " curl :8080/metrics, ./kvgate bench --help (docs/tools.md).%n");
            say(allOk ? "demo: OK%n" : "demo: some requests failed (see the errors column)%n");
            return allOk ? 0 : 1;
        } finally {
            if (gw != null) {
                gw.close(1_000);
            }
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }

    private static final String ORACLE = "oracle";
    private static final String[] RUNS = {ORACLE, "round_robin", "least_outstanding", "chwbl", "kv_exact"};

    static SimulatorConfig engine(Path modelDir, int seed, int cacheBlocks, int concurrency) {
        return new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("qwen3").modelDir(modelDir).seed(seed)
            .ttftMs(10).itlMs(4).prefillUsPerToken(120).maxConcurrency(concurrency).queueDepth(1024)
            .blockSize(16).cacheBlocks(cacheBlocks).hashSeed("0");
    }

    /** Cold caches for every run, and the gateway's inventory emptied by the engines' AllBlocksCleared events. */
    private static void resetCaches(Gateway gw, List<EngineSimulator> fleet) throws InterruptedException {
        for (EngineSimulator s : fleet) {
            s.resetPrefixCache();
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (gw.kv() != null && gw.kv().index().size() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(20); // the clear travels over ZeroMQ; bounded wait
        }
    }

    private static String table(List<String[]> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "%-18s %8s %6s %13s %9s %9s %9s %7s %10s%n", "policy", "requests", "errors",
            "engine cache", "vs best", "TTFT p50", "TTFT p90", "req/s", "p90 vs RR"));
        sb.append(String.format(Locale.ROOT, "%-18s %8s %6s %13s %9s %9s %9s %7s %10s%n", "", "", "", "hit (tokens)", "points",
            "ms", "ms", "", ""));
        for (String[] r : rows) {
            sb.append(String.format(Locale.ROOT, "%-18s %8s %6s %13s %9s %9s %9s %7s %10s%n", (Object[]) r));
        }
        return sb.toString();
    }

    private static void writeReport(Path md, String table, List<String[]> rows, List<double[]> plot, int engines, double rate,
                                    double seconds, double bestHit) throws IOException {
        String base = md.getFileName().toString().replaceFirst("\\.md$", "");
        Path svg = md.resolveSibling(base + ".svg");
        StringBuilder sb = new StringBuilder();
        sb.append("# Routing policies on a simulated fleet\n\n");
        sb.append("Machine: ").append(Machine.describe()).append("  \nDate: ").append(java.time.LocalDate.now()).append("\n\n");
        sb.append("Command: `./kvgate demo --engines ").append(engines).append(" --rate ").append(rate).append(" --seconds ")
            .append(seconds).append(" --report ").append(md).append("`\n\n");
        sb.append("Fleet: ").append(engines).append(" simulated vLLM engines (Qwen3 tokenizer and chat template, 16-token blocks, ")
            .append(CACHE_BLOCKS).append("-block prefix caches with LRU eviction, 6 concurrent requests each, TTFT = 10 ms + ")
            .append("120 µs per uncached prompt token, ITL 4 ms). Workload: shared-prefix chat, 12 prompt families, open loop ")
            .append("(Poisson), streamed, 12 output tokens. Hit ratio = Σ cached_tokens / Σ prompt_tokens as the engines ")
            .append("report them. Best placement possible = the same workload on one engine with the whole fleet's cache (")
            .append(CACHE_BLOCKS * engines).append(" blocks): ").append(fmt(bestHit)).append(" %.\n\n");
        sb.append("```\n").append(table).append("```\n\n![policies](").append(svg.getFileName()).append(")\n");
        Files.createDirectories(md.toAbsolutePath().getParent());
        Files.writeString(md, sb.toString());
        Files.writeString(svg, Bars.svg(rows, plot, bestHit));
    }

    private static String config(String policy, String endpoints, Path modelDir) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            health: {interval_ms: 1000}
            rules:
              - name: demo
                models: [qwen3]
                engine: vllm
                policy: %s
                tokenizer: %s
                block_size: 16
                hash_seed: "0"
                explain: true
                chwbl: {prefix_blocks: 8, load_factor: 0.5}
                kv: {load_cap_factor: 2.0, speculative_ttl_ms: 2000}
                endpoints:
            %s""".formatted(policy, modelDir, endpoints);
    }

    private static void showRender(String url) throws IOException, InterruptedException {
        String body = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
            + "{\"role\":\"user\",\"content\":\"Name three prime numbers.\"}]}";
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url + "/kvgate/v1/chat/completions/render"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        String s = r.body();
        say("What the engine will see (POST /kvgate/v1/chat/completions/render, no engine contacted):%n  %s%n",
            s.length() > 240 ? s.substring(0, 240) + "…" : s);
    }

    private static void showExplain(String url) throws IOException, InterruptedException {
        String body = "{\"model\":\"qwen3\",\"max_tokens\":4,\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
            + "{\"role\":\"user\",\"content\":\"Name three prime numbers.\"}]}";
        HttpClient c = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        HttpResponse<String> r = null;
        for (int i = 0; i < 2; i++) { // the second request finds the first one's blocks
            r = c.send(HttpRequest.newBuilder(URI.create(url + "/v1/chat/completions")).header("content-type", "application/json")
                .header("x-kvgate-explain", "1").POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        }
        say("%nA decision explained (the demo rule sets explain: true → X-Kvgate-Route on every answer):%n  %s%n",
            r.headers().firstValue("x-kvgate-route").orElse("(none)"));
    }

    static long sum(List<EngineSimulator> sims, String counter) {
        long s = 0;
        for (EngineSimulator e : sims) {
            s += e.stats().get(counter);
        }
        return s;
    }

    /** A port below the kernel's ephemeral range (a released ephemeral port may be reused by any outgoing connect). */
    static int freePort() throws IOException {
        for (int attempt = 0; attempt < 500; attempt++) {
            int port = 20_000 + java.util.concurrent.ThreadLocalRandom.current().nextInt(12_000);
            try (ServerSocket s = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress())) {
                return s.getLocalPort();
            } catch (IOException taken) {
                // try another
            }
        }
        throw new IOException("no free port below 32000 on loopback");
    }

    static String fmt(double v) {
        return String.format(Locale.ROOT, v >= 100 ? "%.0f" : "%.1f", v);
    }

    static void say(String fmt, Object... args) {
        System.out.printf(Locale.ROOT, fmt, args);
        System.out.flush();
    }
}
