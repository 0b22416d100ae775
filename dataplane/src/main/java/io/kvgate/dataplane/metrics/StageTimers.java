package io.kvgate.dataplane.metrics;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * Per-stage latency of the request path (parse, render, tokenize, hash, lookup, decide, upstream connect, upstream
 * first byte, total added by the gateway), recorded into HdrHistogram {@link Recorder}s from any thread without locks.
 * Each scrape takes the interval histogram and folds it into a cumulative one, so quantiles cover the process
 * lifetime while recording never contends with reading.
 */
public final class StageTimers {
    public enum Stage { PARSE, RENDER, TOKENIZE, HASH, LOOKUP, DECIDE, ROUTE_QUEUE, UPSTREAM_CONNECT, UPSTREAM_FIRST_BYTE, GATEWAY_ADDED }

    private final Recorder[] recorders = new Recorder[Stage.values().length];
    private final Histogram[] cumulative = new Histogram[Stage.values().length];
    private final Histogram[] scratch = new Histogram[Stage.values().length];

    public StageTimers() {
        for (int i = 0; i < recorders.length; i++) {
            recorders[i] = new Recorder(3_600_000_000_000L, 2);
            cumulative[i] = new Histogram(3_600_000_000_000L, 2);
        }
    }

    public void recordNs(Stage stage, long ns) {
        if (ns >= 0) {
            recorders[stage.ordinal()].recordValue(Math.min(ns, 3_600_000_000_000L));
        }
    }

    /** Current cumulative histogram for a stage (scrape thread only). */
    public synchronized Histogram snapshot(Stage stage) {
        int i = stage.ordinal();
        scratch[i] = recorders[i].getIntervalHistogram(scratch[i]);
        cumulative[i].add(scratch[i]);
        return cumulative[i];
    }

    synchronized void write(StringBuilder out) {
        out.append("# HELP kvgate_stage_latency_seconds Latency of each stage of the request path (HdrHistogram quantiles).\n");
        out.append("# TYPE kvgate_stage_latency_seconds summary\n");
        for (Stage s : Stage.values()) {
            Histogram h = snapshot(s);
            String st = s.name().toLowerCase(java.util.Locale.ROOT);
            for (double q : new double[] {0.5, 0.9, 0.99, 0.999}) {
                out.append("kvgate_stage_latency_seconds{stage=\"").append(st).append("\",quantile=\"").append(q).append("\"} ")
                    .append(h.getValueAtPercentile(q * 100) / 1e9).append('\n');
            }
            out.append("kvgate_stage_latency_seconds_count{stage=\"").append(st).append("\"} ").append(h.getTotalCount()).append('\n');
            out.append("kvgate_stage_latency_seconds_max{stage=\"").append(st).append("\"} ").append(h.getMaxValue() / 1e9).append('\n');
        }
    }
}
