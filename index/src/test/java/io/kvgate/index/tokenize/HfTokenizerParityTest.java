package io.kvgate.index.tokenize;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/** Token ids must equal the Rust HF tokenizers library (via DJL) on a seeded fuzz corpus, for both models. */
class HfTokenizerParityTest {
    private static final int STRINGS = 3000;

    @ParameterizedTest
    @CsvSource({"qwen3,false", "qwen3,true", "llama3_1,false", "llama3_1,true"})
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void idsEqualRustOnFuzzCorpus(String model, boolean addSpecial) {
        HfTokenizer ours = TokenizerTestSupport.ours(model);
        List<String> corpus = new TokenizerCorpus(model.hashCode() * 31L + (addSpecial ? 1 : 0)).strings(STRINGS, 24);
        int mismatches = 0;
        StringBuilder report = new StringBuilder();
        long tokens = 0;
        for (String s : corpus) {
            int[] expected = TokenizerTestSupport.rustIds(model, s, addSpecial);
            int[] actual = ours.encode(s, addSpecial);
            tokens += expected.length;
            if (!Arrays.equals(expected, actual)) {
                if (mismatches++ < 5) {
                    report.append("\n  text=").append(TokenizerTestSupport.escape(s))
                            .append("\n  rust=").append(Arrays.toString(expected))
                            .append("\n  ours=").append(Arrays.toString(actual));
                }
            }
        }
        if (mismatches > 0) {
            fail(model + " addSpecial=" + addSpecial + ": " + mismatches + "/" + STRINGS + " strings differ" + report);
        }
        assertEquals(STRINGS, corpus.size());
        System.out.println(model + " addSpecial=" + addSpecial + ": " + STRINGS + " strings, " + tokens
                + " tokens identical");
    }

    @ParameterizedTest
    @CsvSource({"qwen3", "llama3_1"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void idsEqualRustOnLongDocumentsAndEdgeCases(String model) {
        HfTokenizer ours = TokenizerTestSupport.ours(model);
        TokenizerCorpus corpus = new TokenizerCorpus(42);
        List<String> cases = new java.util.ArrayList<>(List.of("", " ", "  ", "\n", "\r\n", " \r\n ", "a", "'s", "'S",
                "'ſ", "x'll", "I'LL", "'", "''", "' s", "1234567", "１２３", " 1", "  1", "\t\tx", "a  b", "a   \n b",
                "<|im_end|>", "<|im_end|><|im_end|>", " <|im_end|> ", "<|im_", "<|begin_of_text|>hi",
                "e\u0301\u0301", "\u1100\u1161", "\uD83D\uDC4D\uD83C\uDFFD", "🏳️‍🌈 flag", "x".repeat(5000),
                " ".repeat(3000) + "y", "ab".repeat(2000), "😀".repeat(300), "9".repeat(1000),
                "QmFzZTY0IGVuY29kZWQgYmxvYg==".repeat(50), "\n".repeat(100) + "z", "…".repeat(100)));
        for (int i = 0; i < 20; i++) {
            cases.add(corpus.next(400));
        }
        for (String s : cases) {
            for (boolean add : new boolean[] {false, true}) {
                int[] expected = TokenizerTestSupport.rustIds(model, s, add);
                int[] actual = ours.encode(s, add);
                if (!Arrays.equals(expected, actual)) {
                    fail(model + " add=" + add + " text=" + TokenizerTestSupport.escape(s.length() > 300
                            ? s.substring(0, 300) + "..." : s) + "\n rust=" + Arrays.toString(expected)
                            + "\n ours=" + Arrays.toString(actual));
                }
            }
        }
    }

    /** Random assigned code points from every plane (letters, marks, numbers, symbols of all scripts). */
    @ParameterizedTest
    @CsvSource({"qwen3", "llama3_1"})
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void idsEqualRustOnRandomCodePointsOfAllPlanes(String model) {
        HfTokenizer ours = TokenizerTestSupport.ours(model);
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(99);
        int mismatches = 0;
        StringBuilder report = new StringBuilder();
        for (int n = 0; n < 2000; n++) {
            StringBuilder sb = new StringBuilder();
            int len = 1 + rnd.nextInt(12);
            while (sb.length() < len) {
                int cp = rnd.nextInt(4) == 0 ? rnd.nextInt(0x80) : rnd.nextInt(0x32000);
                int type = Character.getType(cp);
                if (Character.isDefined(cp) && type != Character.SURROGATE && type != Character.PRIVATE_USE) {
                    sb.appendCodePoint(cp);
                }
            }
            String s = sb.toString();
            int[] expected = TokenizerTestSupport.rustIds(model, s, false);
            int[] actual = ours.encode(s, false);
            if (!Arrays.equals(expected, actual) && mismatches++ < 10) {
                report.append("\n  ").append(TokenizerTestSupport.escape(s)).append(" rust=")
                        .append(Arrays.toString(expected)).append(" ours=").append(Arrays.toString(actual));
            }
        }
        if (mismatches > 0) {
            fail(model + ": " + mismatches + "/2000 differ" + report);
        }
    }
}
