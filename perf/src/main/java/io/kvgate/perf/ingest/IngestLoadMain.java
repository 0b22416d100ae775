package io.kvgate.perf.ingest;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.ingest.zmq.KeyMode;
import io.kvgate.ingest.zmq.KvEventIngest;
import io.kvgate.ingest.zmq.KvEventSource;
import io.kvgate.ingest.zmq.SubscriberStatus;
import io.kvgate.perf.index.IndexFixtures;
import org.HdrHistogram.Histogram;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * End-to-end ingest load on loopback: real JeroMQ PUBs (one per DP rank) publish vLLM-shaped store/remove batches
 * as fast as the ingest keeps up (bounded in-flight window), the real {@link KvEventIngest} thread decodes and
 * writes the index, and the main thread runs 128-block / 64-endpoint lookups, first idle then during the load.
 * Prints applied block operations per second and lookup p50/p99/p99.9 idle vs loaded.
 * Usage: {@code IngestLoadMain [seconds=10] [ranks=2] [port=46000]}
 */
public final class IngestLoadMain {
    private static final int ENDPOINTS = 64;
    private static final int BLOCKS = 128;
    private static final int PROMPTS = 64;

    private IngestLoadMain() {
    }

    public static void main(String[] args) throws Exception {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int ranks = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        int port = args.length > 2 ? Integer.parseInt(args[2]) : 46_000;
        SplittableRandom rnd = new SplittableRandom(3);
        BlockIndex index = new BlockIndex(BlockIndexConfig.of(2_000_000, ENDPOINTS));
        long[][] prompts = new long[PROMPTS][];
        for (int p = 0; p < PROMPTS; p++) {
            prompts[p] = IndexFixtures.chain(rnd, BLOCKS);
        }
        IndexFixtures.populate(index, prompts, ENDPOINTS - 1, "mixed", 500_000, rnd);
        byte[][] store = new byte[PROMPTS][];
        byte[][] remove = new byte[PROMPTS][];
        for (int p = 0; p < PROMPTS; p++) {
            store[p] = Payloads.stored(prompts[p], 4, 32, 16, rnd);
            remove[p] = Payloads.removed(prompts[p], BLOCKS);
        }

        KvEventIngest ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.start();
        int endpoint = ENDPOINTS - 1;
        ingest.addEndpoint(new KvEventSource(endpoint, "tcp://127.0.0.1:" + port, ranks, null, false, "kv",
            KeyMode.ENGINE));
        ZContext ctx = new ZContext(1);
        ZMQ.Socket[] pubs = new ZMQ.Socket[ranks];
        long[] seq = new long[ranks];
        for (int r = 0; r < ranks; r++) {
            pubs[r] = ctx.createSocket(SocketType.PUB);
            pubs[r].setSndHWM(1_000_000);
            pubs[r].bind("tcp://127.0.0.1:" + (port + r));
        }
        // handshake: empty batches until every rank has applied one
        byte[] empty = Payloads.removed(new long[0], 0);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            boolean all = true;
            for (int r = 0; r < ranks; r++) {
                send(pubs[r], seq[r]++, empty);
            }
            Thread.sleep(5);
            for (SubscriberStatus s : ingest.status()) {
                all &= s.lastSeq() >= 0;
            }
            if (all && ingest.status().size() == ranks) {
                break;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("handshake timed out: " + ingest.status());
            }
        }

        BlockIndexReader reader = index.newReader();
        int[] eps = new int[ENDPOINTS];
        for (int e = 0; e < ENDPOINTS; e++) {
            eps[e] = e;
        }
        int[] out = new int[ENDPOINTS];
        Histogram idle = lookups(reader, prompts, eps, out, seconds);

        AtomicBoolean stop = new AtomicBoolean();
        long opsBefore = index.storedOps() + index.removedOps();
        Thread publisher = new Thread(() -> {
            int p = 0;
            long sent = 0;
            while (!stop.get()) {
                // bounded window: at most ~64 batches per rank ahead of what the ingest applied (no HWM drops)
                long applied = index.storedOps() + index.removedOps() - opsBefore;
                if (sent - applied > 64L * 256 * ranks) {
                    java.util.concurrent.locks.LockSupport.parkNanos(20_000); // 2 cores: do not burn the ingest's CPU
                    continue;
                }
                for (int r = 0; r < ranks; r++) {
                    send(pubs[r], seq[r]++, store[p]);
                    send(pubs[r], seq[r]++, remove[p]);
                    sent += 256;
                }
                p = (p + 1) & (PROMPTS - 1);
            }
        }, "load-publisher");
        long t0 = System.nanoTime();
        publisher.start();
        Histogram loaded = lookups(reader, prompts, eps, out, seconds);
        stop.set(true);
        publisher.join();
        long elapsedNs = System.nanoTime() - t0;
        long ops = index.storedOps() + index.removedOps() - opsBefore;

        System.out.printf("ranks=%d seconds=%d%n", ranks, seconds);
        System.out.printf("applied block ops: %,d in %.1f s = %,.0f ops/s%n", ops, elapsedNs / 1e9,
            ops * 1e9 / elapsedNs);
        for (SubscriberStatus s : ingest.status()) {
            System.out.println("  " + s);
        }
        print("idle  ", idle);
        print("loaded", loaded);
        System.out.printf("p99 loaded/idle = %.2f%n",
            (double) loaded.getValueAtPercentile(99) / idle.getValueAtPercentile(99));
        ingest.close();
        ctx.close();
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

    private static Histogram lookups(BlockIndexReader reader, long[][] prompts, int[] eps, int[] out, int seconds) {
        Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(1), 3);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        int p = 0;
        while (System.nanoTime() < end) {
            long t = System.nanoTime();
            reader.longestPrefix(prompts[p], BLOCKS, eps, ENDPOINTS, out, null);
            h.recordValue(Math.min(System.nanoTime() - t, TimeUnit.SECONDS.toNanos(1)));
            p = (p + 1) & (PROMPTS - 1);
        }
        return h;
    }

    private static void print(String label, Histogram h) {
        System.out.printf("lookup %s: n=%,d p50=%,d ns p99=%,d ns p99.9=%,d ns max=%,d ns%n", label,
            h.getTotalCount(), h.getValueAtPercentile(50), h.getValueAtPercentile(99),
            h.getValueAtPercentile(99.9), h.getMaxValue());
    }
}
