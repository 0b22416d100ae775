package io.kvgate.perf.ingest;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.ingest.zmq.IngestConfig;
import io.kvgate.ingest.zmq.KeyMode;
import io.kvgate.ingest.zmq.KvEventIngest;
import io.kvgate.ingest.zmq.KvEventSource;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.kvgate.tools.sim.KvFlood;
import io.kvgate.tools.sim.SimulatorConfig;

/**
 * The gateway side of the end-to-end KV ingest benchmark (issue #12 item 5), driven by {@code perf/ingest-e2e.sh}:
 * {@code ingest PORT SECONDS BATCH [WARMUP]} runs the real {@link KvEventIngest} thread, subscribed to the
 * simulator's ZeroMQ publisher on {@code tcp://127.0.0.1:PORT} ({@code ./kvgate sim --kv-flood RATE --kv-batch
 * BATCH}, a separate process), writing a 2 M-block off-heap index. Once block ops flow it lets WARMUP seconds pass
 * (default 6: the first seconds are the JIT compiling Chronicle Map and the decoder, ~0.5 cores, and the backlog
 * that builds meanwhile), then measures the ops applied over SECONDS, this process's CPU (in cores) and where it
 * went per thread (the ingest thread, JeroMQ's I/O thread, the rest: JIT, GC, VM). Then it decodes and applies the
 * simulator's very payloads ({@link KvFlood#batches}, same configuration, same bytes) in process on one thread into
 * a fresh index of the same size, and prints the ratio, and the CPU per block op of both.
 */
