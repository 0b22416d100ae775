package io.kvgate.dataplane.exchange;

/**
 * The decision of one hedged request (docs/hedging.md), with no leg, channel or timer in it: when the hedge is due,
 * which leg won. A leg wins by producing the request's first token first; once decided, nothing changes it. Time
 * is passed in (the event loop's ticker, the clock that runs the timer).
 */
final class HedgeRace {
    /** Which leg is which. */
    enum Runner { PRIMARY, HEDGE }

    private final long dueAtNs;
    private boolean fired;
    private boolean hedgeSent;
    private Runner winner;

    /** A race for a primary leg sent at {@code sentAtNs}: the hedge is due {@code afterNs} later. */
    HedgeRace(long sentAtNs, long afterNs) {
        this.dueAtNs = sentAtNs + afterNs;
    }

    long dueAtNs() {
        return dueAtNs;
    }

    /**
     * The timer woke at {@code nowNs}: true once, when the deadline passed with no first token (the hedge is to be
     * tried now); false early (re-arm), after a decision, or after it already fired.
     */
    boolean due(long nowNs) {
        if (fired || winner != null || nowNs - dueAtNs < 0) {
            return false;
        }
        fired = true;
        return true;
    }

    boolean fired() {
        return fired;
    }

    /** The hedge leg went out (routed to a second endpoint, not yet decided). */
    void hedgeGoesOut() {
        if (!fired || winner != null) {
            throw new IllegalStateException("a hedge leg goes out only when due and undecided");
        }
        hedgeSent = true;
    }

    boolean hedgeSent() {
        return hedgeSent;
    }

    /** {@code r} produced a first token: true when that decides the race for it (it is the first). */
    boolean firstToken(Runner r) {
        if (winner != null) {
            return false;
        }
        if (r == Runner.HEDGE && !hedgeSent) {
            throw new IllegalStateException("no hedge leg went out");
        }
        winner = r;
        return true;
    }

    boolean decided() {
        return winner != null;
    }

    /** The winner, or null while undecided. */
    Runner winner() {
        return winner;
    }

    /** The {@code kvgate_hedges_total} result of a decided race in which a hedge leg went out. */
    String result() {
        return winner == Runner.HEDGE ? "won_hedge" : "won_primary";
    }
}
