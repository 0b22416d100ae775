package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The result of a run: one {@link TargetReport} per target (several in compare mode), the JSON report, the
 * HdrHistogram {@code .hgrm} percentile files and the SVG plot.
 *
 * <p>JSON shape: with one target, that target's fields ({@code requests}, {@code errors}, {@code errors_by_class},
 * {@code offered_rps}, {@code achieved_rps}, {@code latency_ms}, {@code ttft_ms}, {@code itl_ms} with
 * {@code p50/p90/p99/p999/max/mean/count}, {@code output_tokens_per_s}, {@code cached_tokens_ratio}, ...) are at the
 * top level; in every case {@code config} echoes the run and {@code targets} lists every target; compare mode adds
 * {@code comparison}: each later target's ratios to the first. With {@code --engine-metrics} each target also has
 * {@code engines}: {@code requests}, {@code busiest_share_vs_mean}, {@code hit_ratio} and {@code per_engine}
 * ({@code url}, {@code requests}, {@code share}, {@code prompt_tokens}, {@code cached_tokens}, {@code hit_ratio}).
 *
 * <p>Threading: immutable once built (file names are recorded by {@link #write}, called once by the owner).
 */
public final class BenchReport {
    private static final JsonFactory JSON = new JsonFactory();

    private final BenchConfig config;
    private final List<TargetReport> targets;
    /** Per target (same order), what the engines counted ({@code --engine-metrics}); null entries without it. */
    private final List<EngineShares> engines;
    private final Map<String, Map<String, String>> files = new LinkedHashMap<>();
    /** Per target (same order), what a kvgate target's routing-quality accounting counted; null entries otherwise. */
    private List<GatewayAccounting> accounting;

    BenchReport(BenchConfig config, List<TargetReport> targets) {
        this(config, targets, java.util.Collections.nCopies(targets.size(), null));
    }

    BenchReport(BenchConfig config, List<TargetReport> targets, List<EngineShares> engines) {
        if (engines.size() != targets.size()) {
            throw new IllegalArgumentException(engines.size() + " engine reports for " + targets.size() + " targets");
        }
        this.config = config;
        this.targets = List.copyOf(targets);
        this.engines = java.util.Collections.unmodifiableList(new ArrayList<>(engines));
        this.accounting = java.util.Collections.nCopies(targets.size(), null);
    }

    /** Adds each target's gateway accounting over its run (null entries: not a kvgate, or not readable). */
    BenchReport withAccounting(List<GatewayAccounting> perTarget) {
        if (perTarget.size() != targets.size()) {
            throw new IllegalArgumentException(perTarget.size() + " accounting reports for " + targets.size() + " targets");
        }
        this.accounting = java.util.Collections.unmodifiableList(new ArrayList<>(perTarget));
        return this;
    }

    /** What the engines counted during target {@code i}'s run, or null without {@code --engine-metrics}. */
    public EngineShares engines(int i) {
        return engines.get(i);
    }

    public BenchConfig config() {
        return config;
    }

    public List<TargetReport> targets() {
        return targets;
    }

    /** The first (or only) target's results. */
    public TargetReport first() {
        return targets.get(0);
    }

    /** Ratio of a later target's value to the first target's (NaN when undefined). */
    static double ratio(double value, double baseline) {
        return baseline == 0 || Double.isNaN(baseline) || Double.isNaN(value) ? Double.NaN : value / baseline;
    }

    /** The JSON report. */
    public String toJson() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (JsonGenerator g = JSON.createGenerator(bytes).useDefaultPrettyPrinter()) {
            g.writeStartObject();
            g.writeStringField("tool", "kvgate bench");
            g.writeNumberField("report_version", 1);
            if (targets.size() == 1) {
                first().writeFields(g, files.get(first().label));
                if (engines.get(0) != null) {
                    engines.get(0).write(g);
                }
                if (accounting.get(0) != null) {
                    accounting.get(0).write(g);
                }
            }
            writeConfig(g);
            g.writeArrayFieldStart("targets");
            for (int i = 0; i < targets.size(); i++) {
                TargetReport t = targets.get(i);
                g.writeStartObject();
                t.writeFields(g, files.get(t.label));
                if (engines.get(i) != null) {
                    engines.get(i).write(g);
                }
                if (accounting.get(i) != null) {
                    accounting.get(i).write(g);
                }
                g.writeEndObject();
            }
            g.writeEndArray();
            if (targets.size() > 1) {
                g.writeObjectFieldStart("comparison");
                g.writeStringField("baseline", first().label);
                for (TargetReport t : targets.subList(1, targets.size())) {
                    g.writeObjectFieldStart(t.label);
                    for (Map.Entry<String, Double> r : ratios(t).entrySet()) {
                        double v = r.getValue();
                        if (Double.isNaN(v)) {
                            g.writeNullField(r.getKey());
                        } else {
                            g.writeNumberField(r.getKey(), TargetReport.round(v));
                        }
                    }
                    g.writeEndObject();
                }
                g.writeEndObject();
            }
            if (targets.size() > 1 && files.containsKey("")) {
                g.writeObjectFieldStart("files");
                for (Map.Entry<String, String> f : files.get("").entrySet()) {
                    g.writeStringField(f.getKey(), f.getValue());
                }
                g.writeEndObject();
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    /** Ratios target / first for the headline numbers (below 1 is better for times, above 1 for rates). */
    Map<String, Double> ratios(TargetReport t) {
        TargetReport b = first();
        Map<String, Double> r = new LinkedHashMap<>();
        r.put("ttft_p50", ratio(p(t.ttftMs, 50), p(b.ttftMs, 50)));
        r.put("ttft_p90", ratio(p(t.ttftMs, 90), p(b.ttftMs, 90)));
        r.put("ttft_p99", ratio(p(t.ttftMs, 99), p(b.ttftMs, 99)));
        r.put("latency_p50", ratio(p(t.latencyMs, 50), p(b.latencyMs, 50)));
        r.put("latency_p99", ratio(p(t.latencyMs, 99), p(b.latencyMs, 99)));
        r.put("itl_p50", ratio(p(t.itlMs, 50), p(b.itlMs, 50)));
        r.put("achieved_rps", ratio(t.achievedRps, b.achievedRps));
        r.put("output_tokens_per_s", ratio(t.outputTokensPerS, b.outputTokensPerS));
        r.put("cached_tokens_ratio", ratio(t.cachedTokensRatio, b.cachedTokensRatio));
        return r;
    }

    static double p(TargetReport.Percentiles p, int which) {
        if (p == null) {
            return Double.NaN;
        }
        return switch (which) {
            case 50 -> p.p50();
            case 90 -> p.p90();
            default -> p.p99();
        };
    }

    private void writeConfig(JsonGenerator g) throws IOException {
        g.writeObjectFieldStart("config");
        g.writeStringField("model", config.model());
        g.writeStringField("workload", BenchConfig.cliName(config.workload()));
        g.writeStringField("route", BenchConfig.cliName(config.route()));
        g.writeStringField("mode", config.closedLoop() ? "closed-loop" : "open-loop");
        if (config.closedLoop()) {
            g.writeNumberField("connections", config.connections());
        } else {
            g.writeNumberField("rate", config.ratePerS());
            g.writeStringField("arrival", BenchConfig.cliName(config.arrival()));
            g.writeNumberField("concurrency_limit", config.concurrencyLimit());
        }
        g.writeNumberField("duration_s", config.durationS());
        g.writeNumberField("warmup_s", config.warmupS());
        g.writeBooleanField("stream", config.stream());
        g.writeNumberField("max_tokens", config.maxTokens());
        g.writeNumberField("seed", config.seed());
        g.writeBooleanField("token_ids", config.tokenIds());
        switch (config.workload()) {
            case FIXED -> g.writeNumberField("payload_bytes", config.payloadBytes());
            case SHARED_PREFIX -> {
                g.writeNumberField("groups", config.groups());
                g.writeNumberField("system_tokens", config.systemTokens());
                g.writeNumberField("question_tokens", config.questionTokens());
            }
            case MULTI_TURN -> {
                g.writeNumberField("conversations", config.conversations());
                g.writeNumberField("turns", config.turns());
                g.writeNumberField("system_tokens", config.systemTokens());
                g.writeNumberField("question_tokens", config.questionTokens());
            }
            case RANDOM -> {
                g.writeNumberField("random_min_tokens", config.randomMinTokens());
                g.writeNumberField("random_max_tokens", config.randomMaxTokens());
                g.writeStringField("random_distribution", BenchConfig.cliName(config.randomDistribution()));
            }
        }
        if (config.conversationUser()) {
            g.writeBooleanField("conversation_user", true);
        }
        if (!config.engineMetrics().isEmpty()) {
            g.writeArrayFieldStart("engine_metrics");
            for (String e : config.engineMetrics()) {
                g.writeString(e);
            }
            g.writeEndArray();
        }
        g.writeNumberField("timeout_s", config.timeoutS());
        g.writeNumberField("lag_threshold_ms", config.lagThresholdMs());
        g.writeEndObject();
    }

    /**
     * Writes the JSON report to {@code out}, and beside it ({@code <base>[.<label>].latency.hgrm}, {@code .ttft.hgrm},
     * {@code .itl.hgrm}, {@code <base>.svg}) the percentile distributions (in milliseconds) and the plot.
     */
    public void write(Path out) throws IOException {
        Path dir = out.toAbsolutePath().getParent();
        Files.createDirectories(dir);
        String name = out.getFileName().toString();
        String base = name.endsWith(".json") ? name.substring(0, name.length() - 5) : name;
        for (TargetReport t : targets) {
            String prefix = targets.size() == 1 ? base : base + "." + t.label;
            Map<String, String> f = new LinkedHashMap<>();
            writeHgrm(dir.resolve(prefix + ".latency.hgrm"), t.latencyUs, f, "latency_hgrm");
            writeHgrm(dir.resolve(prefix + ".ttft.hgrm"), t.ttftUs, f, "ttft_hgrm");
            writeHgrm(dir.resolve(prefix + ".itl.hgrm"), t.itlUs, f, "itl_hgrm");
            files.put(t.label, f);
        }
        Path svg = dir.resolve(base + ".svg");
        Files.writeString(svg, BenchPlot.svg(this), StandardCharsets.UTF_8);
        Map<String, String> top = new LinkedHashMap<>();
        top.put("svg", svg.getFileName().toString());
        files.put("", top);
        if (targets.size() == 1) {
            files.get(first().label).put("svg", svg.getFileName().toString());
        }
        Files.writeString(out, toJson(), StandardCharsets.UTF_8);
    }

    private static void writeHgrm(Path path, Histogram h, Map<String, String> files, String key) throws IOException {
        if (h.getTotalCount() == 0) {
            return;
        }
        try (PrintStream ps = new PrintStream(Files.newOutputStream(path), false, StandardCharsets.UTF_8)) {
            // Values are recorded in microseconds; the file is in milliseconds like the JSON.
            h.outputPercentileDistribution(ps, 5, 1000.0);
        }
        files.put(key, path.getFileName().toString());
    }

    /** The human summary printed at the end of a run. */
    public String summary() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < targets.size(); i++) {
            TargetReport t = targets.get(i);
            sb.append(String.format(Locale.ROOT, "%n== %s (%s) %s%n", t.label, t.url, t.mode));
            if (!config.closedLoop()) {
                sb.append(String.format(Locale.ROOT, "  offered %.1f req/s, sent %.1f req/s (on time %.1f), achieved %.1f req/s (goodput %.1f)%n",
                    t.offeredRps, t.sentRps, t.onTimeRps, t.achievedRps, t.goodputRps));
            } else {
                sb.append(String.format(Locale.ROOT, "  achieved %.1f req/s (goodput %.1f) with %d connections%n",
                    t.achievedRps, t.goodputRps, config.connections()));
            }
            sb.append(String.format(Locale.ROOT, "  requests %d  ok %d  errors %d", t.requests, t.ok, t.errors));
            if (t.errors > 0) {
                List<String> parts = new ArrayList<>();
                for (ErrorClass e : ErrorClass.values()) {
                    long n = t.errors(e);
                    if (n > 0) {
                        parts.add(e.key() + "=" + n);
                    }
                }
                sb.append(" (").append(String.join(", ", parts)).append(')');
            }
            sb.append('\n');
            line(sb, "latency", t.latencyMs);
            line(sb, "ttft", t.ttftMs);
            line(sb, "itl", t.itlMs);
            sb.append(String.format(Locale.ROOT, "  output %.1f tokens/s", t.outputTokensPerS));
            if (!Double.isNaN(t.cachedTokensRatio)) {
                sb.append(String.format(Locale.ROOT, "  cached tokens %.1f%% of %d prompt tokens",
                    100 * t.cachedTokensRatio, t.promptTokens));
            }
            sb.append('\n');
            if (!Double.isNaN(t.generatorIoThreadBusy)) {
                sb.append(String.format(Locale.ROOT, "  generator: I/O thread %.0f%% busy, %.1f us of process CPU per request%n",
                    100 * t.generatorIoThreadBusy, t.generatorCpuUsPerRequest));
            }
            if (t.shortfall()) {
                sb.append(String.format(Locale.ROOT, "  WARNING: load not delivered as scheduled: %d late sends (> %s ms,"
                        + " max lag %.1f ms), %d waits at the connection limit, %d waits for a free conversation,"
                        + " %d unsent, %d unfinished%n", t.lateSends, config.lagThresholdMs(), t.maxLagMs,
                    t.connectionLimitWaits, t.conversationWaits, t.unsent, t.unfinished));
            }
            if (engines.get(i) != null) {
                sb.append(engines.get(i).summary());
            }
            if (accounting.get(i) != null) {
                sb.append(accounting.get(i).summary());
            }
        }
        if (targets.size() > 1) {
            sb.append(String.format(Locale.ROOT, "%n== ratios vs %s (times: < 1 is faster; rates: > 1 is more)%n", first().label));
            for (TargetReport t : targets.subList(1, targets.size())) {
                sb.append("  ").append(t.label).append(':');
                for (Map.Entry<String, Double> r : ratios(t).entrySet()) {
                    if (!Double.isNaN(r.getValue())) {
                        sb.append(String.format(Locale.ROOT, " %s %.3f", r.getKey(), r.getValue()));
                    }
                }
                sb.append('\n');
            }
        }
        return sb.toString();
    }

    private static void line(StringBuilder sb, String name, TargetReport.Percentiles p) {
        if (p == null) {
            return;
        }
        sb.append(String.format(Locale.ROOT, "  %-8s p50 %9.3f  p90 %9.3f  p99 %9.3f  p99.9 %9.3f  max %9.3f ms  (n=%d)%n",
            name, p.p50(), p.p90(), p.p99(), p.p999(), p.max(), p.count()));
    }
}
