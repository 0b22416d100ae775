package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class ArrivalSchedulerTest {
    private static final long SECOND = 1_000_000_000L;

    /** Drives a scheduler with a manual clock in fixed steps, collecting intended times and poll-time lags. */
    private static List<long[]> drive(ArrivalScheduler s, ManualClock clock, long stepNs, long untilNs) {
        List<long[]> got = new ArrayList<>();
        for (int guard = 0; guard < 10_000_000 && clock.nanoTime() <= untilNs; guard++) {
            long now = clock.nanoTime();
            s.poll(now, Integer.MAX_VALUE, (seq, intended) -> got.add(new long[] {seq, intended, now}));
            clock.advanceNs(stepNs);
        }
        return got;
    }

    @Test
    void constantRateHandsOutExactlyRateTimesDurationEvenlySpaced() {
        ManualClock clock = new ManualClock(0);
        long start = 5 * SECOND;
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 1000, 1, start, start + 2 * SECOND);
        List<long[]> got = drive(s, clock, 100_000, start + 3 * SECOND);
        assertEquals(2000, got.size());
        for (int i = 0; i < got.size(); i++) {
            assertEquals(i, got.get(i)[0]);
            assertEquals(start + i * 1_000_000L, got.get(i)[1], "arrival " + i);
            // Never handed out before its time, and at most one step after it.
            assertTrue(got.get(i)[2] >= got.get(i)[1]);
            assertTrue(got.get(i)[2] - got.get(i)[1] < 100_000);
        }
        assertTrue(s.finished());
        assertEquals(Long.MAX_VALUE, s.nextDueNs());
    }

    @Test
    void constantRateDoesNotDriftWithNonIntegerGaps() {
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 3, 1, 0, 10 * SECOND);
        List<Long> times = new ArrayList<>();
        s.poll(Long.MAX_VALUE - 1, Integer.MAX_VALUE, (seq, t) -> times.add(t));
        assertEquals(30, times.size());
        assertEquals(9_666_666_666L, times.get(29)); // 29 / 3 s, no accumulated rounding
    }

    @Test
    void nothingIsDueBeforeItsTime() {
        ManualClock clock = new ManualClock(0);
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 10, 1, SECOND, 2 * SECOND);
        assertEquals(0, s.poll(clock.nanoTime(), 100, (a, b) -> {}));
        assertEquals(SECOND, s.nextDueNs());
        clock.advance(999, TimeUnit.MILLISECONDS);
        assertEquals(0, s.poll(clock.nanoTime(), 100, (a, b) -> {}));
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertEquals(1, s.poll(clock.nanoTime(), 100, (a, b) -> {}));
        assertFalse(s.finished());
    }

    @Test
    void aLateClockGetsEveryMissedArrivalWithItsOriginalIntendedTime() {
        ManualClock clock = new ManualClock(0);
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 100, 1, 0, SECOND);
        clock.advance(500, TimeUnit.MILLISECONDS); // the generator stalled for half a second
        List<Long> intended = new ArrayList<>();
        // Bounded batches, as the driver does.
        assertEquals(20, s.poll(clock.nanoTime(), 20, (seq, t) -> intended.add(t)));
        assertEquals(51, 20 + s.poll(clock.nanoTime(), 1000, (seq, t) -> intended.add(t)));
        assertEquals(0L, intended.get(0));
        assertEquals(500_000_000L, intended.get(50)); // timeline unchanged: latency will count the stall
    }

    @Test
    void poissonCountAndMeanRateMatchTheRate() {
        double rate = 2000;
        long duration = 50 * SECOND;
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.POISSON, rate, 7, 0, duration);
        long[] count = {0};
        long[] last = {0};
        double[] sumSq = {0};
        long[] prev = {0};
        s.poll(Long.MAX_VALUE - 1, Integer.MAX_VALUE, (seq, t) -> {
            count[0]++;
            double gap = t - prev[0];
            sumSq[0] += gap * gap;
            prev[0] = t;
            last[0] = t;
        });
        double expected = rate * 50;
        // Poisson count: sd = sqrt(100000) ~ 316; 5 sd bound.
        assertTrue(Math.abs(count[0] - expected) < 5 * Math.sqrt(expected), "count " + count[0]);
        double meanGap = (double) last[0] / count[0];
        assertEquals(1e9 / rate, meanGap, 1e9 / rate * 0.02);
        // Exponential gaps: E[gap^2] = 2 * mean^2 (a constant process would give 1x).
        double secondMoment = sumSq[0] / count[0];
        assertEquals(2.0, secondMoment / (meanGap * meanGap), 0.1);
    }

    @Test
    void poissonIsDeterministicForASeedAndDiffersAcrossSeeds() {
        long[] a = times(11);
        long[] b = times(11);
        long[] c = times(12);
        assertArrayEquals(a, b);
        assertFalse(java.util.Arrays.equals(a, c));
    }

    private static long[] times(long seed) {
        ArrivalScheduler s = new ArrivalScheduler(ArrivalScheduler.Arrival.POISSON, 500, seed, 0, SECOND);
        List<Long> t = new ArrayList<>();
        // Polled at uneven times: the timeline must not depend on when it is polled.
        ManualClock clock = new ManualClock(0);
        for (int i = 0; i < 100_000 && !s.finished(); i++) {
            clock.advanceNs(1_000_000L + (i % 7) * 333_333L);
            s.poll(clock.nanoTime(), 3, (seq, x) -> t.add(x));
        }
        return t.stream().mapToLong(Long::longValue).toArray();
    }

    @Test
    void rejectsNonsense() {
        assertThrows(IllegalArgumentException.class, () -> new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 0, 1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, Double.NaN, 1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new ArrivalScheduler(ArrivalScheduler.Arrival.CONSTANT, 1, 1, 5, 1));
    }
}
