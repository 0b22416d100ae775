package io.kvgate.perf.ingest;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.kvgate.index.block.BlockIndexReader;
import org.HdrHistogram.Histogram;

/**
 * Cross-check for {@link LookupUnderIngestBenchmark} on a shared, oversubscribed machine: the same population,
 * prompts and writer, idle and loaded phases alternated round by round in one process, every lookup timed twice —
 * by wall clock and by this thread's CPU time, so time spent descheduled (the benchmark's p99 at load 15-25 on 2
 * vCPUs) does not count. Also reports the work a lookup did: map probes per lookup (the reader's probes that its
 * cache did not answer) and cached blocks patched from the change log per lookup.
 *
 * <pre>java @deploy/jvm.options -cp 'perf/target/kvgate-perf.jar:perf/target/lib/*' \
 *     io.kvgate.perf.ingest.LookupUnderIngestCpu [rounds=6] [lookups per phase=20000]</pre>
 */
public final class LookupUnderIngestCpu {
    private static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    private LookupUnderIngestCpu() {
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 6;
        int lookups = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        LookupUnderIngestBenchmark s = new LookupUnderIngestBenchmark();
        s.setUp();
        LookupUnderIngestBenchmark.Reader r = new LookupUnderIngestBenchmark.Reader();
        r.setUp(s);
        LookupUnderIngestBenchmark.Writer w = new LookupUnderIngestBenchmark.Writer();
        w.setUp(s);
        Phase idle = new Phase("idle");
        Phase loaded = new Phase("loaded");
        long ingestOps = 0;
        double ingestSeconds = 0;
        for (int round = -1; round < rounds; round++) { // round -1 warms up, unrecorded
            run(s, r, lookups, round < 0 ? null : idle);
            AtomicBoolean stop = new AtomicBoolean();
            long[] writerOps = new long[1];
            Thread writer = new Thread(() -> {
                while (!stop.get()) {
                    s.ingest(w);
                    writerOps[0] += 256;
                }
            }, "ingest-writer");
            long t0 = System.nanoTime();
            writer.start();
            run(s, r, lookups, round < 0 ? null : loaded);
            stop.set(true);
            writer.join(TimeUnit.SECONDS.toMillis(60));
            if (round >= 0) {
                ingestOps += writerOps[0];
                ingestSeconds += (System.nanoTime() - t0) / 1e9;
            }
        }
        System.out.printf("%d rounds x %,d lookups per phase (128 blocks x 64 endpoints); writer during loaded phases: "
            + "%,.0f block ops/s%n", rounds, lookups, ingestOps / ingestSeconds);
        System.out.printf("%-7s %-5s %9s %9s %9s %9s   %s%n", "phase", "clock", "p50 ns", "p90 ns", "p99 ns", "p99.9 ns",
            "work per lookup");
        idle.print();
        loaded.print();
        System.out.printf("ratio loaded/idle, CPU time: p50 %.2fx, p90 %.2fx, p99 %.2fx; wall: p50 %.2fx, p99 %.2fx%n",
            ratio(loaded.cpu, idle.cpu, 50), ratio(loaded.cpu, idle.cpu, 90), ratio(loaded.cpu, idle.cpu, 99),
            ratio(loaded.wall, idle.wall, 50), ratio(loaded.wall, idle.wall, 99));
        s.tearDown();
    }

    private static double ratio(Histogram a, Histogram b, double pct) {
        return (double) a.getValueAtPercentile(pct) / b.getValueAtPercentile(pct);
    }

    private static void run(LookupUnderIngestBenchmark s, LookupUnderIngestBenchmark.Reader r, int lookups, Phase p) {
        BlockIndexReader reader = r.reader;
        long probes0 = reader.probes() - reader.hotHits();
        long patches0 = reader.cachePatches();
        long flushes0 = reader.cacheFlushes() + reader.clearFlushes();
        for (int i = 0; i < lookups; i++) {
            long c0 = MX.getCurrentThreadCpuTime();
            long w0 = System.nanoTime();
            s.lookup(r);
            long w1 = System.nanoTime();
            long c1 = MX.getCurrentThreadCpuTime();
            if (p != null) {
                p.wall.recordValue(Math.max(1, w1 - w0));
                p.cpu.recordValue(Math.max(1, c1 - c0));
            }
        }
        if (p != null) {
            p.lookups += lookups;
            p.mapProbes += reader.probes() - reader.hotHits() - probes0;
            p.patches += reader.cachePatches() - patches0;
            p.flushes += reader.cacheFlushes() + reader.clearFlushes() - flushes0;
        }
    }

    private static final class Phase {
        final String name;
        final Histogram wall = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
        final Histogram cpu = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
        long lookups;
        long mapProbes;
        long patches;
        long flushes;

        Phase(String name) {
            this.name = name;
        }

        void print() {
            for (int k = 0; k < 2; k++) {
                Histogram h = k == 0 ? cpu : wall;
                System.out.printf("%-7s %-5s %9d %9d %9d %9d   %s%n", name, k == 0 ? "cpu" : "wall",
                    h.getValueAtPercentile(50), h.getValueAtPercentile(90), h.getValueAtPercentile(99),
                    h.getValueAtPercentile(99.9), k == 0 ? String.format("map probes %.2f, patched %.2f, cache drops %d",
                        mapProbes / (double) lookups, patches / (double) lookups, flushes) : "");
            }
        }
    }
}
