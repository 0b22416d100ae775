package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.control.clock.ManualClock;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The shutdown's order and timing on a manual clock: announce, serve for the delay, stop accepting, drain, close. */
class ShutdownSequenceTest {
    private final ManualClock clock = new ManualClock();
    private final List<String> done = new ArrayList<>();
    private long inFlight;

    private final ShutdownSequence.Steps steps = new ShutdownSequence.Steps() {
        @Override
        public void announce() {
            done.add("announce");
        }

        @Override
        public void stopAccepting() {
            done.add("stop accepting");
        }

        @Override
        public long inFlight() {
            return inFlight;
        }

        @Override
        public void endAndClose() {
            done.add("end and close");
        }
    };

    @Test
    void announcesAtOnceServesForTheDelayThenDrainsUntilNothingIsInFlight() {
        inFlight = 2;
        ShutdownSequence s = new ShutdownSequence(clock, 5_000, 30_000, steps);
        assertEquals(List.of("announce"), done, "not ready at the signal, before any step");
        assertEquals(ShutdownSequence.Phase.ANNOUNCED, s.step());
        clock.advance(4_999, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.ANNOUNCED, s.step(), "still accepting 1 ms before the delay ends");
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step());
        assertEquals(List.of("announce", "stop accepting"), done);
        clock.advance(10_000, TimeUnit.MILLISECONDS);
        inFlight = 1;
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step(), "a request in flight is waited for");
        inFlight = 0;
        assertEquals(ShutdownSequence.Phase.STOPPED, s.step());
        assertEquals(ShutdownSequence.Phase.STOPPED, s.step(), "nothing happens twice");
        assertEquals(List.of("announce", "stop accepting", "end and close"), done);
    }

    @Test
    void theDrainTimeoutCountsFromTheEndOfTheDelayAndEndsWhatIsStillRunning() {
        inFlight = 1;
        ShutdownSequence s = new ShutdownSequence(clock, 5_000, 30_000, steps);
        clock.advance(5_000, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step());
        clock.advance(29_999, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step());
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.STOPPED, s.step(), "the deadline: the stream still running is ended");
        assertEquals(List.of("announce", "stop accepting", "end and close"), done);
    }

    @Test
    void aZeroDelayStopsAcceptingAtTheFirstStepAndAnIdleGatewayClosesThere() {
        ShutdownSequence s = new ShutdownSequence(clock, 0, 30_000, steps);
        assertEquals(ShutdownSequence.Phase.STOPPED, s.step());
        assertEquals(List.of("announce", "stop accepting", "end and close"), done);
    }

    @Test
    void aSecondSignalSkipsTheRestOfTheDelay() {
        inFlight = 1;
        ShutdownSequence s = new ShutdownSequence(clock, 5_000, 30_000, steps);
        clock.advance(1_000, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.ANNOUNCED, s.step());
        s.skipDelay();
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step());
        clock.advance(29_999, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.DRAINING, s.step(), "the drain still gets its whole timeout");
    }

    @Test
    void anInterruptedRunEndsAtOnce() {
        inFlight = 1;
        ShutdownSequence s = new ShutdownSequence(clock, 5_000, 30_000, steps);
        Thread.currentThread().interrupt();
        try {
            s.run(20);
        } finally {
            Thread.interrupted(); // the test thread's flag: run() kept it set for its caller
        }
        assertEquals(ShutdownSequence.Phase.STOPPED, s.phase());
        assertEquals(List.of("announce", "stop accepting", "end and close"), done);
    }
}
