package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** {@code hedge.max_extra_ratio} over {@code hedge.window_ms}, on a clock the test moves. */
class HedgeBudgetTest {
    private static long ms(long v) {
        return TimeUnit.MILLISECONDS.toNanos(v);
    }

    @Test
    void extraTokensStayWithinTheRatioOfTheWindowsPromptTokens() {
        HedgeBudget b = new HedgeBudget(10_000);
        for (int i = 0; i < 10; i++) {
            b.recordPrompt(ms(i), 100); // 1000 prompt tokens
        }
        assertTrue(b.tryCharge(ms(20), 60, 0.1), "60 <= 100");
        assertTrue(b.tryCharge(ms(21), 40, 0.1), "100 <= 100");
        assertFalse(b.tryCharge(ms(22), 1, 0.1), "101 > 100: over the budget");
        b.recordPrompt(ms(23), 100);
        assertTrue(b.tryCharge(ms(24), 10, 0.1), "the window's prompts grew to 1100: 110 allowed");
        assertFalse(b.tryCharge(ms(25), 1, 0.1));
    }

    @Test
    void nothingRecordedMeansNothingAllowed() {
        HedgeBudget b = new HedgeBudget(10_000);
        assertFalse(b.tryCharge(0, 1, 1.0));
        assertTrue(b.tryCharge(0, 0, 0.1), "a zero-token hedge costs nothing");
    }

    @Test
    void theWindowSlides_oldPromptsAndOldChargesExpire() {
        HedgeBudget b = new HedgeBudget(10_000); // 20 buckets of 500 ms
        b.recordPrompt(ms(0), 1000);
        assertTrue(b.tryCharge(ms(100), 100, 0.1));
        assertFalse(b.tryCharge(ms(200), 1, 0.1));
        // 10 s later the first bucket has left the window: its prompts and its charge are gone.
        assertFalse(b.tryCharge(ms(10_100), 1, 0.1), "no prompts in the window any more");
        b.recordPrompt(ms(10_200), 1000);
        assertTrue(b.tryCharge(ms(10_300), 100, 0.1), "the old charge no longer counts");
        // Still inside the window (9.9 s later): the new charge counts.
        assertFalse(b.tryCharge(ms(19_900), 1, 0.1));
    }

    @Test
    void aRefundHandsTheChargeBack() {
        HedgeBudget b = new HedgeBudget(10_000);
        b.recordPrompt(ms(0), 1000);
        assertTrue(b.tryCharge(ms(1), 100, 0.1));
        b.refund(ms(1), 100);
        assertTrue(b.tryCharge(ms(2), 100, 0.1), "refunded: the budget is whole again");
        // A refund for a bucket that already left the window changes nothing.
        b.refund(ms(-20_000), 100);
        assertFalse(b.tryCharge(ms(3), 1, 0.1));
    }

    @Test
    void oneBudgetPerRuleAndWindow() {
        HedgeBudgets all = new HedgeBudgets();
        HedgeBudget a = all.forRule("a", 10_000);
        assertSame(a, all.forRule("a", 10_000));
        HedgeBudget other = all.forRule("b", 10_000);
        assertFalse(a == other);
        HedgeBudget resized = all.forRule("a", 20_000);
        assertFalse(a == resized, "a new window starts afresh");
        assertEquals(20_000, resized.windowMs());
    }
}
