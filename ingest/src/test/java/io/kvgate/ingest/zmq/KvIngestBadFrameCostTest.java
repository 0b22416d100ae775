package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.TestEngine.batch;
import static io.kvgate.ingest.zmq.TestEngine.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Review M15: malformed frames, backward seqs and unfillable gaps each clear the rank, and a clear must cost O(1)
 * whatever the index holds. Asserted on the index's work counters (entries visited), never on time. The frames go
 * through the ingest's own live path (sequence tracking, decoding, clearing) without sockets.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class KvIngestBadFrameCostTest {
    private static final int FRAMES = 1_000_000;

    @Test
    void aMillionBadFramesCostO1EachAgainstABigIndex() {
        try (BlockIndex index = new BlockIndex(1 << 18, 8)) {
            for (long k = 0; k < 200_000; k++) {
                index.stored(1, 0, 10_000_000L + k); // another engine's inventory: must never be walked
            }
            KvEventIngest ingest = new KvEventIngest(index, new ManualClock());
            RankSubscriber s = new RankSubscriber(
                new KvEventSource(2, "tcp://127.0.0.1:1", 1, null, false, "", KeyMode.ENGINE, "r", List.of(), null), 0);
            byte[] good = batch(stored(42));
            byte[] malformed = {(byte) 0x92, (byte) 0xcb, 1, 2}; // truncated float: a broken frame
            long visitsBefore = index.entriesVisited();
            long seq = 0;
            for (int i = 0; i < FRAMES; i++) {
                ingest.injectLive(s, seq++, good);          // the rank holds a block again...
                switch (i % 3) {
                    case 0 -> ingest.injectLive(s, seq, malformed);   // ...a broken frame clears it
                    case 1 -> ingest.injectLive(s, seq = 0, good);      // ...a forged restart (seq back to 0)
                    default -> ingest.injectLive(s, seq += 5, good);    // ...a forged forward jump, no replay
                }
                seq++;
            }
            SubscriberStatus st = s.status();
            assertEquals((FRAMES + 2) / 3, st.decodeErrors(), st.toString());
            assertEquals(FRAMES / 3, st.restarts(), st.toString());
            assertEquals(FRAMES / 3, st.gaps(), st.toString());
            assertEquals(FRAMES, st.clears(), "every bad frame, restart and unfillable gap cleared the rank");
            assertEquals(0, index.clearEntryVisits(), "no clear walked the map");
            // One entry visit per applied block op; the clears added none (200k other entries never visited).
            long blockOps = st.blockOps();
            assertEquals(blockOps, index.entriesVisited() - visitsBefore);
            assertTrue(blockOps <= 2L * FRAMES, "at most two stores per bad frame: " + blockOps);
            BlockIndexReader r = index.newReader();
            assertEquals(200_000, index.blocks(1), "the other engine's inventory is intact");
            assertTrue(r.holds(1, 10_000_000L));
            assertEquals(r.holds(2, 42) ? 1 : 0, index.blocks(2), "counts equal what lookups find");
            assertTrue(index.reclaimed() > 0);
            assertFalse(index.clears() < FRAMES);
        }
    }
}
