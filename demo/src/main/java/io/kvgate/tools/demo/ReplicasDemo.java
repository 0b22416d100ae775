package io.kvgate.tools.demo;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.bench.BenchConfig;
import io.kvgate.tools.bench.BenchRunner;
import io.kvgate.tools.bench.TargetReport;
import io.kvgate.tools.sim.EngineSimulator;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * {@code ./kvgate demo --replicas N}: many gateways that route as one (issue #14 item 6). The simulated fleet of
 * {@link DemoCommand}, N gateway replicas started with the same configuration and nothing shared between them, and
 * a TCP round-robin balancer ({@link TcpBalancer}) in front of them, against one gateway behind the same balancer.
 * The same workloads run through both: shared-prefix chat under {@code kv_exact} (every replica holds the same
 * inventory from the engines' events) and multi-turn conversations under {@code session} affinity, by consistent
 * hashing ({@code session.mode: hash}, every replica picks the same engine) and by each gateway's own pin table
 * ({@code mode: table}, what replicas did before). The engines' own counters say how much of the prompt they served
 * from cache and how evenly the requests were spread; a probe sends conversations whose every turn goes through the
 * next replica and counts those that stayed on one engine. Exits 0 when every run completed without errors.
 */
final class ReplicasDemo {
    private static final int CONVERSATIONS = 12;
    private static final int PROBE_TURNS = 3;

    private record Run(String workload, String policy, String mode, boolean replicated) {
        String label() {
            return workload + " / " + policy + (mode == null ? "" : " " + mode);
        }
    }

    private ReplicasDemo() {}

    static int run(Path home, Path modelDir, int replicas, int engines, double rate, double seconds, Path report) throws Exception {
        DemoCommand.say("kvgate demo --replicas %d: %d simulated vLLM engines (Qwen3 tokenizer + chat template, 16-token blocks,"
            + " %d-block caches, prefill 120 µs per uncached token); %d gateway replicas with the same configuration and no"
            + " shared state behind a TCP round-robin balancer (ours, on loopback: what HAProxy in mode tcp does), compared"
            + " with 1 gateway behind the same balancer. Each gateway's load estimate is engine-reported (load.* defaults: the"
            + " engines' /metrics every 250 ms plus its own requests since). %.0f req/s for %.0f s per run.%n", replicas, engines,
            DemoCommand.CACHE_BLOCKS, replicas, rate, seconds);
        DemoCommand.say("(%d engines keep the demo fast; the issue's numbers use 8 engines and real HAProxy:"
            + " perf/replicas-routing.sh.)%n%n", engines);
        List<EngineSimulator> sims = new ArrayList<>();
        List<Gateway> gateways = new ArrayList<>();
        TcpBalancer one = null;
        TcpBalancer many = null;
        try {
            StringBuilder endpoints = new StringBuilder();
            for (int i = 0; i < engines; i++) {
                int kvPort = DemoCommand.freePort();
                EngineSimulator sim = EngineSimulator.start(DemoCommand.engine(modelDir, i, DemoCommand.CACHE_BLOCKS, 6)
                    .kvEvents("tcp://*:" + kvPort));
                sims.add(sim);
                endpoints.append("      - url: ").append(sim.baseUrl()).append('\n')
                    .append("        kv_events: tcp://127.0.0.1:").append(kvPort).append('\n');
            }
            String eps = endpoints.toString();
            List<InetSocketAddress> addresses = new ArrayList<>();
            for (int r = 0; r < replicas; r++) {
                Gateway gw = Gateway.start(GatewayConfig.parse(config("kv_exact", null, eps, modelDir), home));
                gateways.add(gw);
                addresses.add(new InetSocketAddress(InetAddress.getLoopbackAddress(), gw.port()));
            }
            // The single gateway is replica 0 alone: the same process, the same extra hop through a balancer.
            one = new TcpBalancer(addresses.subList(0, 1), 4096);
            many = new TcpBalancer(addresses, 4096);
            DemoCommand.say("gateways on %s; balancer for 1 gateway on %d, for %d replicas on %d; engines on %s%n%n",
                gateways.stream().map(g -> String.valueOf(g.port())).toList(), one.port(), replicas, many.port(),
                sims.stream().map(s -> String.valueOf(s.port())).toList());

            List<Run> runs = List.of(
                new Run("shared-prefix", "kv_exact", null, false), new Run("shared-prefix", "kv_exact", null, true),
                new Run("multi-turn", "session", "hash", false), new Run("multi-turn", "session", "hash", true),
                new Run("multi-turn", "session", "table", true));
            List<String[]> rows = new ArrayList<>();
            List<String> probes = new ArrayList<>();
            boolean allOk = true;
            for (Run run : runs) {
                for (Gateway gw : gateways) {
                    gw.applyConfig(GatewayConfig.parse(config(run.policy(), run.mode(), eps, modelDir), home));
                }
                resetCaches(gateways, sims);
                long[] req0 = counters(sims, "generations_started");
                long prompt0 = DemoCommand.sum(sims, "prompt_tokens");
                long cached0 = DemoCommand.sum(sims, "cached_tokens");
                TcpBalancer lb = run.replicated() ? many : one;
                BenchConfig.Builder load = BenchConfig.builder().target(run.label().replace(' ', '_').replace('/', '-')
                        + "=http://127.0.0.1:" + lb.port()).model("qwen3").rate(rate).duration(seconds).stream(true)
                    .maxTokens(12).seed(7).progress(false).timeout(30);
                if (run.workload().equals("shared-prefix")) {
                    load.workload(BenchConfig.Workload.SHARED_PREFIX);
                    load.groups = 12;
                    load.systemTokens = 520;
                    load.questionTokens = 30;
                } else {
                    load.workload(BenchConfig.Workload.MULTI_TURN);
                    load.conversations = 24;
                    load.turns = 6;
                    load.systemTokens = 300;
                    load.questionTokens = 30;
                    load.conversationUser = true;
                }
                TargetReport t = BenchRunner.run(load.build()).first();
                long[] served = counters(sims, "generations_started");
                long total = 0;
                long busiest = 0;
                for (int i = 0; i < served.length; i++) {
                    served[i] -= req0[i];
                    total += served[i];
                    busiest = Math.max(busiest, served[i]);
                }
                long prompt = DemoCommand.sum(sims, "prompt_tokens") - prompt0;
                long cached = DemoCommand.sum(sims, "cached_tokens") - cached0;
                double hit = prompt == 0 ? 0 : 100.0 * cached / prompt;
                double skew = total == 0 ? 0 : (double) busiest * sims.size() / total;
                allOk &= t.errors == 0 && t.requests > 0;
                rows.add(new String[] {run.label(), run.replicated() ? replicas + " (RR)" : "1", String.valueOf(t.requests),
                    String.valueOf(t.errors), DemoCommand.fmt(hit) + " %", String.format(Locale.ROOT, "%.2f", skew),
                    t.ttftMs == null ? "-" : DemoCommand.fmt(t.ttftMs.p50()), t.ttftMs == null ? "-" : DemoCommand.fmt(t.ttftMs.p90()),
                    Arrays.toString(served)});
                if (run.replicated() && run.mode() != null) {
                    probes.add(String.format(Locale.ROOT, "  session.mode %-6s %d/%d", run.mode() + ":",
                        probe(many.port(), run.mode()), CONVERSATIONS));
                }
            }
            String table = table(rows);
            DemoCommand.say("%s%n", table);
            DemoCommand.say("busiest/mean = the busiest engine's requests over the mean (1.00 = even); requests per engine as"
                + " the engines counted them.%n");
            DemoCommand.say("%nConversations whose %d turns, each on a new connection through the next replica, all landed on"
                + " one engine:%n%s%n", PROBE_TURNS, String.join("\n", probes));
            DemoCommand.say("(hash: every replica computes the same engine from the session key; table: each replica pins a"
                + " conversation where its own fallback first sent it.)%n");
            DemoCommand.say("balancer: connections per replica %s%n", Arrays.toString(many.connectionsPerBackend()));
            if (report != null) {
                writeReport(report, table, String.join("\n", probes), replicas, engines, rate, seconds);
                DemoCommand.say("report written to %s%n", report);
            }
            DemoCommand.say(allOk ? "demo: OK%n" : "demo: some requests failed (see the errors column)%n");
            return allOk ? 0 : 1;
        } finally {
            if (many != null) {
                many.close();
            }
            if (one != null) {
                one.close();
            }
            for (Gateway gw : gateways) {
                gw.close(1_000);
            }
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }

    /**
     * {@link #CONVERSATIONS} conversations of {@link #PROBE_TURNS} turns, every turn on a new connection through
     * the replicas' balancer (so through the next replica): how many stayed on one engine. The rule explains its
     * decisions, so each answer names the engine that served it.
     */
    private static int probe(int port, String mode) throws IOException {
        int sticky = 0;
        for (int c = 0; c < CONVERSATIONS; c++) {
            Set<String> engines = new HashSet<>();
            for (int t = 0; t < PROBE_TURNS; t++) {
                engines.add(servedBy(port, "probe-" + mode + "-" + c, t));
            }
            sticky += engines.size() == 1 ? 1 : 0;
        }
        return sticky;
    }

    /** One request on its own connection ({@code Connection: close}); the engine from {@code X-Kvgate-Route}. */
    private static String servedBy(int port, String user, int turn) throws IOException {
        String body = "{\"model\":\"qwen3\",\"user\":\"" + user + "\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\","
            + "\"content\":\"Turn " + turn + " of " + user + ".\"}]}";
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setSoTimeout(20_000);
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Connection: close\r\nContent-Length: " + bytes.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(bytes);
            out.flush();
            InputStream in = s.getInputStream();
            String response = new String(in.readNBytes(1 << 20), StandardCharsets.UTF_8);
            int at = response.toLowerCase(Locale.ROOT).indexOf("\r\nx-kvgate-route: endpoint=");
            if (!response.startsWith("HTTP/1.1 200") || at < 0) {
                throw new IOException("probe request failed: " + response.lines().findFirst().orElse("(no answer)"));
            }
            int from = at + "\r\nx-kvgate-route: endpoint=".length();
            return response.substring(from, response.indexOf(';', from));
        }
    }

    private static long[] counters(List<EngineSimulator> sims, String name) {
        long[] v = new long[sims.size()];
        for (int i = 0; i < v.length; i++) {
            v[i] = sims.get(i).stats().get(name);
        }
        return v;
    }

    /** Cold caches for every run; every gateway's inventory emptied by the engines' AllBlocksCleared events. */
    private static void resetCaches(List<Gateway> gateways, List<EngineSimulator> sims) throws InterruptedException {
        for (EngineSimulator s : sims) {
            s.resetPrefixCache();
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        for (Gateway gw : gateways) {
            while (gw.kv() != null && gw.kv().index().size() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(20); // the clear travels over ZeroMQ; bounded wait
            }
        }
    }

    static String config(String policy, String sessionMode, String endpoints, Path modelDir) {
        String session = sessionMode == null ? "" : "    session: {mode: " + sessionMode + "}\n";
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: "off"
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
                kv: {load_cap_factor: 2.0, speculative_ttl_ms: 2000}
            %s    endpoints:
            %s""".formatted(policy, modelDir, session, endpoints);
    }

    private static String table(List<String[]> rows) {
        String f = "%-30s %9s %8s %6s %13s %9s %9s %9s  %s%n";
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, f, "workload / policy", "gateways", "requests", "errors", "engine cache",
            "busiest/", "TTFT p50", "TTFT p90", "requests per engine"));
        sb.append(String.format(Locale.ROOT, f, "", "", "", "", "hit (tokens)", "mean", "ms", "ms", ""));
        for (String[] r : rows) {
            sb.append(String.format(Locale.ROOT, f, (Object[]) r));
        }
        return sb.toString();
    }

    private static void writeReport(Path md, String table, String probes, int replicas, int engines, double rate,
                                    double seconds) throws IOException {
        StringBuilder sb = new StringBuilder();
        sb.append("# Gateway replicas behind an L4 round robin vs one gateway\n\n");
        sb.append("Machine: ").append(Machine.describe()).append("  \nDate: ").append(java.time.LocalDate.now()).append("\n\n");
        sb.append("Command: `./kvgate demo --replicas ").append(replicas).append(" --engines ").append(engines).append(" --rate ")
            .append(rate).append(" --seconds ").append(seconds).append(" --report ").append(md).append("`\n\n");
        sb.append("```\n").append(table).append("```\n\nConversations whose turns, each through the next replica, all landed on"
            + " one engine:\n\n```\n").append(probes).append("\n```\n");
        Path parent = md.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Files.writeString(md, sb.toString());
    }
}
