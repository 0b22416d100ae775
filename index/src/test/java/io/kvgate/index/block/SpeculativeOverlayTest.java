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
}
