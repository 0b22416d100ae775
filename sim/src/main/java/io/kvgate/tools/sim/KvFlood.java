package io.kvgate.tools.sim;

import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * {@code --kv-flood RATE --kv-batch N}: the simulator's KV publisher replaying real vLLM events at a fixed rate of
 * block operations, for measuring ingest end to end (issue #12 item 5, {@code perf/ingest-e2e.sh}) without driving
 * requests. {@value #PROMPTS} prompts of random token ids are keyed once at start with the engine's own
 * {@link BlockKeyer} (the configured hash algorithm, seed and block size); each is then published, round robin over
 * the DP ranks, as one batch storing it in BlockStored events of N blocks (parents chained, token ids, block size,
 * medium, in the configured event form) followed by one batch removing all its blocks (tail first), again and
 * again. The index it feeds therefore stays bounded while every event is one a real engine could send.
 *
 * <p>The batches go through the same path as the engine's own: the engine loop assigns each rank's next sequence
 * number and hands the payload to the {@link KvEventPublisher} thread, so seq numbers stay gapless unless the
 * publisher's queue overflows (then counted in {@code event_batches_dropped}, and a subscriber sees the gap). At
 * most {@value #MAX_IN_FLIGHT} batches wait for the engine loop: a rate it cannot take is offered more slowly,
 * and the summary line says how fast it went.
 *
 * <p>Public for {@code perf}'s end-to-end benchmark, which decodes the same payloads in process as its reference.
 *
 * <p>Threading: one daemon thread of its own paces and submits; payloads are immutable once built.
 */
public final class KvFlood implements AutoCloseable {
    public static final int PROMPTS = 64;
    /** Blocks per prompt: 128, rounded up to a whole number of events. */
    public static final int PROMPT_BLOCKS = 128;
    private static final int MAX_IN_FLIGHT = 1024;
    /** Token ids drawn below this (a Qwen-sized vocabulary: 1-, 2-, 3- and 5-byte CBOR ints). */
    private static final int VOCAB = 151_643;

    /** The batches of prompt p: {@code stored[p]} then {@code removed[p]}, each a complete payload frame. */
    public record Batches(byte[][] stored, byte[][] removed, int blocksPerPrompt, long[][] keys, int[][] tokens) {
        public long blockOpsPerPrompt() {
            return 2L * blocksPerPrompt;
        }
    }

    private final SimulatorConfig config;
    private final EngineSimulator sim;
    private final Batches[] perRank;
    private final Thread thread;
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile boolean running = true;

    KvFlood(SimulatorConfig config, EngineSimulator sim) {
        this.config = config;
        this.sim = sim;
        this.perRank = new Batches[config.dpRanks];
        for (int r = 0; r < perRank.length; r++) {
            perRank[r] = batches(config, r);
        }
        this.thread = new Thread(this::run, "sim-kv-flood");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    /**
     * The flood's prompts and payloads for DP rank {@code rank}: deterministic for a configuration (seeded by
     * {@code --seed}), so a consumer can rebuild the same bytes (the in-process reference of the e2e benchmark).
     */
    public static Batches batches(SimulatorConfig c, int rank) {
        int perEvent = c.kvFloodBatch;
        int blockSize = c.effectiveBlockSize();
        int blocks = (PROMPT_BLOCKS + perEvent - 1) / perEvent * perEvent;
        BlockKeyer keyer = BlockKeyer.forAlgo(c.effectiveHashAlgo(), c.hashSeed);
        KvEventEncoder enc = new KvEventEncoder(c.eventForm, keyer.unsignedKeys(), false);
        SplittableRandom rnd = new SplittableRandom(c.seed * 31 + rank);
        byte[][] stored = new byte[PROMPTS][];
        byte[][] removed = new byte[PROMPTS][];
        long[][] keys = new long[PROMPTS][];
        int[][] tokens = new int[PROMPTS][];
        long[] tailFirst = new long[blocks];
        for (int p = 0; p < PROMPTS; p++) {
            int[] t = rnd.ints((long) blocks * blockSize, 0, VOCAB).toArray();
            long[] k = keyer.blockKeys(t, blockSize, null);
            for (int b = 0; b < blocks; b += perEvent) {
                enc.blockStored(k, b, b + perEvent, b > 0, b > 0 ? k[b - 1] : 0, t, blockSize, null, 0, null);
            }
            stored[p] = enc.finishBatch(0.0, rank);
            for (int i = 0; i < blocks; i++) {
                tailFirst[i] = k[blocks - 1 - i]; // vLLM frees a request's blocks tail first
            }
            enc.blockRemoved(tailFirst, blocks);
            removed[p] = enc.finishBatch(0.0, rank);
            keys[p] = k;
            tokens[p] = t;
        }
        return new Batches(stored, removed, blocks, keys, tokens);
    }

    private void run() {
        long rate = config.kvFloodRate;
        long t0 = System.nanoTime();
        long end = config.kvFloodSeconds == 0 ? Long.MAX_VALUE : t0 + TimeUnit.SECONDS.toNanos(config.kvFloodSeconds);
        double cpu0 = processCpuSeconds();
        long ops = 0;
        long batches = 0;
        long droppedBefore = sim.stats.get("event_batches_dropped");
        int p = 0;
        int rank = 0;
        while (running && System.nanoTime() < end) {
            long due = t0 + (long) (ops * 1e9 / rate);
            long wait = due - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
                continue;
            }
            if (inFlight.get() >= MAX_IN_FLIGHT) {
                LockSupport.parkNanos(50_000); // the engine loop is behind: offer more slowly, never queue more
                continue;
            }
            Batches b = perRank[rank];
            byte[] store = b.stored()[p];
            byte[] remove = b.removed()[p];
            int r = rank;
            inFlight.incrementAndGet();
            boolean queued = sim.onLoopAsync(() -> {
                sim.caches.publishBatch(r, store);
                sim.caches.publishBatch(r, remove);
                inFlight.decrementAndGet();
            });
            if (!queued) {
                break; // the engine is shutting down
            }
            ops += b.blockOpsPerPrompt();
            batches += 2;
            rank = rank + 1 == perRank.length ? 0 : rank + 1;
            if (rank == 0) {
                p = (p + 1) % PROMPTS;
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        if (secs > 0) {
            System.out.printf("kv flood: offered %,d block ops in %,d batches over %.1f s = %,.0f block ops/s "
                    + "(target %,d; %,d batches dropped by the publisher queue); simulator cpu %.2f cores%n",
                ops, batches, secs, ops / secs, rate, sim.stats.get("event_batches_dropped") - droppedBefore,
                (processCpuSeconds() - cpu0) / secs);
            System.out.flush();
        }
    }

    private static double processCpuSeconds() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime() / 1e9;
    }

    @Override
    public void close() {
        running = false;
        try {
            thread.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
