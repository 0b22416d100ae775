package io.kvgate.tools.bench;

import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import org.HdrHistogram.AbstractHistogram;
import org.HdrHistogram.DoubleHistogram;
import org.HdrHistogram.Histogram;

/**
 * The results for one target: immutable numbers derived from a finished run's {@link BenchStats}, plus copies of
 * its histograms (for .hgrm files and plots).
 *
 * <p>Rates: {@code offered_rps} = arrivals scheduled in the measured window / its duration (the configured rate,
 * up to Poisson noise); {@code sent_rps} = those actually sent (however late) / duration; {@code on_time_rps} = those
 * sent within the lag threshold of their intended time / duration; {@code achieved_rps} = requests that
 * finished (ok or error) / elapsed, where elapsed runs from the window start to the last completion (at least the
 * window); {@code goodput_rps} = successes / elapsed; {@code output_tokens_per_s} = output tokens / elapsed.
 *
 * <p>Threading: immutable after construction, thread-safe.
 */
public final class TargetReport {
    /** Percentiles of one histogram, in milliseconds. */
    public record Percentiles(long count, double p50, double p90, double p99, double p999, double max, double mean) {
        static Percentiles ofMicros(AbstractHistogram h) {
            if (h.getTotalCount() == 0) {
                return null;
            }
            return new Percentiles(h.getTotalCount(), h.getValueAtPercentile(50) / 1e3, h.getValueAtPercentile(90) / 1e3,
                h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3, h.getMaxValue() / 1e3,
                h.getMean() / 1e3);
        }

        static Percentiles of(DoubleHistogram h) {
            if (h.getTotalCount() == 0) {
                return null;
            }
            return new Percentiles(h.getTotalCount(), h.getValueAtPercentile(50), h.getValueAtPercentile(90),
                h.getValueAtPercentile(99), h.getValueAtPercentile(99.9), h.getMaxValue(), h.getMean());
        }

        void write(JsonGenerator g) throws IOException {
            g.writeStartObject();
            g.writeNumberField("count", count);
            g.writeNumberField("p50", round(p50));
            g.writeNumberField("p90", round(p90));
            g.writeNumberField("p99", round(p99));
            g.writeNumberField("p999", round(p999));
            g.writeNumberField("max", round(max));
            g.writeNumberField("mean", round(mean));
            g.writeEndObject();
        }
    }

    public final String label;
    public final String url;
    public final String mode;
    public final long requests;
    public final long ok;
    public final long errors;
    public final Map<String, Long> errorsByClass;
    public final long scheduled;
    public final long sent;
    public final long unsent;
    public final long unfinished;
    public final double durationS;
    public final double elapsedS;
    public final double offeredRps;
    public final double sentRps;
    /** Measured arrivals sent no later than the lag threshold, per second of the window. */
    public final double onTimeRps;
    public final double achievedRps;
    public final double goodputRps;
    public final Percentiles latencyMs;
    public final Percentiles ttftMs;
    public final Percentiles itlMs;
    public final Percentiles perRequestOutputTokensPerS;
    public final long outputTokens;
    public final double outputTokensPerS;
    public final long promptTokens;
    public final long completionTokens;
    public final long cachedTokens;
    public final long usageResponses;
    /** Σ cached_tokens / Σ prompt_tokens over responses that report usage; NaN when none reported cached tokens. */
    public final double cachedTokensRatio;
    public final long lateSends;
    public final double maxLagMs;
    public final long connectionLimitWaits;
    public final long conversationWaits;
    public final int maxBacklog;
    public final long connectionsOpened;
    public final int maxOpenConnections;
    /** The generator's own cost over the measured window (-1 when unknown). */
    public final double generatorIoThreadCpuS;
    public final double generatorProcessCpuS;
    public final double generatorIoThreadBusy;
    public final double generatorCpuUsPerRequest;
    public final Histogram latencyUs;
    public final Histogram ttftUs;
    public final Histogram itlUs;

    private TargetReport(BenchConfig config, BenchTarget target, BenchStats s, long measureStartNs) {
        label = target.label();
        url = target.url();
        mode = config.closedLoop() ? "closed-loop" : "open-loop";
        ok = s.ok;
        errors = s.errorTotal();
        requests = ok + errors;
        Map<String, Long> byClass = new LinkedHashMap<>();
        for (ErrorClass e : ErrorClass.values()) {
            byClass.put(e.key(), s.errors[e.ordinal()]);
        }
        errorsByClass = Map.copyOf(byClass);
        scheduled = s.scheduled;
        sent = s.sent;
        unsent = s.unsent;
        unfinished = s.unfinished;
        durationS = config.durationS();
        double sinceStart = s.lastCompletionNs == Long.MIN_VALUE ? 0 : (s.lastCompletionNs - measureStartNs) / 1e9;
        elapsedS = Math.max(durationS, sinceStart);
        offeredRps = config.closedLoop() ? Double.NaN : scheduled / durationS;
        sentRps = sent / durationS;
        onTimeRps = config.closedLoop() ? Double.NaN : (sent - s.lateSends) / durationS;
        achievedRps = requests / elapsedS;
        goodputRps = ok / elapsedS;
        latencyMs = Percentiles.ofMicros(s.latencyUs);
        ttftMs = Percentiles.ofMicros(s.ttftUs);
        itlMs = Percentiles.ofMicros(s.itlUs);
        perRequestOutputTokensPerS = Percentiles.of(s.requestTokensPerS);
        outputTokens = s.outputTokens;
        outputTokensPerS = outputTokens / elapsedS;
        promptTokens = s.promptTokens;
        completionTokens = s.completionTokens;
        cachedTokens = s.cachedTokens;
        usageResponses = s.usageResponses;
        cachedTokensRatio = s.cachedReportingResponses > 0 && promptTokens > 0
            ? (double) cachedTokens / promptTokens : Double.NaN;
        lateSends = s.lateSends;
        maxLagMs = s.maxLagNs / 1e6;
        connectionLimitWaits = s.connectionLimitWaits;
        conversationWaits = s.conversationWaits;
        maxBacklog = s.maxBacklog;
        connectionsOpened = s.connectionsOpened;
        maxOpenConnections = s.maxOpenConnections;
        generatorIoThreadCpuS = s.cpuThreadNs < 0 ? Double.NaN : s.cpuThreadNs / 1e9;
        generatorProcessCpuS = s.cpuProcessNs < 0 ? Double.NaN : s.cpuProcessNs / 1e9;
        generatorIoThreadBusy = s.cpuThreadNs < 0 || s.cpuWallNs <= 0 ? Double.NaN : (double) s.cpuThreadNs / s.cpuWallNs;
        generatorCpuUsPerRequest = s.cpuProcessNs < 0 || s.cpuRequests <= 0 ? Double.NaN : s.cpuProcessNs / 1e3 / s.cpuRequests;
        latencyUs = s.latencyUs.copy();
        ttftUs = s.ttftUs.copy();
        itlUs = s.itlUs.copy();
    }

