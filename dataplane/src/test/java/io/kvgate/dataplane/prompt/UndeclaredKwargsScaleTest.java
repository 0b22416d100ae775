package io.kvgate.dataplane.prompt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * B-6: 100 k {@code chat_template_kwargs} keys the template does not declare cost a linear number of key comparisons
 * on the I/O thread (a list lookup per key made it 5·10⁹ comparisons and 14 s). Counted, not timed.
 */
class UndeclaredKwargsScaleTest {
    /** A key that counts how often it is compared, as the deduplication sees it. */
    private record CountingKey(int id, long[] comparisons) {
        @Override
        public boolean equals(Object o) {
            comparisons[0]++;
            return o instanceof CountingKey k && k.id == id;
        }

        @Override
        public int hashCode() {
            comparisons[0]++;
            return Integer.hashCode(id);
        }
    }

    @Test
    void b6_aHundredThousandKeysAreDeduplicatedWithALinearNumberOfComparisons() {
        int n = 100_000;
        long[] comparisons = {0};
        List<CountingKey> keys = new ArrayList<>(2 * n);
        for (int i = 0; i < n; i++) {
            keys.add(new CountingKey(i, comparisons));
        }
        for (int i = 0; i < n; i += 2) {
            keys.add(new CountingKey(i, comparisons)); // repeated keys, as a body with duplicate members sends them
        }
        List<CountingKey> out = PromptPipeline.distinctInOrder(keys, k -> k.id() % 10 != 3);
        assertEquals(n - n / 10, out.size());
        for (int i = 0, want = 0; i < out.size(); i++, want++) {
            if (want % 10 == 3) {
                want++;
            }
            assertEquals(want, out.get(i).id(), "first-seen order");
        }
        // One hash and (almost always) no equals per new key, one hash and one equals per repeat: ~2 per key.
        // The list lookup needed n^2 / 2 equals.
        assertTrue(comparisons[0] <= 4L * keys.size(), "comparisons " + comparisons[0] + " for " + keys.size() + " keys");
    }
}
