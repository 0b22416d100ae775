package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.PriorityClass.BATCH;
import static io.kvgate.dataplane.route.PriorityClass.INTERACTIVE;
import static io.kvgate.dataplane.route.PriorityClass.STANDARD;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.dataplane.route.AdmissionQueue.ShedReason;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The admission queue alone: order by class, fairness across tenants, the bound, who is shed, the wait deadline. */
class AdmissionQueueTest {
    private static final long MS = 1_000_000L;

    private final ManualClock clock = new ManualClock();
    private final List<String> shed = new ArrayList<>();
    private final List<ShedReason> reasons = new ArrayList<>();
    private final List<Long> shedWaits = new ArrayList<>();
    private final AdmissionQueue.ShedSink<String> sink = (item, cls, reason, waitedNs) -> {
        shed.add(item);
        reasons.add(reason);
        shedWaits.add(waitedNs);
    };

    private static List<String> drain(AdmissionQueue<String> q) {
        List<String> out = new ArrayList<>();
        q.drainTo(out::add);
        return out;
    }

    @Test
    void higherClassesLeaveFirstAndEachTenantInArrivalOrder() {
        AdmissionQueue<String> q = new AdmissionQueue<>(100, 5_000 * MS);
        long now = clock.nanoTime();
        q.offer("b1", BATCH, 1, now, sink);
        q.offer("s1", STANDARD, 1, now, sink);
        q.offer("b2", BATCH, 1, now, sink);
        q.offer("i1", INTERACTIVE, 1, now, sink);
        q.offer("s2", STANDARD, 1, now, sink);
        assertEquals("i1", q.peek());
        assertEquals(INTERACTIVE, q.peekClass());
        assertEquals(List.of("i1", "s1", "s2", "b1", "b2"), drain(q));
        assertTrue(q.isEmpty());
        assertNull(q.peek());
    }

    @Test
    void tenantsOfOneClassTakeTurnsSoAFloodDoesNotStarveASingleRequest() {
        AdmissionQueue<String> q = new AdmissionQueue<>(100, 5_000 * MS);
        long now = clock.nanoTime();
        for (int i = 1; i <= 5; i++) {
            q.offer("heavy" + i, STANDARD, 7, now, sink);
        }
        q.offer("light1", STANDARD, 8, now, sink);
        q.offer("other1", STANDARD, 9, now, sink);
        q.offer("light2", STANDARD, 8, now, sink);
        assertEquals(List.of("heavy1", "light1", "other1", "heavy2", "light2", "heavy3", "heavy4", "heavy5"), drain(q));
    }

    @Test
    void takeRecordsTheWaitOnTheInjectedClock() {
        AdmissionQueue<String> q = new AdmissionQueue<>(10, 5_000 * MS);
        q.offer("a", STANDARD, 1, clock.nanoTime(), sink);
        clock.advance(120, TimeUnit.MILLISECONDS);
        assertEquals("a", q.peek());
        assertEquals(120 * MS, q.take(clock.nanoTime()));
        assertEquals(0, q.size());
    }

    @Test
    void aFullQueueShedsTheLowestClassFirstThenRefusesArrivalsOfTheLowestWaitingClass() {
        AdmissionQueue<String> q = new AdmissionQueue<>(3, 5_000 * MS);
        long now = clock.nanoTime();
        assertTrue(q.offer("b1", BATCH, 1, now, sink));
        assertTrue(q.offer("b2", BATCH, 2, now, sink));
        assertTrue(q.offer("s1", STANDARD, 1, now, sink));
        // Full. A batch arrival is the lowest class present: it is the one shed.
        assertFalse(q.offer("b3", BATCH, 3, now, sink));
        assertEquals(List.of("b3"), shed);
        assertEquals(-1L, shedWaits.get(0), "an arrival that never entered did not wait");
        // An interactive arrival displaces a waiting batch request (the lowest class goes first).
        clock.advance(10, TimeUnit.MILLISECONDS);
        assertTrue(q.offer("i1", INTERACTIVE, 1, clock.nanoTime(), sink));
        assertEquals("b2", shed.get(1), "the newest of the heaviest batch tenant (a tie: the later one)");
        assertEquals(10 * MS, shedWaits.get(1));
        assertTrue(q.offer("s2", STANDARD, 2, clock.nanoTime(), sink));
        assertEquals("b1", shed.get(2), "batch is gone entirely before any standard request is shed");
        // Now only standard and interactive wait: a standard arrival is refused, an interactive displaces a standard.
        assertFalse(q.offer("s3", STANDARD, 3, clock.nanoTime(), sink));
        assertEquals("s3", shed.get(3));
        assertTrue(q.offer("i2", INTERACTIVE, 2, clock.nanoTime(), sink));
        assertEquals(3, q.size());
        assertEquals(List.of(ShedReason.QUEUE_FULL, ShedReason.QUEUE_FULL, ShedReason.QUEUE_FULL, ShedReason.QUEUE_FULL,
            ShedReason.QUEUE_FULL), reasons);
        assertEquals(2, q.size(INTERACTIVE));
        assertEquals(List.of("i1", "i2", "s1"), drain(q), "s2 was displaced: the newest standard of the tenant with most");
    }

