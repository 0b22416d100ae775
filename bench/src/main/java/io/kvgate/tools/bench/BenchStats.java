package io.kvgate.tools.bench;

import org.HdrHistogram.DoubleHistogram;
import org.HdrHistogram.Histogram;

/**
 * The measurements of one target run: HdrHistograms in microseconds (3 significant digits, up to one hour) for
 * end-to-end latency, time to first token and inter-token latency, all measured from the request's INTENDED start
 * on the open-loop timeline (ITL: between consecutive content frames); counters for outcomes, error classes,
 * tokens and the generator's own shortfalls (late sends, connection-limit waits, unsent arrivals).
 *
 * <p>Only requests whose intended start is inside the measured window (after warmup) are recorded.
 *
 * <p>Threading: single writer (the driver's event loop); read by the report builder after the run ended.
 */
public final class BenchStats {
    static final long MAX_TRACKABLE_US = 3_600_000_000L;

    final Histogram latencyUs = new Histogram(1, MAX_TRACKABLE_US, 3);
    final Histogram ttftUs = new Histogram(1, MAX_TRACKABLE_US, 3);
    final Histogram itlUs = new Histogram(1, MAX_TRACKABLE_US, 3);
    final DoubleHistogram requestTokensPerS = new DoubleHistogram(1_000_000_000L, 3);

    final long[] errors = new long[ErrorClass.values().length];
    long ok;
    long scheduled;
    long sent;
    long unsent;
    long unfinished;
    long lateSends;
    long maxLagNs;
    long connectionLimitWaits;
    long conversationWaits;
    int maxBacklog;
    long promptTokens;
    long completionTokens;
    long cachedTokens;
    long usageResponses;
    long cachedReportingResponses;
    long outputTokens;
    long connectionsOpened;
    int maxOpenConnections;
    long lastCompletionNs = Long.MIN_VALUE;
    /** Every send, warmup included (for the generator's CPU per request). */
    long sentAll;
    /** Every success, warmup included (progress line only). */
    long okAll;
    long sentAtMeasureStart;
    long cpuStartThreadNs;
    long cpuStartProcessNs;
    long cpuStartWallNs;
    long cpuThreadNs = -1;
    long cpuProcessNs = -1;
    long cpuWallNs;
    long cpuRequests;

    void recordError(ErrorClass error, long nowNs) {
        errors[error.ordinal()]++;
        lastCompletionNs = Math.max(lastCompletionNs, nowNs);
    }

    long errorTotal() {
        long n = 0;
        for (long e : errors) {
            n += e;
        }
        return n;
    }

    /** Records latency from the intended start, clamped into the histogram's range. */
    static void record(Histogram h, long ns) {
        long us = Math.max(1, (ns + 500) / 1000);
        h.recordValue(Math.min(us, MAX_TRACKABLE_US));
    }

    void recordLag(long lagNs, long thresholdNs) {
        if (lagNs > thresholdNs) {
            lateSends++;
        }
        if (lagNs > maxLagNs) {
            maxLagNs = lagNs;
        }
    }
}
