package io.kvgate.perf.overlay;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.SpeculativeOverlay;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The routing thread's cost of recording one routed request's blocks in the speculative overlay (what
 * {@code KvExactPolicy} does after every kv_exact decision), in the endpoint picker's #42 load: every prompt
 * distinct, {@code keys} new blocks per request (100 KB of English chat is ~25k Qwen3 tokens, 1,560 blocks of 16),
 * {@code rate} requests per second on the overlay's clock (advanced by 1/rate per op, a manual clock: the op's own
 * duration does not move time), the rule's default overlay (2^17 entries, 2 s TTL). At 100 req/s and more the key
 * rate overflows the table within the TTL, which is where the two sides differ:
 * <ul>
 *   <li>{@code baseline}: the overlay before the fix ({@link SpeculativeOverlayBaseline}): the next compaction is due
 *       when the earliest live entry expires, i.e. on nearly every request (a scan of all 2^18 slots);</li>
 *   <li>{@code current}: {@link SpeculativeOverlay}: due once an eighth of the table can have expired.</li>
 * </ul>
 * The auxiliary counters give requests, compactions and dropped keys  per iteration, summed over the measured iterations (divide by requests for per-op figures; dropped keys are the price of the deferral: keys not recorded
 * while the table is full of live entries). One op = one request. Run with {@code -prof gc}: neither side allocates.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(1)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class OverlayChurnBench {
    @Param({"baseline", "current"})
    public String impl;
    @Param({"1560"})
    public int keys;
    @Param({"100", "500"})
    public int rate;

    private final ManualClock clock = new ManualClock();
    private SpeculativeOverlay current;
    private SpeculativeOverlayBaseline baseline;
    private long[] blockKeys;
    private long next = 1;
    private long stepNs;
    private int endpoint;

    /** Per-op counters: JMH divides them by the ops of the iteration. */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.EVENTS)
    public static class Counters {
        public long requests;
        public long compactions;
        public long droppedKeys;

        @Setup(Level.Iteration)
        public void reset() {
            requests = 0;
            compactions = 0;
            droppedKeys = 0;
        }
    }

    @Setup
    public void setUp() {
        long ttlNs = TimeUnit.SECONDS.toNanos(2);
        if (impl.equals("current")) {
            current = new SpeculativeOverlay(SpeculativeOverlay.DEFAULT_RULE_ENTRIES, ttlNs, clock);
        } else {
            baseline = new SpeculativeOverlayBaseline(SpeculativeOverlay.DEFAULT_RULE_ENTRIES, ttlNs, clock);
        }
        blockKeys = new long[keys];
        stepNs = TimeUnit.SECONDS.toNanos(1) / rate;
    }

    @Benchmark
    public void recordOneRequest(Counters c) {
        for (int i = 0; i < keys; i++) {
            blockKeys[i] = (next++) * 0xC2B2AE3D27D4EB4FL; // distinct prompts: every block new
        }
        int ep = endpoint++ & 3;
        c.requests++;
        if (current != null) {
            long c0 = current.compactions();
            long d0 = current.dropped();
            current.recordRouted(ep, blockKeys, keys);
            c.compactions += current.compactions() - c0;
            c.droppedKeys += current.dropped() - d0;
        } else {
            long c0 = baseline.compactions();
            long d0 = baseline.dropped();
            baseline.recordRouted(ep, blockKeys, keys);
            c.compactions += baseline.compactions() - c0;
            c.droppedKeys += baseline.dropped() - d0;
        }
        clock.advanceNs(stepNs);
    }
}
