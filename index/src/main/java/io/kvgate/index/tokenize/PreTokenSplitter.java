package io.kvgate.index.tokenize;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Splits normalized text into pre-tokens (HF {@code Split} pre-tokenizer, behavior {@code Isolated}): every regex
 * match is a piece and so is every gap between matches.
 *
 * <p>The two patterns used by Qwen2/Qwen3 and Llama 3 (they differ only in {@code \p{N}} vs {@code \p{N}{1,3}}) are
 * implemented by a hand-written scanner ({@link Gpt4Style}) that reproduces the regex's leftmost-first backtracking
 * decision for each alternative; it is verified against {@link Regex} and against the Rust library on a fuzz corpus.
 * Any other pattern falls back to {@code java.util.regex} with Unicode character classes, which is correct for
 * patterns that only use constructs both engines agree on.
 *
 * <p>Immutable; thread-safe.
 */
abstract sealed class PreTokenSplitter {
    /** Qwen2 / Qwen2.5 / Qwen3 pattern. */
    static final String QWEN_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
            + "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    /** Llama 3 / 3.1 / 3.2 / 3.3 pattern. */
    static final String LLAMA3_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
            + "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

    static PreTokenSplitter forPattern(String pattern) {
        if (QWEN_PATTERN.equals(pattern)) {
            return new Gpt4Style(1);
        }
        if (LLAMA3_PATTERN.equals(pattern)) {
            return new Gpt4Style(3);
        }
        return new Regex(pattern);
    }

    /** Appends the exclusive end index of every pre-token of {@code s[from, to)} to {@code ends}, in order. */
    final void split(CharSequence s, int from, int to, IntBuf ends) {
        split(s, from, to, ends, Integer.MAX_VALUE);
    }

    /**
     * As {@link #split(CharSequence, int, int, IntBuf)}, but stops after {@code maxPieces} pre-tokens: every
     * pre-token becomes at least one id, so a caller with a token limit needs no more than one past it, and
     * {@code ends} stays bounded by the limit rather than by the text.
     */
    abstract void split(CharSequence s, int from, int to, IntBuf ends, int maxPieces);

    /** Hand-written equivalent of {@link #QWEN_PATTERN} ({@code maxDigits = 1}) / {@link #LLAMA3_PATTERN} (3). */
    static final class Gpt4Style extends PreTokenSplitter {
        private final int maxDigits;

        Gpt4Style(int maxDigits) {
            this.maxDigits = maxDigits;
        }

        @Override
        void split(CharSequence s, int from, int to, IntBuf ends, int maxPieces) {
            int i = from;
            for (int pieces = 0; i < to && pieces < maxPieces; pieces++) {
                i = next(s, i, to);
                ends.add(i);
            }
        }

