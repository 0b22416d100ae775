package io.kvgate.index.tokenize;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Arrays;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/** The hand-written scanner must cut exactly where the pattern (run by java.util.regex) cuts. */
class PreTokenSplitterTest {
    private static int[] ends(PreTokenSplitter s, String text) {
        IntBuf b = new IntBuf(16);
        s.split(text, 0, text.length(), b);
        return Arrays.copyOf(b.a, b.size);
    }

    @ParameterizedTest
    @ValueSource(strings = {PreTokenSplitter.QWEN_PATTERN, PreTokenSplitter.LLAMA3_PATTERN})
    void scannerEqualsRegexOnFuzzCorpus(String pattern) {
        PreTokenSplitter fast = PreTokenSplitter.forPattern(pattern);
        assertEquals(PreTokenSplitter.Gpt4Style.class, fast.getClass());
        PreTokenSplitter regex = new PreTokenSplitter.Regex(pattern);
        List<String> corpus = new TokenizerCorpus(pattern.length()).strings(5000, 30);
        for (String s : corpus) {
            assertArrayEquals(ends(regex, s), ends(fast, s), () -> TokenizerTestSupport.escape(s));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {PreTokenSplitter.QWEN_PATTERN, PreTokenSplitter.LLAMA3_PATTERN})
    void knownCuts(String pattern) {
        PreTokenSplitter fast = PreTokenSplitter.forPattern(pattern);
        boolean llama = pattern.equals(PreTokenSplitter.LLAMA3_PATTERN);
        assertArrayEquals(new int[] {5, 11, 13, 14}, ends(fast, "Hello world's!"));
        assertArrayEquals(new int[] {1, 2, 4, 5}, ends(fast, "a  b\n"), "a space run leaves its last space to the word");
        assertArrayEquals(llama ? new int[] {3, 5} : new int[] {1, 2, 3, 4, 5}, ends(fast, "12345"));
        assertArrayEquals(new int[] {3, 4, 6}, ends(fast, "  \n  x"), "white space up to the last newline");
        assertArrayEquals(new int[] {6}, ends(fast, " ...\r\n"), "space, punctuation and trailing newlines are one piece");
    }
}
