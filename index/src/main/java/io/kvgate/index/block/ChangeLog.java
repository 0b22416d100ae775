package io.kvgate.index.block;

import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The writer's log of blocks whose holder set changed, each with its holder set after the change, read by every
 * {@link BlockIndexReader} to keep its private cache exact. A ring of {@code 2^k} entries and a published tail; the
 * writer never waits for readers. A reader that falls more than a ring behind cannot know which keys changed and
 * drops its whole cache (O(1), by generation).
 *
 * <p><b>Why an entry carries the new state, not only the key</b> (issue #12 item 4). A reader used to drop a changed
 * key from its cache and probe the off-heap map again on its next lookup (~200 ns under the segment read lock,
 * waiting whenever the writer held that segment). Ingest at full rate changes exactly the blocks being routed (a
 * prompt's blocks are stored by the engine that serves it while the next request for it is looked up), so under
 * load most probes missed the cache: p99 was 4.7x idle. With the endpoint bitmaps of the block after the change in
 * the entry, a reader patches the cached block in place and keeps answering from its cache.
 *
 * <p><b>Why this is exact:</b> the writer appends while it still holds the segment's update lock, so the log's order
 * is the map's update order and every state a reader can probe is already logged when the probe returns. A reader
 * drains before every lookup and applies entries in order to the blocks it caches; the last entry for a key is its
 * newest logged state, so a cached block is never older than the log the reader has drained.
 *
 * <p><b>Threading contract:</b> {@link #append} by the single index writer; {@link #drain} by any number of
 * readers, each with its own cursor.
 */
final class ChangeLog {
    /** Longs per entry: key, endpoint bitmap, GPU-tier bitmap, CPU-tier bitmap. */
    private static final int STRIDE = 4;

    private final long[] ring;
    private final int mask;
    private final int capacity;
    private final AtomicLong tail = new AtomicLong();

    ChangeLog(int capacityPow2) {
        ring = new long[capacityPow2 * STRIDE];
        mask = capacityPow2 - 1;
        capacity = capacityPow2;
    }

    /**
     * Logs that {@code key} is now held by the endpoints of {@code holders} (bit e = endpoint e, meaningful with at
     * most 64 endpoints), in GPU memory by those of {@code gpu}, in CPU memory by those of {@code cpu}.
     */
    void append(long key, long holders, long gpu, long cpu) {
        long t = tail.getPlain();
        int at = (int) (t & mask) * STRIDE;
        ring[at] = key;
        ring[at + 1] = holders;
        ring[at + 2] = gpu;
        ring[at + 3] = cpu;
        tail.setRelease(t + 1);
    }

    long tail() {
        return tail.getAcquire();
    }

    /** Receives drained entries. */
    interface Sink {
        void changed(long key, long holders, long gpu, long cpu);
    }

    /**
     * Feeds the entries appended since {@code head} to {@code sink}; returns the new head, or -1 - newHead when the
     * reader fell behind (entries were overwritten, possibly while being read) and must drop everything it cached,
     * including what this drain fed it.
     */
    long drain(long head, Sink sink) {
        long t = tail.getAcquire();
        if (t - head > capacity) {
            return -1 - t;
        }
        for (long s = head; s < t; s++) {
            int at = (int) (s & mask) * STRIDE;
            sink.changed(ring[at], ring[at + 1], ring[at + 2], ring[at + 3]);
        }
        // The slots must have been read before we check that the writer did not lap them meanwhile.
        VarHandle.loadLoadFence();
        long t2 = tail.getAcquire();
        // >=: with t2 == head + capacity the writer may be rewriting the slot of seq head right now.
        if (t2 - head >= capacity) {
            return -1 - t2;
        }
        return t;
    }

    int capacity() {
        return capacity;
    }
}
