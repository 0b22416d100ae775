package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Isolated;

/**
 * The reader cache patched from the change log (issue #12 item 4) stays exact under concurrent ingest: one writer
 * stores and removes prefixes of the prompts a reader is looking up, on several endpoints, ranks and tiers, with
 * evictions and clears mixed in; at each quiescent point (the writer parked) the reader's answers and tiers, from
 * its patched cache, equal those of a new reader that reads everything from the map, and while the writer runs no
 * answer exceeds the prompt. (Evictions punch holes into held prefixes, so the reference is the same search on the
 * map, not a linear scan; {@code BlockIndexTest} checks the linear truth without evictions.)
 *
 * <p>Isolated from the parallel unit tier: the writer and the reader must run at the same time, each on a core, for
 * the race to be a race; beside another test class on a 2-core host they got a fraction of a core each and the 40
 * rounds outlasted the timeout.
 */
@Isolated
class LookupUnderIngestConsistencyTest {
    private static final int PROMPTS = 16;
    private static final int BLOCKS = 48;
    private static final int ENDPOINTS = 6;

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void cachedLookupsEqualTheMapAtEveryQuiescentPoint() throws Exception {
        // Small capacity: the writer's stores also evict, so evictions are part of the log the reader patches from.
        try (BlockIndex idx = new BlockIndex(BlockIndexConfig.of(PROMPTS * BLOCKS * 2 / 3, ENDPOINTS))) {
            long[][] prompts = new long[PROMPTS][];
            for (int p = 0; p < PROMPTS; p++) {
                prompts[p] = BlockIndexTest.chain(500 + p, BLOCKS);
            }
            int[] eps = new int[ENDPOINTS];
            for (int e = 0; e < ENDPOINTS; e++) {
                eps[e] = e;
            }
            AtomicInteger phase = new AtomicInteger(); // odd: writer running round (phase + 1) / 2; even: parked
            AtomicInteger checked = new AtomicInteger();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            int rounds = 40;
            Thread writer = new Thread(() -> {
                SplittableRandom rnd = new SplittableRandom(17);
                try {
                    for (int round = 1; round <= rounds; round++) {
                        phase.set(2 * round - 1);
                        for (int op = 0; op < 3_000; op++) {
                            long[] prompt = prompts[rnd.nextInt(PROMPTS)];
                            int ep = rnd.nextInt(ENDPOINTS);
                            int rank = rnd.nextInt(3);
                            int depth = rnd.nextInt(BLOCKS + 1);
                            int kind = rnd.nextInt(10);
                            if (kind < 5) {
                                int tier = rnd.nextInt(3);
                                for (int i = 0; i < depth; i++) {
                                    idx.stored(ep, rank, prompt[i], tier);
                                }
                            } else if (kind < 9) {
                                for (int i = BLOCKS - 1; i >= depth; i--) { // tail first, as engines free
                                    idx.removed(ep, rank, prompt[i]);
                                }
                            } else if (rnd.nextInt(20) == 0) {
                                idx.clearRank(ep, rank);
                            }
                            if ((op & 255) == 0) {
                                idx.reclaimStep();
                            }
                        }
                        phase.set(2 * round);
                        // Parked until the reader has checked this quiescent point.
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                        while (checked.get() < round && failure.get() == null) {
                            if (System.nanoTime() > deadline) {
                                throw new AssertionError("reader did not check round " + round);
                            }
                            Thread.yield(); // the reader needs the core to check this point
                        }
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }, "consistency-writer");
            writer.start();
            BlockIndexReader reader = idx.newReader();
            int[] out = new int[ENDPOINTS];
            long concurrentLookups = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(100);
            try {
                while (checked.get() < rounds && failure.get() == null && System.nanoTime() < deadline) {
                    int ph = phase.get();
                    if (ph > 0 && ph % 2 == 0 && checked.get() < ph / 2) {
                        assertAgreesWithColdReader(idx, reader, prompts, eps);
                        checked.set(ph / 2);
                        continue;
                    }
                    // While the writer runs: any answer is a depth within the prompt (no phantom beyond it).
                    long[] prompt = prompts[(int) (concurrentLookups % PROMPTS)];
                    reader.longestPrefix(prompt, BLOCKS, eps, ENDPOINTS, out, null);
                    for (int d : out) {
                        assertTrue(d >= 0 && d <= BLOCKS, "depth " + d);
                    }
                    concurrentLookups++;
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
            }
            writer.join(TimeUnit.SECONDS.toMillis(30));
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertEquals(rounds, checked.get());
            assertTrue(concurrentLookups > 0, "lookups ran while the writer did");
            assertTrue(reader.cachePatches() > 0, "the reader patched cached blocks from the log");
            assertTrue(idx.evictions() > 0, "evictions were part of the churn");
            assertAgreesWithColdReader(idx, reader, prompts, eps);
        }
    }

    private static void assertAgreesWithColdReader(BlockIndex idx, BlockIndexReader reader, long[][] prompts,
                                                   int[] eps) {
        BlockIndexReader cold = idx.newReader();
        int[] a = new int[eps.length];
        int[] at = new int[eps.length];
        int[] b = new int[eps.length];
        int[] bt = new int[eps.length];
        for (long[] prompt : prompts) {
            reader.longestPrefix(prompt, prompt.length, eps, eps.length, a, at, null);
            cold.longestPrefix(prompt, prompt.length, eps, eps.length, b, bt, null);
            assertArrayEquals(b, a, "depths");
            assertArrayEquals(bt, at, "tiers");
        }
    }
}
