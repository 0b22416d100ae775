package io.kvgate.index.tokenize;

import java.util.Arrays;
import java.util.List;

/**
 * Finds added/special tokens in raw text the way HF {@code AddedVocabulary::find_matches} does: leftmost-longest
 * non-overlapping matches over all added tokens, a {@code single_word} token discarded when glued to a word
 * character, {@code lstrip}/{@code rstrip} widening the match over adjacent white space.
 *
 * <p>A char trie in one open-addressing table keyed by {@code (node << 16) | char}; a bitmap of first chars skips
 * the trie for nearly every position. Immutable; thread-safe. Only tokens with {@code normalized=false} are matched
 * here (on the raw text); see {@link HfTokenizer} for why normalized ones are rejected at load.
 */
final class AddedTokenMatcher {
    record Token(int id, String content, boolean singleWord, boolean lstrip, boolean rstrip, boolean special) {
    }

    private final Token[] tokens;
    private final long[] firstChars = new long[1024];
    private final long[] keys;
    private final int[] children;
    private final int mask;
    /** node -> index into tokens of the token ending there, or -1. */
    private final int[] terminal;

    AddedTokenMatcher(List<Token> list) {
        this.tokens = list.toArray(new Token[0]);
        int totalChars = 1;
        for (Token t : tokens) {
            totalChars += t.content().length();
        }
        int cap = Integer.highestOneBit(Math.max(16, totalChars) * 2) << 1;
        keys = new long[cap];
        children = new int[cap];
        Arrays.fill(keys, -1L);
        mask = cap - 1;
        int[] term = new int[totalChars];
        Arrays.fill(term, -1);
        int nodes = 1;
        for (int ti = 0; ti < tokens.length; ti++) {
            String c = tokens[ti].content();
            if (c.isEmpty()) {
                continue;
            }
            char f = c.charAt(0);
            firstChars[f >>> 6] |= 1L << f;
            int node = 0;
            for (int k = 0; k < c.length(); k++) {
                long key = ((long) node << 16) | c.charAt(k);
                int slot = slot(key);
                if (keys[slot] == -1L) {
                    keys[slot] = key;
                    children[slot] = nodes++;
                }
                node = children[slot];
            }
            if (term[node] < 0) {
                term[node] = ti;
            }
        }
        terminal = term;
    }

    int size() {
        return tokens.length;
    }

    Token token(int index) {
        return tokens[index];
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        int slot = (int) (h ^ (h >>> 31)) & mask;
        while (keys[slot] != -1L && keys[slot] != key) {
            slot = (slot + 1) & mask;
        }
        return slot;
    }

    private int child(int node, char c) {
        int slot = slot(((long) node << 16) | c);
        return keys[slot] == -1L ? -1 : children[slot];
    }

    /**
     * Finds the next added token at or after {@code from}.
     *
     * @param consumed end of the previous match (lstrip never reaches before it)
     * @return {@code (start << 32) | end} of the match including stripped white space, with the token index in
     *     {@code found[0]}; or -1 if there is none
     */
    long find(CharSequence s, int from, int consumed, int to, int[] found) {
        if (tokens.length == 0) {
            return -1L;
        }
        int i = from;
        while (i < to) {
            char c = s.charAt(i);
            if ((firstChars[c >>> 6] & (1L << c)) == 0) {
                i++;
                continue;
            }
            int node = 0;
            int best = -1;
            int bestEnd = -1;
            for (int j = i; j < to; j++) {
                node = child(node, s.charAt(j));
                if (node < 0) {
                    break;
                }
                if (terminal[node] >= 0) {
                    best = terminal[node];
                    bestEnd = j + 1;
                }
            }
            if (best < 0) {
                i++;
                continue;
            }
            Token t = tokens[best];
            int start = i;
            int end = bestEnd;
            if (t.singleWord()) {
                boolean startOk = start == 0 || !CharClass.isWordChar(Character.codePointBefore(s, start));
                boolean endOk = end == s.length() || !CharClass.isWordChar(Character.codePointAt(s, end));
                if (!startOk || !endOk) {
                    i = end; // the Rust matcher resumes after the discarded match
                    continue;
                }
            }
            if (t.lstrip()) {
                while (start > consumed && CharClass.isWhiteSpace(s.charAt(start - 1))) {
                    start--;
                }
            }
            if (t.rstrip()) {
                while (end < to && CharClass.isWhiteSpace(s.charAt(end))) {
                    end++;
                }
            }
            found[0] = best;
            return ((long) start << 32) | end;
        }
        return -1L;
    }
}
