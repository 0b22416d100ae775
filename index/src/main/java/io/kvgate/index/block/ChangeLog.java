package io.kvgate.index.block;

import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The writer's log of block keys whose holder set changed, read by every {@link BlockIndexReader} to invalidate
 * its private cache. A ring of {@code 2^k} keys and a published tail; the writer never waits for readers. A
 * reader that falls more than a ring behind cannot know which keys changed and drops its whole cache (O(1), by
 * generation).
 *
 * <p>Why this is exact: the writer appends a key only after its map update is visible (segment unlock), and a
 * reader drains the log before every lookup. A value a reader cached can only be stale if the key changed after
 * the reader read it, and then the key is in the log the reader drains before its next lookup.
 *
 * <p><b>Threading contract:</b> {@link #append} by the single index writer; {@link #drain} by any number of
 * readers, each with its own cursor.
 */
final class ChangeLog {
    private final long[] ring;
    private final int mask;
    private final AtomicLong tail = new AtomicLong();

    ChangeLog(int capacityPow2) {
        ring = new long[capacityPow2];
        mask = capacityPow2 - 1;
    }

    void append(long key) {
        long t = tail.getPlain();
        ring[(int) (t & mask)] = key;
        tail.setRelease(t + 1);
    }

    long tail() {
        return tail.getAcquire();
    }

    /** Receives drained keys. */
    interface Sink {
        void invalidate(long key);
    }

    /**
     * Feeds the keys appended since {@code head} to {@code sink}; returns the new head, or -1 - newHead when
     * the reader fell behind (keys were overwritten) and must drop everything it cached.
     */
    long drain(long head, Sink sink) {
        long t = tail.getAcquire();
        if (t - head > ring.length) {
            return -1 - t;
        }
        for (long s = head; s < t; s++) {
            sink.invalidate(ring[(int) (s & mask)]);
        }
        // The slots must have been read before we check that the writer did not lap them meanwhile.
        VarHandle.loadLoadFence();
        long t2 = tail.getAcquire();
        // >=: with t2 == head + capacity the writer may be rewriting the slot of seq head right now.
        if (t2 - head >= ring.length) {
            return -1 - t2;
        }
        return t;
    }

    int capacity() {
        return ring.length;
    }
}
