package io.kvgate.perf.metrics;

import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.dataplane.metrics.StageTimers.Stage;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One proxied request's worth of metrics, as {@code PlainExchange} records them on a successful answer: time to
 * first byte, the answer's token usage, the request (status and duration) and five stage timers (parse, route queue,
 * upstream connect, gateway added, upstream first byte). {@code current}: today's {@link GatewayMetrics} (series
 * found by rule and model name, counters by status slot); {@code baseline}: {@link GatewayMetricsBaseline}, the keyed
 * recording it replaced. Both record the same five stages into their own {@link StageTimers} (since the move to
 * the Prometheus client: one {@code LatencyHistogram} per stage instead of HdrHistogram recorders); the
 * {@code NoStages} pair leaves them out. {@code currentStreamed} adds a stream's first-token and inter-token records.
 *
 * <p>Run with {@code -prof gc}: the current path allocates nothing per op, the baseline two record keys. The model
 * string is one object reused across ops, so its hash is cached after the first: the hashing of a fresh per-request
 * string (the relay parses a new one per request; both paths hash it for the configured-label check) is not counted.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(2)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
public class MetricsRecordBench {
    private static final Set<String> MODELS = Set.of("qwen3", "llama-3.1-8b-instruct", "mistral");
    private final GatewayMetrics metrics = new GatewayMetrics();
    private final GatewayMetricsBaseline baseline = new GatewayMetricsBaseline();
    /** An equal but distinct object from the configured label, as the client's parsed model string is. */
    private String model;
    private String rule;
    private long t;

    @Setup
    public void setUp() {
        metrics.modelLabels(MODELS);
        baseline.modelLabels(MODELS);
        model = new String("llama-3.1-8b-instruct".toCharArray());
        rule = new String("chat".toCharArray());
    }

    @Benchmark
    public void current() {
        long v = next();
        stages(metrics.stages, v);
        record(v);
    }

    /** What an exchange records at its end, through today's GatewayMetrics. */
    private void record(long v) {
        metrics.timeToFirstByte(rule, 2_000_000 + v);
        metrics.tokens(rule, model, 812, 20, 768);
        metrics.request(rule, model, 200, 30_000_000 + v);
    }

    @Benchmark
    public void baseline() {
        long v = next();
        stages(baseline.stages, v);
        baseline.timeToFirstByte(rule, 2_000_000 + v);
        baseline.tokens(rule, model, 812, 20, 768);
        baseline.request(rule, model, 200, 30_000_000 + v);
    }

    /**
     * {@link #current} plus what a streamed answer adds on the Prometheus-client registry: its first token and one
     * inter-token gap (untraced, as most requests are: a trace id costs its exemplar).
     */
    @Benchmark
    public void currentStreamed() {
        long v = next();
        stages(metrics.stages, v);
        metrics.timeToFirstToken(rule, 80_000_000 + v, null);
        metrics.interTokenLatency(rule, 15_000_000 + v, null);
        record(v);
    }

    /** {@link #current} without the stage timers (identical code in both paths): only what this change touched. */
    @Benchmark
    public void currentNoStages() {
        record(next());
    }

    /** {@link #baseline} without the stage timers. */
    @Benchmark
    public void baselineNoStages() {
        long v = next();
        baseline.timeToFirstByte(rule, 2_000_000 + v);
        baseline.tokens(rule, model, 812, 20, 768);
        baseline.request(rule, model, 200, 30_000_000 + v);
    }

    /** A few varying nanoseconds, so the buckets and stage values are not constants the JIT could fold. */
    private long next() {
        return (t = (t + 7919) & 0xFFFFF);
    }

    private static void stages(StageTimers s, long v) {
        s.recordNs(Stage.PARSE, 20_000 + v);
        s.recordNs(Stage.ROUTE_QUEUE, 5_000 + v);
        s.recordNs(Stage.UPSTREAM_CONNECT, 150_000 + v);
        s.recordNs(Stage.GATEWAY_ADDED, 40_000 + v);
        s.recordNs(Stage.UPSTREAM_FIRST_BYTE, 1_900_000 + v);
    }
}
