package io.kvgate.perf.ingest;

import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.ingest.zmq.KeyMode;
import io.kvgate.ingest.zmq.KvEventIngest;
import io.kvgate.ingest.zmq.KvEventSource;
import io.kvgate.ingest.zmq.SubscriberStatus;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * End-to-end KV ingest across processes (issue #12 item 5), two roles of one class, each its own JVM:
 * <ul>
 *   <li>{@code publish PORT SECONDS [OPS_PER_S]}: a JeroMQ PUB bound at PORT publishing vLLM-shaped batches (store
 *       a 128-block prompt as BlockStored events of 16, 32 or 64 blocks, then remove it), paced to OPS_PER_S block
 *       operations per second (0 = as fast as it can), after 3 s of empty batches for the slow joiner;</li>
 *   <li>{@code ingest PORT SECONDS}: the real {@link KvEventIngest} thread subscribed to PORT, writing a 2 M-block
 *       index; measures applied block ops/s over SECONDS once ops flow, then the same payloads decoded and applied
 *       in process on one thread for comparison.</li>
 * </ul>
 * Each prints its process CPU time (all threads) over its measured window, in cores. Driven by
 * {@code perf/ingest-e2e.sh}.
 */
public final class IngestE2e {
    private static final int BLOCKS = 128;
    private static final int PROMPTS = 64;

    private IngestE2e() {
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[1]);
        int seconds = Integer.parseInt(args[2]);
        if (args[0].equals("publish")) {
            publish(port, seconds, args.length > 3 ? Long.parseLong(args[3]) : 0);
        } else {
            ingest(port, seconds);
        }
    }

    static byte[][][] payloads() {
        SplittableRandom rnd = new SplittableRandom(5);
        byte[][] store = new byte[PROMPTS][];
        byte[][] remove = new byte[PROMPTS][];
        int[] perEvent = {16, 32, 64};
        for (int p = 0; p < PROMPTS; p++) {
            long[] keys = new long[BLOCKS];
            for (int i = 0; i < BLOCKS; i++) {
                keys[i] = rnd.nextLong();
            }
            int bpe = perEvent[p % 3];
            store[p] = Payloads.stored(keys, BLOCKS / bpe, bpe, 16, rnd);
            remove[p] = Payloads.removed(keys, BLOCKS);
        }
        return new byte[][][] {store, remove};
    }

    private static double cpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1e9;
    }

    private static void publish(int port, int seconds, long opsPerSecond) throws Exception {
        byte[][][] pl = payloads();
        try (ZContext ctx = new ZContext(1)) {
            ZMQ.Socket pub = ctx.createSocket(SocketType.PUB);
            pub.setSndHWM(100_000);
            pub.bind("tcp://127.0.0.1:" + port);
            long seq = 0;
            byte[] empty = Payloads.removed(new long[0], 0);
            long warm = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            while (System.nanoTime() < warm) {
                send(pub, seq++, empty);
                Thread.sleep(5);
            }
            double cpu0 = cpuSeconds();
            long t0 = System.nanoTime();
            long end = t0 + TimeUnit.SECONDS.toNanos(seconds);
            long ops = 0;
            int p = 0;
            while (System.nanoTime() < end) {
                if (opsPerSecond > 0) {
                    long due = t0 + (long) (ops * 1e9 / opsPerSecond);
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        LockSupport.parkNanos(wait);
                    }
                }
                send(pub, seq++, pl[0][p]);
                send(pub, seq++, pl[1][p]);
                ops += 2L * BLOCKS;
                p = (p + 1) & (PROMPTS - 1);
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            System.out.printf("publisher: offered %,d block ops in %.1f s = %,.0f ops/s (a PUB drops above its HWM: the ingest counts those as gaps); cpu %.2f cores%n", ops, secs,
                ops / secs, (cpuSeconds() - cpu0) / secs);
            Thread.sleep(1_000); // let the last batches leave before the context closes
        }
    }

    private static void ingest(int port, int seconds) throws Exception {
        BlockIndex index = new BlockIndex(BlockIndexConfig.of(2_000_000, 64));
        KvEventIngest ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.start();
        ingest.addEndpoint(new KvEventSource(63, "tcp://127.0.0.1:" + port, 1, null, false, "kv", KeyMode.ENGINE));
        System.out.println("ingest: ready"); // the script starts the publisher on this line
        System.out.flush();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (blockOps(ingest) == 0) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no block ops within 60 s: " + ingest.status());
            }
            Thread.sleep(2);
        }
        long ops0 = blockOps(ingest);
        double cpu0 = cpuSeconds();
        long t0 = System.nanoTime();
        Thread.sleep(TimeUnit.SECONDS.toMillis(seconds));
        long ops = blockOps(ingest) - ops0;
        double secs = (System.nanoTime() - t0) / 1e9;
        double cpu = (cpuSeconds() - cpu0) / secs;
        SubscriberStatus st = ingest.status().get(0);
        ingest.close();
        double e2e = ops / secs;

        // In process, same payloads, one thread: decode + apply into a fresh index of the same size.
        byte[][][] pl = payloads();
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
            long localOps = 0;
            long l0 = System.nanoTime();
            long lend = l0 + TimeUnit.SECONDS.toNanos(Math.max(2, seconds / 2));
            for (int p = 0; System.nanoTime() < lend; p = (p + 1) & (PROMPTS - 1)) {
                decoder.decode(pl[0][p], 0, pl[0][p].length);
                decoder.decode(pl[1][p], 0, pl[1][p].length);
                localOps += 2L * BLOCKS;
            }
            double inProcess = localOps * 1e9 / (System.nanoTime() - l0);
            System.out.printf("ingest: applied %,d block ops in %.1f s = %,.0f ops/s; cpu %.2f cores; gaps %d, "
                    + "clears %d, decode errors %d%n", ops, secs, e2e, cpu, st.gaps(), st.clears(), st.decodeErrors());
            System.out.printf("in process (decode + apply, one thread): %,.0f ops/s; end to end / in process = %.2f%n",
                inProcess, e2e / inProcess);
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

    private static void send(ZMQ.Socket pub, long seq, byte[] payload) {
        byte[] s = new byte[8];
        for (int i = 0; i < 8; i++) {
            s[i] = (byte) (seq >>> (56 - 8 * i));
        }
        pub.sendMore("kv");
        pub.sendMore(s);
        pub.send(payload);
    }
}
