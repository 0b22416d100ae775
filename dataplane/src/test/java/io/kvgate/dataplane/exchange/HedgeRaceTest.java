package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.exchange.HedgeRace.Runner;
import org.junit.jupiter.api.Test;

/** The race decision alone, on times the test passes in. */
class HedgeRaceTest {
    @Test
    void dueOnceAtTheDeadlineWithoutAToken() {
        HedgeRace r = new HedgeRace(1_000, 100);
        assertEquals(1_100, r.dueAtNs());
        assertFalse(r.due(1_099), "early: re-arm");
        assertTrue(r.due(1_100));
        assertFalse(r.due(1_200), "fires once");
        assertTrue(r.fired());
    }

    @Test
    void aTokenBeforeTheDeadlineMeansNoHedge() {
        HedgeRace r = new HedgeRace(0, 100);
        assertTrue(r.firstToken(Runner.PRIMARY));
        assertFalse(r.due(100));
        assertFalse(r.hedgeSent());
        assertEquals(Runner.PRIMARY, r.winner());
    }

    @Test
    void theFirstTokenWinsAndNothingChangesItAfter() {
        HedgeRace r = new HedgeRace(0, 100);
        assertTrue(r.due(150));
        r.hedgeGoesOut();
        assertNull(r.winner());
        assertTrue(r.firstToken(Runner.HEDGE));
        assertFalse(r.firstToken(Runner.PRIMARY), "the primary's later token decides nothing");
        assertEquals("won_hedge", r.result());

        HedgeRace p = new HedgeRace(0, 100);
        p.due(100);
        p.hedgeGoesOut();
        assertTrue(p.firstToken(Runner.PRIMARY));
        assertFalse(p.firstToken(Runner.HEDGE));
        assertEquals("won_primary", p.result());
    }

    @Test
    void aHedgeGoesOutOnlyWhenDueAndUndecided() {
        HedgeRace early = new HedgeRace(0, 100);
        assertThrows(IllegalStateException.class, early::hedgeGoesOut);
        HedgeRace decided = new HedgeRace(0, 100);
        decided.due(100);
        decided.firstToken(Runner.PRIMARY);
        assertThrows(IllegalStateException.class, decided::hedgeGoesOut);
        HedgeRace none = new HedgeRace(0, 100);
        assertThrows(IllegalStateException.class, () -> none.firstToken(Runner.HEDGE), "no hedge leg: it cannot win");
    }
}