        private static int cpAt(CharSequence s, int i, int to) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < to) {
                char d = s.charAt(i + 1);
                if (Character.isLowSurrogate(d)) {
                    return Character.toCodePoint(c, d);
                }
            }
            return c;
        }

        private static int letterRunEnd(CharSequence s, int j, int to) {
            while (j < to) {
                char c = s.charAt(j);
                if (!Character.isSurrogate(c)) {
                    if (CharClass.ofChar(c) != CharClass.LETTER) {
                        return j;
                    }
                    j++;
                } else {
                    int cp = cpAt(s, j, to);
                    if (CharClass.of(cp) != CharClass.LETTER) {
                        return j;
                    }
                    j += Character.charCount(cp);
                }
            }
            return j;
        }

        private static int otherRunEnd(CharSequence s, int j, int to) {
            while (j < to) {
                int cp = cpAt(s, j, to);
                if (CharClass.of(cp) != CharClass.OTHER) {
                    return j;
                }
                j += Character.charCount(cp);
            }
            return j;
        }

        /** @return the end of the regex match that starts at {@code i} (the scanner never leaves a gap) */
        int next(CharSequence s, int i, int to) {
            char c = s.charAt(i);
            // 1. (?i:'s|'t|'re|'ve|'m|'ll|'d) -- U+017F (long s) case-folds to 's' as well
            if (c == '\'' && i + 1 < to) {
                char d = s.charAt(i + 1);
                switch (d) {
                    case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D', '\u017F':
                        return i + 2;
                    default:
                        break;
                }
                if (i + 2 < to) {
                    char e = s.charAt(i + 2);
                    if ((d == 'r' || d == 'R' || d == 'v' || d == 'V') && (e == 'e' || e == 'E')) {
                        return i + 3;
                    }
                    if ((d == 'l' || d == 'L') && (e == 'l' || e == 'L')) {
                        return i + 3;
                    }
                }
            }
            int cp = Character.isSurrogate(c) ? cpAt(s, i, to) : c;
            int n = Character.charCount(cp);
            byte cls = CharClass.of(cp);
            // 2. [^\r\n\p{L}\p{N}]?\p{L}+
            if (cls == CharClass.LETTER) {
                return letterRunEnd(s, i + n, to);
            }
            if (cls != CharClass.NUMBER && c != '\r' && c != '\n' && i + n < to) {
                int cp2 = cpAt(s, i + n, to);
                if (CharClass.of(cp2) == CharClass.LETTER) {
                    return letterRunEnd(s, i + n + Character.charCount(cp2), to);
                }
            }
            // 3. \p{N} or \p{N}{1,3}
            if (cls == CharClass.NUMBER) {
                int j = i + n;
                for (int k = 1; k < maxDigits && j < to; k++) {
                    int cp2 = cpAt(s, j, to);
                    if (CharClass.of(cp2) != CharClass.NUMBER) {
                        break;
                    }
                    j += Character.charCount(cp2);
                }
                return j;
            }
            // 4.  ?[^\s\p{L}\p{N}]+[\r\n]*
            int p = -1;
            if (cls == CharClass.OTHER) {
                p = i;
            } else if (c == ' ' && i + 1 < to && CharClass.of(cpAt(s, i + 1, to)) == CharClass.OTHER) {
                p = i + 1;
            }
            if (p >= 0) {
                int j = otherRunEnd(s, p, to);
                while (j < to) {
                    char x = s.charAt(j);
                    if (x != '\r' && x != '\n') {
                        break;
                    }
                    j++;
                }
                return j;
            }
            // c is white space from here on (every White_Space code point is a single BMP char).
            int j = i;
            int lastNewline = -1;
            while (j < to) {
                char x = s.charAt(j);
                if (CharClass.ofChar(x) != CharClass.SPACE) {
                    break;
                }
                if (x == '\r' || x == '\n') {
                    lastNewline = j;
                }
                j++;
            }
            // 5. \s*[\r\n]+ : greedy \s* backs off to the last newline of the run
            if (lastNewline >= 0) {
                return lastNewline + 1;
            }
            // 6. \s+(?!\S) : the whole run at the end of the text, else all but the last space
            if (j == to) {
                return j;
            }
            if (j - i >= 2) {
                return j - 1;
            }
            // 7. \s+
            return j;
        }
    }

    /** Reference / fallback implementation with {@code java.util.regex}. Allocates a Matcher per call. */
    static final class Regex extends PreTokenSplitter {
        private final Pattern pattern;

        Regex(String regex) {
            this.pattern = Pattern.compile(regex, Pattern.UNICODE_CHARACTER_CLASS | Pattern.UNICODE_CASE);
        }

        @Override
        void split(CharSequence s, int from, int to, IntBuf ends, int maxPieces) {
            Matcher m = pattern.matcher(s);
            m.region(from, to);
            m.useTransparentBounds(false);
            m.useAnchoringBounds(true);
            int last = from;
            long stop = (long) ends.size + maxPieces;
            while (ends.size < stop && m.find()) {
                if (m.end() == m.start()) {
                    continue; // HF drops empty matches
                }
                if (m.start() > last) {
                    ends.add(m.start());
                    if (ends.size == stop) {
                        return;
                    }
                }
                ends.add(m.end());
                last = m.end();
            }
            if (last < to && ends.size < stop) {
                ends.add(to);
            }
        }
    }
}
