package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.SequenceTracker.APPLY;
import static io.kvgate.ingest.zmq.SequenceTracker.DUPLICATE;
import static io.kvgate.ingest.zmq.SequenceTracker.FIRST_MIDSTREAM;
import static io.kvgate.ingest.zmq.SequenceTracker.GAP;
import static io.kvgate.ingest.zmq.SequenceTracker.RESTART;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SequenceTrackerTest {

    @Test
    void inOrderFromZero() {
        SequenceTracker t = new SequenceTracker();
        for (long s = 0; s < 5; s++) {
            assertEquals(APPLY, t.onLive(s));
        }
        assertEquals(4, t.lastSeq());
    }

    @Test
    void joiningMidstreamAsksForWarmup() {
        SequenceTracker t = new SequenceTracker();
        assertEquals(FIRST_MIDSTREAM, t.onLive(40));
        assertEquals(0, t.expected());
        t.rebase(40);
        assertEquals(APPLY, t.onLive(41));
    }

    @Test
    void backwardsIsARestart() {
        SequenceTracker t = new SequenceTracker();
        t.onLive(0);
        t.onLive(1);
        t.onLive(2);
        assertEquals(RESTART, t.onLive(0));
        assertEquals(APPLY, t.onLive(1));
        assertEquals(RESTART, t.onLive(1), "same seq again is a restart too");
    }

    @Test
    void gapFilledByReplayThenQueuedLiveDuplicatesSkipped() {
        SequenceTracker t = new SequenceTracker();
        t.onLive(0);
        t.onLive(1);
        assertEquals(GAP, t.onLive(5));
        assertEquals(2, t.expected());
        // replay from 2 brings 2..6
        assertEquals(APPLY, t.onReplayed(2));
        assertEquals(APPLY, t.onReplayed(3));
        assertEquals(DUPLICATE, t.onReplayed(3));
        assertEquals(APPLY, t.onReplayed(4));
        assertEquals(APPLY, t.onReplayed(5));
        assertEquals(APPLY, t.onReplayed(6));
        t.replayFinished(2);
        // live 6 was queued on the SUB while replaying: a duplicate, not a restart
        assertEquals(DUPLICATE, t.onLive(6));
        assertEquals(APPLY, t.onLive(7));
        // the window closes once the stream moves on: a later backwards seq is a restart
        assertEquals(RESTART, t.onLive(3));
    }

    @Test
    void restartBelowTheReplayWindowIsStillARestart() {
        SequenceTracker t = new SequenceTracker();
        t.onLive(0);
        assertEquals(GAP, t.onLive(100));
        for (long s = 1; s <= 100; s++) {
            assertEquals(APPLY, t.onReplayed(s));
        }
        t.replayFinished(1);
        assertEquals(RESTART, t.onLive(0), "seq 0 is below the replayed range [1, 100]");
    }

    @Test
    void replayThatCannotReachTheStartReportsGap() {
        SequenceTracker t = new SequenceTracker();
        t.onLive(0);
        assertEquals(GAP, t.onLive(20_000));
        assertEquals(GAP, t.onReplayed(10_001), "buffer starts after what we missed");
        t.rebase(10_001);
        assertEquals(APPLY, t.onReplayed(10_002));
    }

    @Test
    void resetMakesTheNextBatchAFirstBatch() {
        SequenceTracker t = new SequenceTracker();
        t.onLive(0);
        t.onLive(1);
        t.reset();
        assertEquals(FIRST_MIDSTREAM, t.onLive(7));
        t.reset();
        assertEquals(APPLY, t.onLive(0));
    }
}
