package io.kvgate.tools.bench;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Locale;

/**
 * {@code ./kvgate bench ...}: parses the flags into a {@link BenchConfig}, runs {@link BenchRunner}, prints the
 * summary on stdout (progress and warnings go to stderr) and writes the report files.
 *
 * <p>Exit codes: 0 the run completed (even with request errors: they are results), 2 bad flags, 1 the run could not
 * be carried out.
 */
public final class BenchMain {
    static final String HELP = """
        usage: ./kvgate bench --target URL --model M [options]

        An open-loop load generator for OpenAI-compatible servers (the gateway, vLLM, SGLang, the simulator).
        Requests start on a timeline of intended start times fixed in advance (constant or Poisson, seeded), never
        when an earlier response came back; every latency is measured from the INTENDED start, so a stalled server
        shows up in the numbers instead of quietly lowering the load (no coordinated omission).

        target
          --target URL | label=URL   server base URL (http only); repeat to compare targets one after the other
          --compare URL[,URL...]     more targets for the same run (label=URL allowed); ratios are vs the first
          --route chat|completions   /v1/chat/completions (default) or /v1/completions
          --model M                  the model field of every request (required)
          --header NAME:VALUE        extra request header, repeatable (e.g. X-Kvgate-Explain:1)
          --api-key KEY              sent as Authorization: Bearer KEY

        load
          --rate R                   offered requests per second (open loop; required unless --closed-loop)
          --arrival constant|poisson gaps between intended starts (default poisson)
          --duration S               measured seconds (default 10)
          --warmup S                 seconds of the same load before measuring; not recorded (default 0)
          --concurrency-limit C      most connections = requests in flight (default 1024); arrivals beyond it
                                     wait (counted as connection_limit_waits) and their wait counts in latency
          --closed-loop              saturation mode: each connection sends its next request when the previous
                                     one ends; reports the throughput the server sustains
          --connections C            closed loop: connections (default 64)
          --seed N                   seed of arrivals and prompts (default 42); same seed = same run
          --timeout S                per-request timeout from send (default 60)
          --drain S                  after the last arrival, wait this long for answers (default: --timeout)
          --lag-threshold-ms MS      a send later than this behind schedule counts as late (default 10)
          --max-backlog N            arrivals waiting for a connection before new ones are dropped (default 100000)

        requests
          --workload fixed|shared-prefix|multi-turn|random   (default fixed)
          --stream                   request SSE streams (with stream_options.include_usage); TTFT = first frame
                                     with content, ITL = gaps between content frames; else TTFT = first byte
          --max-tokens N             max_tokens (default 128)
          --ignore-eos               add "ignore_eos": true so engines decode exactly max_tokens
          --token-ids                prompts as token-id arrays (needs --route completions)
          fixed:          --payload-bytes B   exact request body size (default 1024)
          shared-prefix:  --groups N (default 8) system prompts of --system-tokens T words (default 1000), each
                          request adds a question of --question-tokens Q words (default 50)
          multi-turn:     --conversations N (default 32) of --turns K turns (default 5); each turn resends the
                          whole history plus the assistant's actual previous replies, then a new user message of
                          --question-tokens words (--system-tokens words of system prompt, default 1000);
                          --conversation-user sends each conversation's id as the user field (a session key)
          random:         --random-min-tokens / --random-max-tokens words (default 16 / 1024), drawn
                          --random-distribution uniform (default) | log-uniform (as many prompts per decade of
                          length: mostly short, a few very long, e.g. 50..50000)
          Text prompts are words from a fixed vocabulary of common English words, about one token per word
          (engines report the exact count in usage.prompt_tokens).

        engines
          --engine-metrics URL[,URL...]  engine base URLs (vLLM, SGLang with --enable-metrics, the simulator);
                                     repeatable. Their Prometheus counters are read at the start of the measured
                                     window and after the run: finished requests (vllm:request_success_total,
                                     sglang:num_requests_total), prompt and cached tokens. The report gets each
                                     engine's requests and share, the busiest engine's share / the mean share, and
                                     the engines' own cache hit ratio (engines section)
          --gateway-metrics URL[,URL...]  kvgate base URLs (client or admin listener; every replica behind a
                                     balancer); repeatable. Their routing-quality accounting is read at the start of
                                     the measured window and after the run, summed: prompt tokens reachable /
                                     predicted / observed and the computed ones by cause (gateway_accounting)

        output
          --out FILE.json            JSON report; FILE[.label].{latency,ttft,itl}.hgrm and FILE.svg beside it
          --quiet                    no progress line (one per second on stderr by default)
          --transport auto|epoll|nio I/O transport (default auto: epoll when available)

        The report has requests, errors (and errors_by_class: connect, timeout, http_4xx, http_5xx, http_other,
        stream_error, truncated, invalid_json, error_body, protocol), offered_rps, sent_rps, achieved_rps,
        latency_ms / ttft_ms / itl_ms (p50, p90, p99, p999, max, mean), output_tokens_per_s, cached_tokens_ratio
        (sum of usage.prompt_tokens_details.cached_tokens / sum of prompt_tokens) and a schedule section that says
        whether the generator delivered the offered load (late sends, connection-limit waits, unsent arrivals).
        """;

