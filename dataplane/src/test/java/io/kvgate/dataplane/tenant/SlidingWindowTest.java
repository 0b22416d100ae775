package io.kvgate.dataplane.tenant;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The per-minute and per-day windows: what they hold as time moves, corrections, and when capacity frees up. */
class SlidingWindowTest {
    private static final long S = 1_000_000_000L;

    @Test
    void bucketsLeaveExactlyOneWindowAfterTheirSecond() {
        SlidingWindow w = new SlidingWindow(60, S);
        w.advance(0);
        w.add(5);
        w.advance(30 * S);
        w.add(7);
        w.advance(59 * S + S - 1);
        assertEquals(12, w.sum(), "both still in the window at 59.999 s");
        w.advance(60 * S);
        assertEquals(7, w.sum(), "the first second's bucket left at 60 s");
        w.advance(90 * S);
        assertEquals(0, w.sum());
        w.advance(10_000 * S);
        assertEquals(0, w.sum(), "a long idle gap clears every bucket once");
    }

    @Test
    void nsUntilFitsWalksBucketsOldestFirst() {
        SlidingWindow w = new SlidingWindow(60, S);
        w.advance(0);
        w.add(40);
        w.advance(20 * S);
        w.add(40);
        w.advance(25 * S);
        assertEquals(0, w.nsUntilFits(100, 20, 25 * S), "fits now");
        assertEquals(35 * S, w.nsUntilFits(100, 30, 25 * S), "after the first bucket leaves at 60 s");
        assertEquals(55 * S, w.nsUntilFits(100, 100, 25 * S), "after both leave");
        assertEquals(-1, w.nsUntilFits(100, 101, 25 * S), "never");
        assertEquals(55 * S, w.nsUntilEmpty(25 * S));
    }

    @Test
    void adjustCorrectsAStillCountedBucketAndNeverGoesBelowZero() {
        SlidingWindow w = new SlidingWindow(60, S);
        w.advance(0);
        long e = w.add(100);
        w.advance(5 * S);
        w.add(10);
        w.adjust(e, -70);
        assertEquals(40, w.sum());
        w.adjust(e, -1_000);
        assertEquals(10, w.sum(), "clamped at the bucket's own count");
        w.advance(61 * S);
        w.adjust(e, 500);
        assertEquals(10, w.sum(), "a bucket that left the window is not corrected");
    }
}
