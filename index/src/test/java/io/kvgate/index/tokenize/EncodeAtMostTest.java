package io.kvgate.index.tokenize;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@link HfTokenizer#encodeAtMost}: identical ids within the limit, null beyond it, the merges skipped when certain. */
class EncodeAtMostTest {
    private static final String TEXT = "The quick brown fox jumps over the lazy dog, then naps. Pack my box with five dozen liquor jugs! ";

    @Test
    void withinTheLimitTheIdsAreThoseOfEncode() {
        for (String model : new String[] {"qwen3", "llama3_1"}) {
            HfTokenizer t = TokenizerTestSupport.ours(model);
            String text = TEXT.repeat(20) + "<|im_end|> tail";
            int[] all = t.encode(text, true);
            assertArrayEquals(all, t.encodeAtMost(text, true, all.length), model);
            assertArrayEquals(all, t.encodeAtMost(text, true, Integer.MAX_VALUE - 1), model);
            assertNull(t.encodeAtMost(text, true, all.length - 1), model + ": one id over the limit");
            assertArrayEquals(all, t.encode(text, true), model + ": a refused call leaves no state behind");
        }
    }

    @Test
    void m1_aHugeSingleWordOverTheLimitIsRefusedWithoutBeingMerged() {
        HfTokenizer t = TokenizerTestSupport.ours("qwen3");
        assertTrue(t.maxTokenBytes() >= 1 && t.maxTokenBytes() < 1024, "longest token " + t.maxTokenBytes());
        // 4 Mi letters in one pre-tokenized word: merging it costs seconds and ~50 B of scratch per byte (M1). The
        // lower bound (length / longest token) already exceeds the limit, so the call returns before any merge:
        // what the thread allocates during the call shows it (merging would need ~200 MB of scratch).
        String word = "a".repeat(4 << 20);
        int limit = (word.length() / t.maxTokenBytes()) - 1;
        t.encodeAtMost("warm up the thread's scratch", false, 10);
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long before = mx.getCurrentThreadAllocatedBytes();
        assertNull(t.encodeAtMost(word, false, limit));
        long allocated = mx.getCurrentThreadAllocatedBytes() - before;
        assertTrue(allocated < (1 << 20), "refusing the word allocated " + allocated + " B");
        int[] small = t.encodeAtMost("a".repeat(1000), false, 1000);
        assertArrayEquals(t.encode("a".repeat(1000), false), small);
    }
}
