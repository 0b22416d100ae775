package io.kvgate.dataplane.quality;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** Each computed prompt token gets exactly one cause, by its position: the losses sum to prompt − observed. */
class PromptAccountTest {
    private static long[] attribute(int prompt, int observed, int reachable, int predicted, int confirmed, LossCause cause) {
        long[] loss = new long[LossCause.values().length];
        PromptAccount.attribute(prompt, observed, reachable, predicted, confirmed, cause, loss);
        return loss;
    }

    private static long of(long[] loss, LossCause c) {
        return loss[c.ordinal()];
    }

    @Test
    void aRoutingLossIsTheHoldersPrefixBeyondTheChosenOnesAndTheRestIsCold() {
        // 400-token prompt; another endpoint held 320, the chosen one 64 (confirmed), the engine served 64
        long[] loss = attribute(400, 64, 320, 64, 64, LossCause.LOAD_BOUND);
        assertEquals(256, of(loss, LossCause.LOAD_BOUND));
        assertEquals(80, of(loss, LossCause.COLD));
        assertEquals(0, of(loss, LossCause.INDEX_STALE) + of(loss, LossCause.SPECULATIVE));
    }

    @Test
    void predictedButNotServedSplitsIntoStaleIndexAndSpeculation() {
        // predicted 320 of which KV events confirmed 128; the engine served 96
        long[] loss = attribute(400, 96, 320, 320, 128, null);
        assertEquals(32, of(loss, LossCause.INDEX_STALE));
        assertEquals(192, of(loss, LossCause.SPECULATIVE));
        assertEquals(80, of(loss, LossCause.COLD));
    }

    @Test
    void anEngineServingMoreThanPredictedShrinksTheLossesBehindIt() {
        long[] loss = attribute(400, 288, 320, 64, 64, LossCause.LOAD_BOUND);
        assertEquals(32, of(loss, LossCause.LOAD_BOUND), "tokens 288..320 were lost to the bound, not 64..320");
        assertEquals(80, of(loss, LossCause.COLD));
        long[] more = attribute(400, 352, 320, 320, 320, null);
        assertEquals(48, of(more, LossCause.COLD), "served beyond what anyone was known to hold");
    }

    @Test
    void withoutALookupEveryComputedTokenIsUnknown() {
        long[] loss = attribute(400, 100, PromptAccount.UNKNOWN, PromptAccount.UNKNOWN, PromptAccount.UNKNOWN, null);
        assertEquals(300, of(loss, LossCause.UNKNOWN));
    }

    @Test
    void theCausesAlwaysSumToPromptMinusObserved() {
        Random rnd = new Random(35);
        for (int i = 0; i < 10_000; i++) {
            int prompt = 1 + rnd.nextInt(2000);
            int observed = rnd.nextInt(prompt + 100) - 50; // engines may report nonsense: clamped
            int predicted = rnd.nextInt(prompt + 1);
            int reachable = rnd.nextBoolean() ? predicted + rnd.nextInt(prompt + 1) : rnd.nextInt(prompt + 1);
            int confirmed = rnd.nextInt(predicted + 1);
            long[] loss = attribute(prompt, observed, reachable, predicted, confirmed, LossCause.values()[rnd.nextInt(11)]);
            long sum = 0;
            for (long l : loss) {
                assertEquals(true, l >= 0, "no negative loss");
                sum += l;
            }
            assertEquals(prompt - Math.max(0, Math.min(observed, prompt)), sum,
                prompt + " " + observed + " " + reachable + " " + predicted + " " + confirmed);
        }
    }
}
