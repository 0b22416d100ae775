package io.kvgate.ingest.zmq;

/**
 * Sequence bookkeeping of one (endpoint, DP rank) publisher: decides, per batch, whether to apply it, skip it as a
 * replay duplicate, clear the rank first (engine restart), or fill a gap. Pure logic, no I/O, so every sequence
 * scenario is unit-tested without sockets.
 *
 * <p>The wire carries no engine identity (engine-contracts §2.3): a seq that goes backwards means the publisher
 * process restarted (seq starts at 0 per process). The one exception is the window right after a replay, when
 * live batches already covered by the replay are still queued on the SUB socket: those are duplicates, recognised
 * because they fall inside the replayed range.
 *
 * <p><b>Threading contract:</b> ingest thread only.
 */
final class SequenceTracker {
    /** In order: apply. */
    static final int APPLY = 0;
    /** Already applied (replay overlap): skip. */
    static final int DUPLICATE = 1;
    /** Seq went backwards outside a replay window: clear the rank, then apply. */
    static final int RESTART = 2;
    /** Seq jumped forward: replay from {@link #expected()}, or clear the rank and {@link #rebase}. */
    static final int GAP = 3;
    /** First batch seen, mid-stream (seq &gt; 0): replay from 0 to warm up, or {@link #rebase} and apply. */
    static final int FIRST_MIDSTREAM = 4;

    private boolean haveBaseline;
    private long lastSeq = -1;
    private long dupFloor = Long.MAX_VALUE;
    private long dupCeil = Long.MIN_VALUE;

    int onLive(long seq) {
        if (!haveBaseline) {
            haveBaseline = true;
            if (seq == 0) {
                lastSeq = 0;
                return APPLY;
            }
            lastSeq = -1;
            return FIRST_MIDSTREAM;
        }
        if (seq == lastSeq + 1) {
            lastSeq = seq;
            if (seq > dupCeil) {
                closeDupWindow(); // the stream moved past the replayed range: backwards is a restart again
            }
            return APPLY;
        }
        if (seq <= lastSeq) {
            if (seq >= dupFloor && seq <= dupCeil) {
                return DUPLICATE;
            }
            lastSeq = seq;
            closeDupWindow();
            return RESTART;
        }
        closeDupWindow();
        return GAP;
    }

    /** A batch received from replay. GAP here means the replay buffer no longer holds {@link #expected()}. */
    int onReplayed(long seq) {
        if (seq <= lastSeq) {
            return DUPLICATE;
        }
        if (seq == lastSeq + 1) {
            lastSeq = seq;
            return APPLY;
        }
        return GAP;
    }

    /** Replay that started at {@code startSeq} ended: live batches inside the replayed range are duplicates. */
    void replayFinished(long startSeq) {
        dupFloor = startSeq;
        dupCeil = lastSeq;
    }

    /** After a clear: accept {@code seq} as the new last applied batch. */
    void rebase(long seq) {
        haveBaseline = true;
        lastSeq = seq;
        closeDupWindow();
    }

    /** Forget everything: the next batch is a first batch. */
    void reset() {
        haveBaseline = false;
        lastSeq = -1;
        closeDupWindow();
    }

    long expected() {
        return lastSeq + 1;
    }

    long lastSeq() {
        return lastSeq;
    }

    private void closeDupWindow() {
        dupFloor = Long.MAX_VALUE;
        dupCeil = Long.MIN_VALUE;
    }
}