    @Test
    void displacementTakesFromTheTenantWithTheMostWaiting() {
        AdmissionQueue<String> q = new AdmissionQueue<>(4, 5_000 * MS);
        long now = clock.nanoTime();
        q.offer("a1", BATCH, 1, now, sink);
        q.offer("b1", BATCH, 2, now, sink);
        q.offer("b2", BATCH, 2, now, sink);
        q.offer("b3", BATCH, 2, now, sink);
        q.offer("i1", INTERACTIVE, 3, now, sink);
        q.offer("i2", INTERACTIVE, 3, now, sink);
        assertEquals(List.of("b3", "b2"), shed, "tenant 2 held three of four batch slots: it loses its newest twice");
        assertEquals(List.of("i1", "i2", "a1", "b1"), drain(q));
    }

    @Test
    void aZeroQueueShedsEveryArrival() {
        AdmissionQueue<String> q = new AdmissionQueue<>(0, 5_000 * MS);
        assertFalse(q.offer("i1", INTERACTIVE, 1, clock.nanoTime(), sink));
        assertEquals(List.of("i1"), shed);
        assertTrue(q.isEmpty());
    }

    @Test
    void noRequestWaitsPastTheDeadlineGivenTheCallersLongestGap() {
        long maxWait = 1_000 * MS;
        long gap = 10 * MS;
        AdmissionQueue<String> q = new AdmissionQueue<>(100, maxWait);
        q.offer("old", BATCH, 1, clock.nanoTime(), sink);
        clock.advance(500, TimeUnit.MILLISECONDS);
        q.offer("young", INTERACTIVE, 2, clock.nanoTime(), sink);
        q.offer("old2", BATCH, 1, clock.nanoTime(), sink);
        clock.advance(489, TimeUnit.MILLISECONDS); // old waited 989 ms: its deadline is 11 ms away, after the next turn
        assertEquals(0, q.expire(clock.nanoTime(), gap, sink));
        clock.advance(1, TimeUnit.MILLISECONDS); // 990 ms: the next turn (<= 10 ms away) could be past its deadline
        assertEquals(1, q.expire(clock.nanoTime(), gap, sink));
        assertEquals(List.of("old"), shed);
        assertEquals(ShedReason.DEADLINE, reasons.get(0));
        assertTrue(shedWaits.get(0) <= maxWait, "shed at or before its deadline, never after");
        // Expiry walks every tenant and class, not just the head of the queue.
        clock.advance(500, TimeUnit.MILLISECONDS);
        assertEquals(2, q.expire(clock.nanoTime(), gap, sink));
        assertTrue(q.isEmpty());
        assertEquals(List.of("old", "young", "old2"), shed);
        for (long w : shedWaits) {
            assertTrue(w <= maxWait, "waited " + w + " ns > max wait");
        }
    }

    @Test
    void aSmallerBoundShedsTheExcessLowestFirst() {
        AdmissionQueue<String> q = new AdmissionQueue<>(10, 5_000 * MS);
        long now = clock.nanoTime();
        q.offer("i1", INTERACTIVE, 1, now, sink);
        q.offer("s1", STANDARD, 1, now, sink);
        q.offer("b1", BATCH, 1, now, sink);
        q.offer("b2", BATCH, 1, now, sink);
        q.bounds(2, 5_000 * MS);
        q.shrink(now, sink);
        assertEquals(List.of("b2", "b1"), shed);
        assertEquals(List.of("i1", "s1"), drain(q));
    }
}
