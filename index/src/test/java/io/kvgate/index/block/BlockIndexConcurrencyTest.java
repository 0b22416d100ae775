package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** One writer churning the index while a reader looks up: the reader never sees a block nobody stored. */
class BlockIndexConcurrencyTest {

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void readerSeesStableBlocksAndNeverPhantomsWhileWriterChurns() throws Exception {
        try (BlockIndex idx = new BlockIndex(1 << 16, 8)) {
            long[] stable = BlockIndexTest.chain(1, 64);
            long[] churn = BlockIndexTest.chain(2, 64);
            long[] never = BlockIndexTest.chain(3, 64);
            BlockIndexTest.store(idx, 0, 0, stable, 10);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread writer = new Thread(() -> {
                try {
                    for (int round = 0; round < 300 && !stop.get(); round++) {
                        int rank = round & 7;
                        BlockIndexTest.store(idx, 1, rank, churn, 64);
                        BlockIndexTest.store(idx, 0, 1, churn, 32); // endpoint 0 on another rank, then gone
                        for (long k : churn) {
                            idx.removed(1, rank, k);
                        }
                        idx.clearRank(0, 1);
                    }
                } catch (Throwable t) {
                    failure.set(t);
                } finally {
                    stop.set(true);
                }
            }, "test-writer");
            writer.start();
            BlockIndexReader r = idx.newReader();
            int[] eps = {0, 1, 2};
            int[] out = new int[3];
            long lookups = 0;
            while (!stop.get() && lookups < 2_000_000) {
                r.longestPrefix(stable, 64, eps, 3, out, null);
                assertTrue(out[0] >= 10, "endpoint 0 always holds 10 stable blocks: " + out[0]);
                assertEquals(0, out[1]);
                r.longestPrefix(churn, 64, eps, 3, out, null);
                assertTrue(out[0] <= 32 && out[1] <= 64 && out[2] == 0, java.util.Arrays.toString(out));
                r.longestPrefix(never, 64, eps, 3, out, null);
                assertEquals(0, out[0] + out[1] + out[2]);
                lookups++;
            }
            stop.set(true);
            writer.join();
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertEquals(10, idx.blocks(0));
            assertEquals(0, idx.blocks(1));
            assertTrue(lookups > 0);
        }
    }
}
