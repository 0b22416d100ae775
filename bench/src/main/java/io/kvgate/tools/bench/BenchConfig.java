package io.kvgate.tools.bench;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Everything one {@code kvgate bench} run needs, validated once by {@link Builder#build()} with errors that name the
 * flag, the value and the rule. Immutable; the CLI ({@link BenchMain}) and the programmatic API
 * ({@link BenchRunner#run(BenchConfig)}) share it.
 *
 * @param targets          servers, loaded one after the other with the same workload (more than one = compare)
 * @param model            the {@code model} field of every request
 * @param workload         which prompts to send
 * @param route            chat ({@code /v1/chat/completions}) or completions ({@code /v1/completions})
 * @param ratePerS         open loop: offered requests per second
 * @param durationS        measured window in seconds (after warmup)
 * @param warmupS          seconds of identical load before the measured window; those requests are not recorded
 * @param arrival          constant or Poisson gaps
 * @param stream           request SSE streaming (and {@code stream_options.include_usage})
 * @param maxTokens        {@code max_tokens} of every request
 * @param ignoreEos        add {@code "ignore_eos": true} (vLLM/SGLang) so every request decodes maxTokens
 * @param concurrencyLimit open loop: most connections (= requests in flight) at once
 * @param seed             seed of the arrival timeline and of every prompt
 * @param out              JSON report path, or null; .hgrm and .svg files are written beside it
 * @param payloadBytes     fixed workload: exact request body size in bytes
 * @param groups           shared-prefix: number of system prompts
 * @param systemTokens     shared-prefix and multi-turn: words in each system prompt
 * @param questionTokens   shared-prefix: words in each question; multi-turn: words in each user turn
 * @param turns            multi-turn: turns per conversation before it restarts
 * @param conversations    multi-turn: conversations in flight (each has at most one request outstanding)
 * @param randomMinTokens  random workload: fewest prompt words
 * @param randomMaxTokens  random workload: most prompt words
 * @param randomDistribution random workload: how prompt lengths are drawn in [min, max] (uniform, or log-uniform:
 *                         as many prompts per decade, so mostly short ones and a few very long ones)
 * @param conversationUser multi-turn: send each conversation's id as the request's {@code user} field (the
 *                         session key of session-affine routing)
 * @param engineMetrics    engine base URLs whose Prometheus {@code /metrics} counters (finished requests, prompt and
 *                         cached tokens) are read when the measured window starts and after the run: each
 *                         engine's share of the requests and its own cache hit ratio ({@link EngineShares})
 * @param gatewayMetrics   kvgate base URLs (client or admin listener; each replica behind a balancer) whose
 *                         routing-quality accounting counters are read when the measured window starts and after
 *                         the run, summed ({@link GatewayAccounting})
 * @param tokenIds         prompts as token-id arrays (completions route only)
 * @param closedLoop       saturation mode: each connection sends its next request when the previous one finished
 * @param connections      closed loop: number of connections
 * @param headers          extra request headers, {@code {name, value}} pairs
 * @param apiKey           sent as {@code Authorization: Bearer ...}, or null
 * @param timeoutS         per-request timeout from send, seconds
 * @param drainS           after the last arrival, how long to wait for outstanding requests
 * @param lagThresholdMs   a send later than this behind its intended time counts as late
 * @param maxBacklog       open loop: most arrivals waiting for a connection before new ones are dropped (unsent)
 * @param progress         print the live progress line on stderr every second
 * @param transport        auto, epoll or nio
 */
public record BenchConfig(
    List<BenchTarget> targets, String model, Workload workload, Route route, double ratePerS, double durationS,
    double warmupS, ArrivalScheduler.Arrival arrival, boolean stream, int maxTokens, boolean ignoreEos,
    int concurrencyLimit, long seed, Path out, int payloadBytes, int groups, int systemTokens, int questionTokens,
    int turns, int conversations, int randomMinTokens, int randomMaxTokens, boolean tokenIds, boolean closedLoop,
    int connections, List<String[]> headers, String apiKey, double timeoutS, double drainS, double lagThresholdMs,
    int maxBacklog, boolean progress, Transport transport, Distribution randomDistribution, boolean conversationUser,
    List<String> engineMetrics, List<String> gatewayMetrics) {

    public enum Workload { FIXED, SHARED_PREFIX, MULTI_TURN, RANDOM }

    public enum Distribution { UNIFORM, LOG_UNIFORM }

    public enum Route { CHAT, COMPLETIONS }

    public enum Transport { AUTO, EPOLL, NIO }

    /** The name used on the command line and in reports ({@code shared-prefix}). */
    public static String cliName(Enum<?> e) {
        return e.name().toLowerCase(java.util.Locale.ROOT).replace('_', '-');
    }

    public boolean compare() {
        return targets.size() > 1;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Mutable builder with the CLI defaults; {@link #build()} validates. */
    public static final class Builder {
        public final List<BenchTarget> targets = new ArrayList<>();
        public String model;
        public Workload workload = Workload.FIXED;
        public Route route = Route.CHAT;
        public double ratePerS = -1;
        public double durationS = 10;
        public double warmupS = 0;
        public ArrivalScheduler.Arrival arrival = ArrivalScheduler.Arrival.POISSON;
        public boolean stream;
        public int maxTokens = 128;
        public boolean ignoreEos;
        public int concurrencyLimit = 1024;
        public long seed = 42;
        public Path out;
        public int payloadBytes = 1024;
        public int groups = 8;
        public int systemTokens = 1000;
        public int questionTokens = 50;
        public int turns = 5;
        public int conversations = 32;
        public int randomMinTokens = 16;
        public int randomMaxTokens = 1024;
        public boolean tokenIds;
        public boolean closedLoop;
        public int connections = 64;
        public final List<String[]> headers = new ArrayList<>();
        public String apiKey;
        public double timeoutS = 60;
        public double drainS = -1;
        public double lagThresholdMs = 10;
        public int maxBacklog = 100_000;
        public boolean progress = true;
        public Transport transport = Transport.AUTO;
        public Distribution randomDistribution = Distribution.UNIFORM;
        public boolean conversationUser;
        public final List<String> engineMetrics = new ArrayList<>();
        public final List<String> gatewayMetrics = new ArrayList<>();

        public Builder target(String spec) {
            BenchTarget t = BenchTarget.parse(spec, "target");
            if (!spec.contains("=") || t.label().equals("target")) {
                // Default label: host-port, made unique by position when two targets share it.
                String label = (t.host() + "-" + t.port()).replaceAll("[^A-Za-z0-9._-]", "_");
                for (BenchTarget other : targets) {
                    if (other.label().equals(label)) {
                        label = label + "-" + (targets.size() + 1);
                        break;
                    }
                }
                t = new BenchTarget(label, t.url(), t.host(), t.port(), t.basePath());
            }
            targets.add(t);
            return this;
        }

        public Builder model(String v) { model = v; return this; }
        public Builder workload(Workload v) { workload = v; return this; }
        public Builder route(Route v) { route = v; return this; }
        public Builder rate(double v) { ratePerS = v; return this; }
        public Builder duration(double v) { durationS = v; return this; }
        public Builder warmup(double v) { warmupS = v; return this; }
        public Builder arrival(ArrivalScheduler.Arrival v) { arrival = v; return this; }
        public Builder stream(boolean v) { stream = v; return this; }
        public Builder maxTokens(int v) { maxTokens = v; return this; }
        public Builder concurrencyLimit(int v) { concurrencyLimit = v; return this; }
        public Builder seed(long v) { seed = v; return this; }
        public Builder out(Path v) { out = v; return this; }
        public Builder payloadBytes(int v) { payloadBytes = v; return this; }
        public Builder closedLoop(int conns) { closedLoop = true; connections = conns; return this; }
        public Builder timeout(double v) { timeoutS = v; return this; }
        public Builder drain(double v) { drainS = v; return this; }
        public Builder progress(boolean v) { progress = v; return this; }
        public Builder header(String name, String value) { headers.add(new String[] {name, value}); return this; }
        public Builder engineMetrics(String url) { engineMetrics.add(url); return this; }
        public Builder gatewayMetrics(String url) { gatewayMetrics.add(url); return this; }

        public BenchConfig build() {
            if (targets.isEmpty()) {
                throw new IllegalArgumentException("--target is required (http://host:port, or label=URL; repeat to compare)");
            }
            java.util.Set<String> labels = new java.util.HashSet<>();
            List<BenchTarget> relabelled = new ArrayList<>();
            for (int i = 0; i < targets.size(); i++) {
                BenchTarget t = targets.get(i);
                if (!labels.add(t.label())) {
                    throw new IllegalArgumentException("--target label '" + t.label() + "' is used twice: labels must be unique");
                }
                relabelled.add(t);
            }
            if (model == null || model.isBlank()) {
                throw new IllegalArgumentException("--model is required (the model name the server serves)");
            }
            if (!closedLoop && !(ratePerS > 0 && ratePerS <= 10_000_000)) {
                throw new IllegalArgumentException("--rate=" + fmt(ratePerS) + " must be > 0 and <= 1e7 requests/s (or use --closed-loop)");
            }
            positive("--duration", durationS, 86_400);
            if (!(warmupS >= 0 && warmupS <= 86_400)) {
                throw new IllegalArgumentException("--warmup=" + fmt(warmupS) + " must be in [0, 86400] seconds");
            }
            range("--max-tokens", maxTokens, 1, 1_000_000);
            range("--concurrency-limit", concurrencyLimit, 1, 100_000);
            range("--payload-bytes", payloadBytes, 64, 64 << 20);
            range("--groups", groups, 1, 1_000_000);
            range("--system-tokens", systemTokens, 0, 1_000_000);
            range("--question-tokens", questionTokens, 1, 1_000_000);
            range("--turns", turns, 1, 10_000);
            range("--conversations", conversations, 1, 1_000_000);
            range("--random-min-tokens", randomMinTokens, 1, 1_000_000);
            range("--random-max-tokens", randomMaxTokens, randomMinTokens, 1_000_000);
            range("--connections", connections, 1, 100_000);
            range("--max-backlog", maxBacklog, 1, 100_000_000);
            positive("--timeout", timeoutS, 86_400);
            positive("--lag-threshold-ms", lagThresholdMs, 3_600_000);
            double drain = drainS < 0 ? timeoutS : drainS;
            if (!(drain >= 0 && drain <= 86_400)) {
                throw new IllegalArgumentException("--drain=" + fmt(drainS) + " must be in [0, 86400] seconds");
            }
            if (tokenIds && route != Route.COMPLETIONS) {
                throw new IllegalArgumentException("--token-ids needs --route completions (chat messages are text)");
            }
            if (tokenIds && workload == Workload.MULTI_TURN) {
                throw new IllegalArgumentException("--token-ids cannot be used with --workload multi-turn "
                    + "(the assistant's replies come back as text and would need the model's tokenizer)");
            }
            for (String[] h : headers) {
                if (h.length != 2 || !h[0].matches("[!#$%&'*+.^_`|~0-9A-Za-z-]+") || h[1].indexOf('\r') >= 0 || h[1].indexOf('\n') >= 0) {
                    throw new IllegalArgumentException("--header '" + String.join(":", h) + "' must be NAME:VALUE with a token name and no line breaks");
                }
            }
            if (conversationUser && workload != Workload.MULTI_TURN) {
                throw new IllegalArgumentException("--conversation-user needs --workload multi-turn (only its requests"
                    + " belong to conversations)");
            }
            if (randomDistribution == Distribution.LOG_UNIFORM && workload != Workload.RANDOM) {
                throw new IllegalArgumentException("--random-distribution log-uniform needs --workload random");
            }
            List<String> engines = new ArrayList<>();
            for (String e : engineMetrics) {
                engines.add(EngineShares.checkUrl(e));
            }
            if (new java.util.HashSet<>(engines).size() != engines.size()) {
                throw new IllegalArgumentException("--engine-metrics lists an engine twice: " + engines);
            }
            List<String> gateways = new ArrayList<>();
            for (String g : gatewayMetrics) {
                try {
                    gateways.add(EngineShares.checkUrl(g));
                } catch (IllegalArgumentException e) { // the same URL rule, named by this flag
                    throw new IllegalArgumentException(e.getMessage().replace("--engine-metrics", "--gateway-metrics")
                        .replace("an engine's base URL", "a gateway's base URL"), e);
                }
            }
            if (new java.util.HashSet<>(gateways).size() != gateways.size()) {
                throw new IllegalArgumentException("--gateway-metrics lists a gateway twice: " + gateways);
            }
            return new BenchConfig(List.copyOf(relabelled), model, workload, route, closedLoop ? 0 : ratePerS, durationS,
                warmupS, arrival, stream, maxTokens, ignoreEos, concurrencyLimit, seed, out, payloadBytes, groups,
                systemTokens, questionTokens, turns, conversations, randomMinTokens, randomMaxTokens, tokenIds,
                closedLoop, connections, List.copyOf(headers), apiKey, timeoutS, drain, lagThresholdMs, maxBacklog,
                progress, transport, randomDistribution, conversationUser, List.copyOf(engines), List.copyOf(gateways));
        }

        private static void positive(String flag, double v, double max) {
            if (!(v > 0 && v <= max)) {
                throw new IllegalArgumentException(flag + "=" + fmt(v) + " must be > 0 and <= " + fmt(max));
            }
        }

        private static void range(String flag, long v, long min, long max) {
            if (v < min || v > max) {
                throw new IllegalArgumentException(flag + "=" + v + " must be in [" + min + ", " + max + "]");
            }
        }

        private static String fmt(double v) {
            return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : Double.toString(v);
        }
    }
}
