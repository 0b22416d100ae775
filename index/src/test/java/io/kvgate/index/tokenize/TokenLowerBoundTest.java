package io.kvgate.index.tokenize;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The lower bound the prompt stage refuses on (B-5/M1): {@link HfTokenizer#minTokens} never exceeds the real count,
 * {@link HfTokenizer#encodeAtMost} never refuses a text that fits, refuses a long word without merging it, and its
 * scratch stays within {@link HfTokenizer#worstCaseScratchBytes}.
 */
class TokenLowerBoundTest {
    private static final String[] MODELS = {"qwen3", "llama3_1"};

    /** Every text of the fixtures (rendered chat prompts, the special-token prompt), plus generated ones. */
    private static List<String> texts() throws IOException {
        List<String> out = new ArrayList<>();
        Path dir = TokenizerTestSupport.repoRoot().resolve("index/src/test/resources/fixtures");
        try (var files = Files.list(dir)) {
            for (Path p : files.filter(f -> f.toString().endsWith(".json")).toList()) {
                try (InputStream in = Files.newInputStream(p)) {
                    collectStrings(JsonTree.parse(in), out);
                }
            }
        }
        assertTrue(out.size() > 20, "fixture strings: " + out.size());
        out.addAll(new TokenizerCorpus(7).strings(300, 40));
        SplittableRandom rnd = new SplittableRandom(11);
        // What makes the bound tight: runs of the longest tokens (spaces), one long word, decomposed marks that
        // NFC composes (the text shrinks), Hangul jamo, unpaired surrogates, special-token text.
        String[] pieces = {" ", "    ", "\t", "\n", "a", "Z", "é", "e\u0301", "\u03b1\u0313\u0300\u0345",
            "\u1100\u1161\u11a8", "\ud800", "\udc00", "😀", "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "7", "你"};
        for (int i = 0; i < 200; i++) {
            StringBuilder sb = new StringBuilder();
            int n = 1 + rnd.nextInt(60);
            for (int k = 0; k < n; k++) {
                sb.append(pieces[rnd.nextInt(pieces.length)].repeat(1 + rnd.nextInt(rnd.nextBoolean() ? 3 : 300)));
            }
            out.add(sb.toString());
        }
        out.add(" ".repeat(128 * 5));
        out.add(" ".repeat(128 * 5) + "x");
        out.add("a".repeat(20_000));
        return out;
    }

    private static void collectStrings(Object node, List<String> out) {
        if (node instanceof String s) {
            out.add(s);
        } else if (node instanceof Map<?, ?> m) {
            m.values().forEach(v -> collectStrings(v, out));
        } else if (node instanceof List<?> l) {
            l.forEach(v -> collectStrings(v, out));
        }
    }

    @Test
    void theLowerBoundNeverExceedsTheRealCountAndEncodeAtMostRefusesOnlyWhatIsOver() throws IOException {
        List<String> texts = texts();
        for (String model : MODELS) {
            HfTokenizer t = TokenizerTestSupport.ours(model);
            assertEquals(128, t.maxTokenBytes(), model + ": the longest token (a run of spaces)");
            int nonZero = 0;
            int provedMax = 0;
            for (String text : texts) {
                int[] ids = t.encode(text, false);
                long min = t.minTokens(text);
                assertTrue(min <= ids.length, model + ": bound " + min + " > count " + ids.length + " for "
                    + JsonTree.describe(text));
                nonZero += min > 0 ? 1 : 0;
                long max = t.maxTokens(text);
                assertTrue(max == -1 || max >= ids.length, model + ": upper bound " + max + " < count " + ids.length
                    + " for " + JsonTree.describe(text));
                provedMax += max >= 0 ? 1 : 0;
                assertFalse(t.certainlyMoreThan(text, ids.length), model);
                if (ids.length > 0) {
                    assertEquals(min > ids.length - 1, t.certainlyMoreThan(text, ids.length - 1), model);
                }
                assertArrayEquals(ids, t.encodeAtMost(text, false, ids.length), model + ": exactly at the limit");
                if (ids.length > 0) {
                    assertNull(t.encodeAtMost(text, false, ids.length - 1), model + ": one id over");
                }
            }
            assertTrue(nonZero > texts.size() / 2, model + ": the bound proves something for most texts: " + nonZero);
            assertTrue(provedMax > texts.size() / 2, model + ": the upper bound too: " + provedMax);
        }
    }

    @Test
    void aRefusedCallLeavesNoPartialIdsInTheCaches() throws IOException {
        // Before the fix a word refused by its length was cached with no ids, and a segment given up on half way
        // with part of them: the next encode of the same text returned fewer ids than the engine computes.
        for (String model : MODELS) {
            HfTokenizer cached = HfTokenizer.load(TokenizerTestSupport.modelDir(model));
            HfTokenizer reference = TokenizerTestSupport.ours(model);
            String shortWords = "hello world again and again";
            String segment = "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun.";
            for (String text : new String[] {shortWords, segment}) {
                assertNull(cached.encodeAtMost(text, false, 2), model);
                assertArrayEquals(reference.encode(text, false), cached.encode(text, false), model + ": " + text);
            }
        }
    }

    @Test
    void aFourMebibyteWordOverAnEightKiBoundIsRefusedWithoutMerging() {
        // B-5: 4 Mi one-letter word, rule bound 8192 (the context length). 4 Mi / 128 = 32 Ki ids at least, so the
        // word is refused before the merges: merging it would take ~150 MB of scratch (36 B per byte).
        for (String model : MODELS) {
            HfTokenizer t = TokenizerTestSupport.ours(model);
            t.encodeAtMost("warm up the thread's scratch", false, 10);
            for (String text : new String[] {"a".repeat(4 << 20),
                // NFC may change this one (a combining mark at the end): the whole-text bound proves nothing, the
                // normalized segment's length refuses it.
                "a".repeat(4 << 20) + "\u0301"}) {
                long before = allocatedBytes();
                assertNull(t.encodeAtMost(text, false, 8192), model);
                long allocated = allocatedBytes() - before;
                // The normalized copy of the second text is ~8 MB and the JDK normalizer's work space as much again.
                assertTrue(allocated < 48L << 20, model + ": refusing the word allocated " + allocated + " B");
            }
            assertTrue(t.minTokens("a".repeat(4 << 20)) > 8192, model);
        }
    }

    @Test
    void theScratchOfTheLongestAdmittedWordStaysWithinTheStatedWorstCase() throws Exception {
        // The longest word a bound admits (bound * 128 bytes) of letters that merge poorly, so all of it is merged
        // and its ids pass the bound: the worst case of one call. Measured on a fresh thread (fresh scratch).
        int bound = 2048;
        SplittableRandom rnd = new SplittableRandom(3);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < bound * 128; i++) {
            sb.append((char) ('a' + rnd.nextInt(26)));
        }
        String word = sb.toString();
        for (String model : MODELS) {
            HfTokenizer t = TokenizerTestSupport.ours(model);
            long limit = HfTokenizer.worstCaseScratchBytes(bound, t.maxTokenBytes());
            AtomicLong allocated = new AtomicLong();
            AtomicLong result = new AtomicLong();
            Thread th = new Thread(() -> {
                long before = allocatedBytes();
                int[] ids = t.encodeAtMost(word, false, bound);
                allocated.set(allocatedBytes() - before);
                result.set(ids == null ? -1 : ids.length);
            });
            th.start();
            th.join();
            assertEquals(-1, result.get(), model + ": the merged word has more ids than the bound");
            assertTrue(allocated.get() <= limit, model + ": allocated " + allocated.get() + " B > " + limit);
            assertTrue(allocated.get() > limit / 4, model + ": the word was merged (" + allocated.get() + " B)");
        }
        // The numbers the report states: 8192 tokens (a context length of 8 Ki) and the default 1 Mi.
        assertEquals(45, HfTokenizer.worstCaseScratchBytes(8192, 128) >> 20);
        assertFalse(HfTokenizer.worstCaseScratchBytes(1 << 20, 128) < (1L << 32));
    }

    private static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
            .getCurrentThreadAllocatedBytes();
    }
}
