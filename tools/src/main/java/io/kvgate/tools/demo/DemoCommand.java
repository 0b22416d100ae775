package io.kvgate.tools.demo;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.GatewayLauncher;
import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.tools.bench.BenchConfig;
import io.kvgate.tools.bench.BenchReport;
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
    private static final int ENGINES = 4;
    private static final String[] POLICIES = {"round_robin", "least_outstanding", "chwbl", "kv_exact"};

    private DemoCommand() {}

    public static int run(String[] args) throws Exception {
        double seconds = 6;
        double rate = 24;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--seconds" -> seconds = Double.parseDouble(args[++i]);
                case "--rate" -> rate = Double.parseDouble(args[++i]);
                case "--help", "-h" -> {
                    System.out.println("usage: ./kvgate demo [--seconds S per policy (6)] [--rate R requests/s (24)]");
                    return 0;
                }
                default -> {
                    System.err.println("demo: unknown option '" + args[i] + "' (see --help)");
                    return 2;
                }
            }
        }
        Path home = Path.of(System.getProperty("kvgate.home", ".")).toAbsolutePath();
        Path modelDir = home.resolve("deploy/models/qwen3");
        if (!Files.isDirectory(modelDir)) {
            System.err.println("demo: model directory " + modelDir + " not found (run from the repository)");
            return 1;
        }
        say("kvgate demo: %d simulated vLLM engines (Qwen3 tokenizer + chat template, 16-token blocks, 220-block caches,"
            + " prefill 120 µs per uncached token), one gateway, a shared-prefix chat workload (12 prompt families"
            + " × ~700-token system prompts) at %.0f req/s for %.0f s per policy.%n", ENGINES, rate, seconds);
        List<EngineSimulator> sims = new ArrayList<>();
        Gateway gw = null;
        try {
            StringBuilder endpoints = new StringBuilder();
            for (int i = 0; i < ENGINES; i++) {
                int kvPort = freePort();
                EngineSimulator sim = EngineSimulator.start(new SimulatorConfig()
                    .dialect(SimulatorConfig.Dialect.VLLM).model("qwen3").modelDir(modelDir).seed(i)
                    .ttftMs(10).itlMs(4).prefillUsPerToken(120).maxConcurrency(6).queueDepth(512)
                    .blockSize(16).cacheBlocks(220).hashSeed("0")
                    .kvEvents("tcp://*:" + kvPort));
                sims.add(sim);
                endpoints.append("      - url: ").append(sim.baseUrl()).append('\n')
                    .append("        kv_events: tcp://127.0.0.1:").append(kvPort).append('\n');
            }
            gw = GatewayLauncher.start(GatewayConfig.parse(config("round_robin", endpoints.toString(), modelDir), home));
            String url = "http://127.0.0.1:" + gw.port();
            say("gateway on %s (admin %d); engines on %s%n%n", url, gw.adminPort(),
                sims.stream().map(s -> String.valueOf(s.port())).toList());
            showRender(url);

            List<String[]> rows = new ArrayList<>();
            double rrTtftP90 = 0;
            boolean allOk = true;
            for (String policy : POLICIES) {
                gw.applyConfig(GatewayConfig.parse(config(policy, endpoints.toString(), modelDir), home));
                for (EngineSimulator s : sims) {
                    s.restart(); // cold caches for every policy: the comparison starts from the same state
                }
                Thread.sleep(300); // let the restart's events reach the gateway (seq reset clears the inventory)
                long prompt0 = sum(sims, "prompt_tokens");
                long cached0 = sum(sims, "cached_tokens");
                BenchConfig.Builder load = BenchConfig.builder().target(policy + "=" + url).model("qwen3")
                    .workload(BenchConfig.Workload.SHARED_PREFIX).rate(rate).duration(seconds).stream(true).maxTokens(12)
                    .seed(7).progress(false).timeout(30);
                load.groups = 12;
                load.systemTokens = 520;
                load.questionTokens = 30;
                BenchReport report = BenchRunner.run(load.build());
                TargetReport t = report.first();
                long prompt = sum(sims, "prompt_tokens") - prompt0;
                long cached = sum(sims, "cached_tokens") - cached0;
                double hit = prompt == 0 ? 0 : 100.0 * cached / prompt;
                if (policy.equals("round_robin")) {
                    rrTtftP90 = t.ttftMs.p90();
                }
                allOk &= t.errors == 0 && t.requests > 0;
                rows.add(new String[] {policy, String.valueOf(t.requests), String.valueOf(t.errors), fmt(hit) + " %",
                    fmt(t.ttftMs.p50()), fmt(t.ttftMs.p90()), fmt(t.achievedRps),
                    rrTtftP90 > 0 ? fmt(rrTtftP90 / Math.max(0.001, t.ttftMs.p90())) + "×" : "-"});
            }
            say("%n%-18s %8s %6s %14s %10s %10s %9s %12s%n", "policy", "requests", "errors", "engine cache", "TTFT p50",
                "TTFT p90", "req/s", "p90 vs RR");
            say("%-18s %8s %6s %14s %10s %10s %9s %12s%n", "", "", "", "hit (tokens)", "ms", "ms", "", "");
            for (String[] r : rows) {
                say("%-18s %8s %6s %14s %10s %10s %9s %12s%n", (Object[]) r);
            }
            RuleStats kv = RuleStats.of("demo");
            say("%nkv_exact decisions: %d by longest cached prefix, %d fell back (%d had no match yet, %d over the load bound);"
                + " zero-hit watchdog fired %d times.%n", kv.tierCount("kv_exact"), kv.tierCount("fallback"), kv.missCount("no_match"),
                kv.missCount("over_load_bound"), kv.watchdogFirings());
            showExplain(url);
            say("%nWhat to look at next: ./kvgate serve --config deploy/examples/kv-exact.yaml, ./kvgate ctl inventory,"
                + " curl :8080/metrics, ./kvgate bench --help (README.md).%n");
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
                chwbl: {prefix_blocks: 8, load_factor: 0.5}
                kv: {load_cap_factor: 2.0, speculative_ttl_ms: 2000}
                endpoints:
            %s""".formatted(policy, modelDir, endpoints);
    }

    private static void showRender(String url) throws IOException, InterruptedException {
        String body = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
            + "{\"role\":\"user\",\"content\":\"Name three prime numbers.\"}]}";
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url + "/v1/chat/completions/render"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        String s = r.body();
        say("What the engine will see (POST /v1/chat/completions/render, no engine contacted):%n  %s%n",
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
        say("%nA decision explained (X-Kvgate-Explain: 1 → X-Kvgate-Route):%n  %s%n",
            r.headers().firstValue("x-kvgate-route").orElse("(none)"));
    }

    private static long sum(List<EngineSimulator> sims, String counter) {
        long s = 0;
        for (EngineSimulator e : sims) {
            s += e.stats().get(counter);
        }
        return s;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static String fmt(double v) {
        return String.format(Locale.ROOT, v >= 100 ? "%.0f" : "%.1f", v);
    }

    private static void say(String fmt, Object... args) {
        System.out.printf(Locale.ROOT, fmt, args);
        System.out.flush();
    }
}