    private BenchMain() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        BenchConfig config;
        try {
            config = parse(args);
        } catch (HelpRequested h) {
            out.print(HELP);
            return 0;
        } catch (IllegalArgumentException e) {
            err.println("kvgate bench: " + e.getMessage());
            err.println("(./kvgate bench --help lists every flag)");
            return 2;
        }
        try {
            BenchReport report = BenchRunner.run(config, io.kvgate.control.clock.NanoClock.SYSTEM, err);
            out.print(report.summary());
            if (config.out() != null) {
                out.println("\nreport: " + config.out().toAbsolutePath());
            }
            return 0;
        } catch (RuntimeException e) {
            err.println("kvgate bench: " + e.getMessage());
            return 1;
        }
    }

    static final class HelpRequested extends RuntimeException {
        HelpRequested() {
            super("help", null, false, false);
        }
    }

    /** Parses the flags ({@code --flag value} or {@code --flag=value}); throws with a message naming the flag. */
    static BenchConfig parse(String[] args) {
        BenchConfig.Builder b = BenchConfig.builder();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = null;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 2) {
                value = arg.substring(eq + 1);
                arg = arg.substring(0, eq);
            }
            switch (arg) {
                case "--help", "-h" -> throw new HelpRequested();
                case "--stream" -> b.stream = true;
                case "--ignore-eos" -> b.ignoreEos = true;
                case "--token-ids" -> b.tokenIds = true;
                case "--closed-loop" -> b.closedLoop = true;
                case "--quiet" -> b.progress = false;
                case "--conversation-user" -> b.conversationUser = true;
                default -> {
                    if (value == null) {
                        if (i + 1 >= args.length) {
                            throw new IllegalArgumentException(arg + " needs a value");
                        }
                        value = args[++i];
                    }
                    apply(b, arg, value);
                }
            }
        }
        return b.build();
    }

    private static void apply(BenchConfig.Builder b, String flag, String v) {
        switch (flag) {
            case "--target" -> b.target(v);
            case "--compare" -> {
                for (String s : v.split(",")) {
                    if (!s.isBlank()) {
                        b.target(s.trim());
                    }
                }
            }
            case "--model" -> b.model = v;
            case "--route" -> b.route = enumValue(BenchConfig.Route.class, flag, v);
            case "--workload" -> b.workload = enumValue(BenchConfig.Workload.class, flag, v);
            case "--arrival" -> b.arrival = enumValue(ArrivalScheduler.Arrival.class, flag, v);
            case "--transport" -> b.transport = enumValue(BenchConfig.Transport.class, flag, v);
            case "--rate" -> b.ratePerS = dbl(flag, v);
            case "--duration" -> b.durationS = dbl(flag, v);
            case "--warmup" -> b.warmupS = dbl(flag, v);
            case "--timeout" -> b.timeoutS = dbl(flag, v);
            case "--drain" -> b.drainS = dbl(flag, v);
            case "--lag-threshold-ms" -> b.lagThresholdMs = dbl(flag, v);
            case "--max-tokens" -> b.maxTokens = integer(flag, v);
            case "--concurrency-limit" -> b.concurrencyLimit = integer(flag, v);
            case "--connections" -> b.connections = integer(flag, v);
            case "--seed" -> b.seed = lng(flag, v);
            case "--out" -> b.out = Path.of(v);
            case "--payload-bytes" -> b.payloadBytes = integer(flag, v);
            case "--groups" -> b.groups = integer(flag, v);
            case "--system-tokens" -> b.systemTokens = integer(flag, v);
            case "--question-tokens" -> b.questionTokens = integer(flag, v);
            case "--turns" -> b.turns = integer(flag, v);
            case "--conversations" -> b.conversations = integer(flag, v);
            case "--random-min-tokens" -> b.randomMinTokens = integer(flag, v);
            case "--random-max-tokens" -> b.randomMaxTokens = integer(flag, v);
            case "--max-backlog" -> b.maxBacklog = integer(flag, v);
            case "--random-distribution" -> b.randomDistribution = enumValue(BenchConfig.Distribution.class, flag, v);
            case "--engine-metrics" -> {
                for (String s : v.split(",")) {
                    if (!s.isBlank()) {
                        b.engineMetrics(s.trim());
                    }
                }
            }
            case "--gateway-metrics" -> {
                for (String s : v.split(",")) {
                    if (!s.isBlank()) {
                        b.gatewayMetrics(s.trim());
                    }
                }
            }
            case "--api-key" -> b.apiKey = v;
            case "--header" -> {
                int colon = v.indexOf(':');
                if (colon <= 0) {
                    throw new IllegalArgumentException("--header '" + v + "' must be NAME:VALUE");
                }
                b.header(v.substring(0, colon).trim(), v.substring(colon + 1).trim());
            }
            default -> throw new IllegalArgumentException("unknown flag '" + flag + "'");
        }
    }

    private static <E extends Enum<E>> E enumValue(Class<E> type, String flag, String v) {
        for (E e : type.getEnumConstants()) {
            if (BenchConfig.cliName(e).equals(v.toLowerCase(Locale.ROOT))) {
                return e;
            }
        }
        StringBuilder allowed = new StringBuilder();
        for (E e : type.getEnumConstants()) {
            allowed.append(allowed.isEmpty() ? "" : "|").append(BenchConfig.cliName(e));
        }
        throw new IllegalArgumentException(flag + "=" + v + " must be one of " + allowed);
    }

    private static double dbl(String flag, String v) {
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + " must be a number");
        }
    }

    private static int integer(String flag, String v) {
        try {
            return Integer.parseInt(v.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + " must be an integer");
        }
    }

    private static long lng(String flag, String v) {
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + "=" + v + " must be an integer");
        }
    }
}