public final class IngestE2e {
    private IngestE2e() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4 || args.length > 5 || !args[0].equals("ingest")) {
            throw new IllegalArgumentException("usage: IngestE2e ingest PORT SECONDS BATCH [WARMUP] (see perf/ingest-e2e.sh)");
        }
        ingest(Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
            args.length == 5 ? Integer.parseInt(args[4]) : 6);
    }

    private static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1e9;
    }

    /** CPU seconds of every live thread, by thread id. */
    private static Map<Long, Double> threadCpu(Map<Long, String> names) {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Map<Long, Double> cpu = new HashMap<>();
        for (ThreadInfo t : mx.getThreadInfo(mx.getAllThreadIds())) {
            if (t == null) {
                continue;
            }
            long ns = mx.getThreadCpuTime(t.getThreadId());
            if (ns >= 0) {
                cpu.put(t.getThreadId(), ns / 1e9);
                names.put(t.getThreadId(), t.getThreadName());
            }
        }
        return cpu;
    }

    /** The window's CPU per thread in cores, busiest first, threads under 0.01 cores folded into the rest. */
    private static String perThread(Map<Long, Double> before, Map<Long, Double> after, Map<Long, String> names,
                                    double processCores, double secs) {
        List<Map.Entry<String, Double>> rows = new ArrayList<>();
        double javaThreads = 0;
        for (Map.Entry<Long, Double> e : after.entrySet()) {
            double cores = (e.getValue() - before.getOrDefault(e.getKey(), 0.0)) / secs;
            javaThreads += cores;
            if (cores >= 0.01) {
                rows.add(Map.entry(names.get(e.getKey()), cores));
            }
        }
        rows.sort((a, b) -> Double.compare(b.getValue(), a.getValue()));
        StringBuilder sb = new StringBuilder();
        double listed = 0;
        for (Map.Entry<String, Double> r : rows) {
            sb.append(String.format("%s %.2f, ", r.getKey(), r.getValue()));
            listed += r.getValue();
        }
        sb.append(String.format("other java threads %.2f, JIT/GC/VM %.2f", javaThreads - listed,
            Math.max(0, processCores - javaThreads)));
        return sb.toString();
    }

    private static void ingest(int port, int seconds, int batch, int warmup) throws Exception {
        BlockIndex index = new BlockIndex(BlockIndexConfig.of(2_000_000, 64));
        // -Dkvgate.e2e.maxFrameBytes / receiveBufferBytes / socketReceiveBufferBytes: the ingest.* keys of the same
        // names (defaults as shipped).
        IngestConfig d = IngestConfig.defaults();
        IngestConfig config = d.withFrames(Integer.getInteger("kvgate.e2e.maxFrameBytes", d.maxFrameBytes()),
            Long.getLong("kvgate.e2e.receiveBufferBytes", d.receiveBufferBytes()))
            .withSocketReceiveBuffer(Integer.getInteger("kvgate.e2e.socketReceiveBufferBytes",
                d.socketReceiveBufferBytes()));
        KvEventIngest ingest = new KvEventIngest(index, NanoClock.SYSTEM, config);
        ingest.start();
        ingest.addEndpoint(new KvEventSource(63, "tcp://127.0.0.1:" + port, 1, null, false, "kv", KeyMode.ENGINE));
        System.out.printf("ingest: receive high-water mark %d messages (max_frame_bytes %d, receive_buffer_bytes %d), "
                + "socket_receive_buffer_bytes %d%n", config.receiveHighWaterMark(), config.maxFrameBytes(),
            config.receiveBufferBytes(), config.socketReceiveBufferBytes());
        System.out.println("ingest: ready"); // the script starts the publisher on this line
        System.out.flush();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (blockOps(ingest) == 0) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no block ops within 60 s: " + ingest.status());
            }
            Thread.sleep(2);
        }
        long w0 = blockOps(ingest);
        long wt0 = System.nanoTime();
        Thread.sleep(TimeUnit.SECONDS.toMillis(warmup));
        double warmRate = (blockOps(ingest) - w0) * 1e9 / (System.nanoTime() - wt0);
        Map<Long, String> names = new HashMap<>();
        Map<Long, Double> threads0 = threadCpu(names);
        long ops0 = blockOps(ingest);
        double cpu0 = cpuSeconds();
        long t0 = System.nanoTime();
        StringBuilder perSecond = new StringBuilder();
        long last = ops0;
        for (int i = 0; i < seconds; i++) {
            Thread.sleep(1_000);
            long now = blockOps(ingest);
            perSecond.append(i == 0 ? "" : " ").append((now - last + 500) / 1_000).append('k');
            last = now;
        }
        long ops = blockOps(ingest) - ops0;
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpu = (cpuSeconds() - cpu0) / secs;
        Map<Long, Double> threads1 = threadCpu(names);
        SubscriberStatus st = ingest.status().get(0);
        ingest.close();
        double e2e = ops / secs;

        // In process, the simulator's payloads, one thread: decode + apply into a fresh index of the same size.
        SimulatorConfig flood = new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM)
            .kvEvents("tcp://127.0.0.1:" + port).kvFlood(1, batch, 0);
        flood.validate();
        KvFlood.Batches pl = KvFlood.batches(flood, 0);
        int opsPerPrompt = (int) pl.blockOpsPerPrompt();
        try (BlockIndex local = new BlockIndex(BlockIndexConfig.of(2_000_000, 64))) {
            KvEventDecoder decoder = new KvEventDecoder(new KvEventHandler() {
                @Override
                public void onBlockStored(BlockStoredEvent e) {
                    for (int i = 0; i < e.blockCount(); i++) {
                        local.stored(63, 0, e.blockKeys()[i]);
                    }
                }

                @Override
                public void onBlockRemoved(BlockRemovedEvent e) {
                    for (int i = 0; i < e.blockCount(); i++) {
                        local.removed(63, 0, e.blockKeys()[i]);
                    }
                }

                @Override
                public void onAllBlocksCleared() {
                }
            });
            // One second unmeasured first: the in-process decoder and index are new objects on this thread.
            long warm = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            for (int p = 0; System.nanoTime() < warm; p = (p + 1) % KvFlood.PROMPTS) {
                decoder.decode(pl.stored()[p], 0, pl.stored()[p].length);
                decoder.decode(pl.removed()[p], 0, pl.removed()[p].length);
            }
            long localOps = 0;
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            long c0 = mx.getCurrentThreadCpuTime();
            long l0 = System.nanoTime();
            long lend = l0 + TimeUnit.SECONDS.toNanos(Math.max(2, seconds / 2));
            for (int p = 0; System.nanoTime() < lend; p = (p + 1) % KvFlood.PROMPTS) {
                decoder.decode(pl.stored()[p], 0, pl.stored()[p].length);
                decoder.decode(pl.removed()[p], 0, pl.removed()[p].length);
                localOps += opsPerPrompt;
            }
            double inProcess = localOps * 1e9 / (System.nanoTime() - l0);
            double inProcessCpuNs = (mx.getCurrentThreadCpuTime() - c0) / (double) localOps;
            System.out.printf("ingest: warm-up %d s after the first block op: %,.0f ops/s%n", warmup, warmRate);
            System.out.printf("ingest: applied %,d block ops in %.1f s = %,.0f ops/s; gateway-side ingest JVM cpu %.2f "
                    + "cores (%.0f ns per block op); gaps %d, clears %d, decode errors %d%n", ops, secs, e2e, cpu,
                cpu * 1e9 / Math.max(1, e2e), st.gaps(), st.clears(), st.decodeErrors());
            System.out.println("ingest: block ops applied per second of the window: " + perSecond);
            System.out.println("ingest: cpu by thread (cores): " + perThread(threads0, threads1, names, cpu, secs));
            System.out.printf("in process (decode + apply, one thread): %,.0f ops/s (%.0f ns CPU per block op); "
                + "end to end / in process = %.2f%n", inProcess, inProcessCpuNs, e2e / inProcess);
        }
        index.close();
    }

    private static long blockOps(KvEventIngest ingest) {
        long n = 0;
        for (SubscriberStatus s : ingest.status()) {
            n += s.blockOps();
        }
        return n;
    }
}
