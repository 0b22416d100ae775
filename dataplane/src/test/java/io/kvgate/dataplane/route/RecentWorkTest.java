package io.kvgate.dataplane.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The recent new blocks per endpoint (kv.spread: recent_work): growth of the engine's blocks, decayed by time. */
class RecentWorkTest {
    private static final long S = 1_000_000_000L;

    @Test
    void whatAnEndpointHeldBeforeItWasWatchedIsNotRecentWork() {
        RecentWork w = new RecentWork(4);
        assertEquals(0, w.update(1, 500, 10 * S), 0);
        assertEquals(12, w.update(1, 512, 10 * S), 1e-9);
        assertEquals(0, w.update(2, 7, 10 * S), 0, "each endpoint starts on its own");
    }

    @Test
    void aWatchedEndpointCountsEveryBlockFromTheWatchOnEvenBeforeItsFirstUpdate() {
        RecentWork w = new RecentWork(2);
        w.watch(0, 500, 10 * S);
        w.watch(1, 7, 10 * S);
        assertEquals(10, w.update(0, 510, 10 * S + 1), 1e-6, "stored after the watch began: recent work");
        assertEquals(0, w.update(1, 7, 10 * S + 1), 0);
    }

    @Test
    void recentBlocksDecayOverTheWindowOnTheGivenClock() {
        RecentWork w = new RecentWork(2);
        w.update(0, 0, 0);
        assertEquals(20, w.update(0, 20, 0), 1e-9);
        RecentWork slow = new RecentWork(1, 2 * RecentWork.WINDOW_NS); // kv.recent_work_window_ms: 2000
        slow.update(0, 0, 0);
        slow.update(0, 20, 0);
        assertEquals(20 * Math.exp(-0.5), slow.update(0, 20, RecentWork.WINDOW_NS), 1e-9);
        assertEquals(20 * Math.exp(-1), w.update(0, 20, RecentWork.WINDOW_NS), 1e-9);
        assertEquals(20 * Math.exp(-2) + 5, w.update(0, 25, 2 * RecentWork.WINDOW_NS), 1e-9);
        assertEquals(20 * Math.exp(-2) + 5, w.update(0, 25, 2 * RecentWork.WINDOW_NS - 5), 1e-9,
            "a clock read that goes back does not decay nor grow it");
        assertEquals(0, w.update(0, 25, 60 * S), 1e-9);
    }

    @Test
    void blocksThisGatewaySentCountAtOnceAndTheirEventsConfirmThemInsteadOfAdding() {
        RecentWork w = new RecentWork(2, RecentWork.WINDOW_NS);
        w.update(0, 0, 0);
        w.routed(0, 10);
        assertEquals(10, w.update(0, 0, 0), 1e-9, "sent, no event yet");
        assertEquals(10, w.update(0, 6, 1), 1e-6, "6 of them stored");
        assertEquals(13, w.update(0, 13, 2), 1e-6, "the last 4 and 3 blocks another gateway's request stored");
        w.routed(1, 5);
        assertEquals(0, w.update(1, 0, 3), 0, "an endpoint not watched yet starts at 0");
    }

    @Test
    void aCounterThatDoesNotGrowAddsNothing() {
        RecentWork w = new RecentWork(1);
        w.update(0, 100, 0);
        assertEquals(0, w.update(0, 100, 1), 0);
        assertEquals(0, w.update(0, 90, 2), 0, "never negative");
        assertEquals(10, w.update(0, 100, 3), 1e-6, "counted from the last value seen");
    }
}
