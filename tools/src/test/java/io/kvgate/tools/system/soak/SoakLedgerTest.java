package io.kvgate.tools.system.soak;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Which failed requests the soak lets pass: only those in flight on an engine when it was killed. */
class SoakLedgerTest {
    private static final String A = "127.0.0.1:1001";
    private static final String B = "127.0.0.1:1002";

    private static SoakLedger.Outcome failed(long start, long end, String endpoint) {
        return new SoakLedger.Outcome(start, end, endpoint, false, "x");
    }

    @Test
    void aFailureIsExcusedOnlyWhenInFlightOnTheKilledEngine() {
        SoakLedger l = new SoakLedger();
        l.killed(new SoakLedger.Kill(A, 100, 110));
        SoakLedger.Outcome onA = failed(90, 120, A);
        SoakLedger.Outcome onBMeanwhile = failed(90, 120, B);
        SoakLedger.Outcome onAAfterItCameBack = failed(200, 210, A);
        SoakLedger.Outcome onAFinishedBeforeTheKill = failed(50, 99, A);
        SoakLedger.Outcome unknownEngineInWindow = failed(105, 130, null);
        SoakLedger.Outcome unknownEngineOutsideWindow = failed(300, 310, null);
        for (SoakLedger.Outcome o : List.of(onA, onBMeanwhile, onAAfterItCameBack, onAFinishedBeforeTheKill,
            unknownEngineInWindow, unknownEngineOutsideWindow)) {
            l.record(o);
        }
        l.record(new SoakLedger.Outcome(90, 120, B, true, null));

        SoakLedger.Attribution a = l.attribute();
        assertEquals(List.of(onA), a.onKilledEngine());
        assertEquals(List.of(unknownEngineInWindow), a.inKillWindowEngineUnknown());
        assertEquals(List.of(onBMeanwhile, onAAfterItCameBack, onAFinishedBeforeTheKill, unknownEngineOutsideWindow),
            a.unexplained());
        assertEquals(1, l.ok());
    }
}
