package io.kvgate.index.block;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.ManualClock;
import org.junit.jupiter.api.Test;

class SpeculativeOverlayTest {

    @Test
    void aFullTableIsNotRescannedUntilSomethingCanHaveExpired() {
        ManualClock clock = new ManualClock();
        SpeculativeOverlay overlay = new SpeculativeOverlay(64, TimeUnit.SECONDS.toNanos(2), clock);
        long[] keys = new long[200];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = 1000 + i * 7919L;
        }
        overlay.recordRouted(1, keys, 128); // fills the table (2x64 slots, half full at most) and compacts once
        long compactions = overlay.compactions();
        long dropped = overlay.dropped();
        assertTrue(dropped > 0);
        for (int i = 0; i < 50; i++) {
            overlay.recordRouted(2, keys, 10); // still full of live entries: dropped, no rescans
        }
        assertEquals(compactions, overlay.compactions(), "no compaction while nothing can have expired");
        assertTrue(overlay.dropped() > dropped);
        clock.advance(2, TimeUnit.SECONDS);
        overlay.recordRouted(3, keys, 10);
        assertTrue(overlay.contains(3, keys[0]), "after the TTL the table makes room again");
    }

    @Test
    void routedBlocksCountUntilTtlLapses() {
        ManualClock clock = new ManualClock();
        try (BlockIndex idx = new BlockIndex(1024, 4)) {
            SpeculativeOverlay overlay = new SpeculativeOverlay(256, TimeUnit.SECONDS.toNanos(2), clock);
            BlockIndexReader r = idx.newReader();
            long[] chain = BlockIndexTest.chain(5, 32);
            BlockIndexTest.store(idx, 0, 0, chain, 8);
            overlay.recordRouted(1, chain, 20);
            int[] eps = {0, 1, 2};
            int[] out = new int[3];
            r.longestPrefix(chain, 32, eps, 3, out, overlay);
            assertArrayEquals(new int[] {8, 20, 0}, out);
            clock.advance(1999, TimeUnit.MILLISECONDS);
            r.longestPrefix(chain, 32, eps, 3, out, overlay);
            assertArrayEquals(new int[] {8, 20, 0}, out);
            clock.advance(1, TimeUnit.MILLISECONDS);
            r.longestPrefix(chain, 32, eps, 3, out, overlay);
            assertArrayEquals(new int[] {8, 0, 0}, out, "expired at exactly the TTL");
        }
    }

    @Test
    void overlayAndIndexCombineForOneEndpoint() {
        ManualClock clock = new ManualClock();
        try (BlockIndex idx = new BlockIndex(1024, 4)) {
            SpeculativeOverlay overlay = new SpeculativeOverlay(256, 1_000_000, clock);
            long[] chain = BlockIndexTest.chain(9, 16);
            BlockIndexTest.store(idx, 2, 1, chain, 4);
            overlay.recordRouted(2, chain, 12);
            int[] out = new int[1];
            idx.newReader().longestPrefix(chain, 16, new int[] {2}, 1, out, overlay);
            assertEquals(12, out[0]);
            // confirmed blocks are retired from the overlay by the lookup
            assertFalse(overlay.contains(2, chain[0]), "confirmed by the index");
            assertTrue(overlay.contains(2, chain[11]));
        }
    }

    @Test
    void boundedAndCompactsExpiredEntries() {
        ManualClock clock = new ManualClock();
        SpeculativeOverlay overlay = new SpeculativeOverlay(64, 1_000, clock);
        long[] chain = BlockIndexTest.chain(1, 200);
        overlay.recordRouted(0, chain, 200);
        assertEquals(200 - 64, overlay.dropped(), "table holds at most its capacity of live entries");
        clock.advanceNs(1_000);
        overlay.recordRouted(1, chain, 64);
        assertEquals(200 - 64, overlay.dropped(), "expired entries were reused");
        assertTrue(overlay.contains(1, chain[63]));
        assertFalse(overlay.contains(0, chain[0]));
        assertTrue(overlay.usedSlots() <= 64);
    }
    /**
     * More new keys per TTL than the table holds (#42: every 100 KB prompt routed adds ~1,500 blocks): a compaction
     * that freed only what expired since the last one is not repeated on the next request, but once an eighth of the
     * table can have expired, so compactions stay a small fraction of the requests while new keys keep being
     * recorded.
     */
    @Test
    void aTableOverflowingEveryTtlCompactsOncePerEighthOfItsEntriesNotOncePerRequest() {
        ManualClock clock = new ManualClock();
        long ttlNs = TimeUnit.SECONDS.toNanos(2);
        SpeculativeOverlay overlay = new SpeculativeOverlay(4096, ttlNs, clock);
        long[] keys = new long[64];
        long next = 1;
        int requests = 2_000;
        for (int r = 0; r < requests; r++) {
            for (int i = 0; i < keys.length; i++) {
                keys[i] = next++ * 0x9E3779B97F4A7C15L;
            }
            overlay.recordRouted(r % 4, keys, keys.length);
            clock.advanceNs(ttlNs / 200); // 12,800 keys per TTL into a table of 4,096 entries
        }
        long inserted = (long) requests * keys.length;
        assertTrue(overlay.compactions() <= inserted / (4096 / 8) + 1,
            "at most one compaction per eighth of the table inserted: " + overlay.compactions() + " for " + requests
                + " requests");
        assertTrue(overlay.compactions() >= requests / 200, "a full table still makes room as entries expire: "
            + overlay.compactions());
        assertTrue(overlay.contains(3, keys[keys.length - 1]) || overlay.dropped() > 0);
        long recorded = inserted - overlay.dropped();
        assertTrue(recorded >= inserted / 8, "new keys keep being recorded: " + recorded + " of " + inserted);
    }

    @Test
    void aCompactionThatFreedNothingWaitsUntilAnEighthOfTheTableCanHaveExpired() {
        ManualClock clock = new ManualClock();
        SpeculativeOverlay overlay = new SpeculativeOverlay(64, 1_000, clock);
        overlay.recordRouted(0, BlockIndexTest.chain(3, 16), 16); // expire at 1,000
        clock.advanceNs(900);
        overlay.recordRouted(1, BlockIndexTest.chain(5, 64), 64); // 48 fit; then a compaction that frees nothing
        long compactions = overlay.compactions();
        assertEquals(1, compactions);
        long[] later = BlockIndexTest.chain(4, 8);
        clock.advanceNs(100); // the 16 (a quarter) have expired, but within the histogram's bucket (1/64 of the TTL)
        overlay.recordRouted(2, later, 8);
        assertEquals(compactions, overlay.compactions(), "no rescan before the end of the bucket where an eighth expires");
        clock.advanceNs(10); // 900 + the end of bucket 6 (7 x 1,000 / 64 + 1 = 110)
        overlay.recordRouted(2, later, 8);
        for (long k : later) {
            assertTrue(overlay.contains(2, k), "the expired quarter made room");
        }
    }
}