    static TargetReport of(BenchConfig config, BenchTarget target, BenchStats stats, long measureStartNs, long endNs) {
        return new TargetReport(config, target, stats, measureStartNs);
    }

    public long errors(ErrorClass e) {
        return errorsByClass.get(e.key());
    }

    /** True when the generator did not deliver the offered load as scheduled (see the schedule section). */
    public boolean shortfall() {
        return lateSends > 0 || connectionLimitWaits > 0 || conversationWaits > 0 || unsent > 0 || unfinished > 0;
    }

    static double round(double v) {
        return Math.round(v * 1000.0) / 1000.0;
    }

    private static void number(JsonGenerator g, String name, double v) throws IOException {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            g.writeNullField(name);
        } else {
            g.writeNumberField(name, round(v));
        }
    }

    private static void percentiles(JsonGenerator g, String name, Percentiles p) throws IOException {
        g.writeFieldName(name);
        if (p == null) {
            g.writeNull();
        } else {
            p.write(g);
        }
    }

    /** Writes this target's fields into the current JSON object. */
    void writeFields(JsonGenerator g, Map<String, String> files) throws IOException {
        g.writeStringField("label", label);
        g.writeStringField("target", url);
        g.writeStringField("mode", mode);
        g.writeNumberField("requests", requests);
        g.writeNumberField("ok", ok);
        g.writeNumberField("errors", errors);
        g.writeObjectFieldStart("errors_by_class");
        for (ErrorClass e : ErrorClass.values()) {
            g.writeNumberField(e.key(), errorsByClass.get(e.key()));
        }
        g.writeEndObject();
        g.writeNumberField("scheduled", scheduled);
        g.writeNumberField("sent", sent);
        g.writeNumberField("unsent", unsent);
        g.writeNumberField("unfinished", unfinished);
        number(g, "duration_s", durationS);
        number(g, "elapsed_s", elapsedS);
        number(g, "offered_rps", offeredRps);
        number(g, "sent_rps", sentRps);
        number(g, "on_time_rps", onTimeRps);
        number(g, "achieved_rps", achievedRps);
        number(g, "goodput_rps", goodputRps);
        percentiles(g, "latency_ms", latencyMs);
        percentiles(g, "ttft_ms", ttftMs);
        percentiles(g, "itl_ms", itlMs);
        number(g, "output_tokens_per_s", outputTokensPerS);
        percentiles(g, "per_request_output_tokens_per_s", perRequestOutputTokensPerS);
        g.writeNumberField("output_tokens", outputTokens);
        g.writeNumberField("prompt_tokens", promptTokens);
        g.writeNumberField("completion_tokens", completionTokens);
        g.writeNumberField("cached_tokens", cachedTokens);
        g.writeNumberField("usage_responses", usageResponses);
        number(g, "cached_tokens_ratio", cachedTokensRatio);
        g.writeObjectFieldStart("schedule");
        g.writeBooleanField("shortfall", shortfall());
        g.writeNumberField("late_sends", lateSends);
        number(g, "max_lag_ms", maxLagMs);
        g.writeNumberField("connection_limit_waits", connectionLimitWaits);
        g.writeNumberField("conversation_waits", conversationWaits);
        g.writeNumberField("max_backlog", maxBacklog);
        g.writeEndObject();
        g.writeObjectFieldStart("connections");
        g.writeNumberField("opened", connectionsOpened);
        g.writeNumberField("max_open", maxOpenConnections);
        g.writeEndObject();
        g.writeObjectFieldStart("generator");
        number(g, "io_thread_cpu_s", generatorIoThreadCpuS);
        number(g, "io_thread_busy", generatorIoThreadBusy);
        number(g, "process_cpu_s", generatorProcessCpuS);
        number(g, "process_cpu_us_per_request", generatorCpuUsPerRequest);
        g.writeEndObject();
        if (files != null && !files.isEmpty()) {
            g.writeObjectFieldStart("files");
            for (Map.Entry<String, String> f : files.entrySet()) {
                g.writeStringField(f.getKey(), f.getValue());
            }
            g.writeEndObject();
        }
    }
}
