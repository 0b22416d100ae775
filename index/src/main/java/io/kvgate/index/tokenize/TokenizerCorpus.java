package io.kvgate.index.tokenize;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Seeded generator of tokenizer stress text, shared by the parity tests (ids must equal the Rust library's) and
 * the JMH benchmarks (so both measure the same text): English prose, source code, numbers of every length, white
 * space runs with tabs, {@code \r\n} and Unicode spaces, CJK, Arabic, Devanagari, Hangul, emoji with ZWJ sequences
 * and skin tones, combining marks (composed and decomposed), contractions in odd cases, special-token text and
 * partial special tokens.
 *
 * <p>Not thread-safe (one instance per thread); deterministic for a given seed.
 */
public final class TokenizerCorpus {
    private static final String[] WORDS = {
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
        "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
        "gateway", "tokenizer", "inference", "latency", "prefix", "cache", "routing", "engine", "Kubernetes",
        "Hello", "World", "QUICK", "brown", "Fox", "jumps", "über", "naïve", "café", "résumé", "façade", "Zürich",
        "don't", "I'm", "we'll", "they've", "she'd", "you're", "it's", "IT'S", "WE'LL", "O'Neil", "rock'n'roll",
        "antidisestablishmentarianism", "pneumonoultramicroscopic", "a", "I", "x", "ok", "OK", "e.g.", "i.e.",
    };
    private static final String[] CODE = {
        "public static void main(String[] args) {\n    System.out.println(\"hi\");\n}\n",
        "def f(x):\n\treturn x ** 2  # square\n",
        "for (int i = 0; i < n; i++) { a[i] += b[i] * 3.14159; }",
        "if x != nil && len(y) >= 10 {\r\n\treturn errors.New(\"bad\")\r\n}",
        "<div class=\"a\">&nbsp;</div><br/>", "SELECT * FROM t WHERE id IN (1, 2, 3);",
        "{\"key\": [1, 2.5e-3, null, true], \"k2\": {}}", "x = y >> 2 | z << 3 ^ ~w;", "a->b::c<d>()",
        "#include <stdio.h>\n", "    ", "\t\t", "```python\nprint('x')\n```", "$ ls -la | grep '^d'",
        "https://example.com/path?q=1&r=%20#frag", "user@example.org", "C:\\Users\\me\\file.txt",
        "...", "!!!", "???", "--", "—", "–", "''", "\"\"", "'''", "@@", "//", "/* */", "<!-- -->",
    };
    private static final String[] UNICODE = {
        "你好，世界！", "机器学习是人工智能的一个分支。", "日本語のテキストです。", "カタカナ", "한국어 문장입니다",
        "مرحبا بالعالم", "السلام عليكم ورحمة الله", "नमस्ते दुनिया", "हिन्दी में वाक्य।", "Привет, мир!",
        "Ελληνικά γράμματα", "עברית", "ไทย ภาษา", "Tiếng Việt có dấu", "ქართული",
        "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇺🇸", "🧑🏿‍💻", "👩🏻‍🦰", "✨🚀🔥", "😂😂😂", "🤷‍♀️",
        "e\u0301", "a\u0308", "n\u0303", "\u1100\u1161\u11A8", "A\u030A", "\u212B", "\u0958", "ﬁ", "①②③",
        "Ⅻ", "½", "²³", "٣٤٥", "१२३", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𠀀𠀁", "\u00A0", "\u3000", "\u2009", "\u200B", "\u2028",
        "\u0085", "\u000B", "\u000C", "\u200D", "\uFEFF", "ſ", "'ſ", "'S", "'ʼs", "İstanbul", "ǅ", "ß", "ﬆ",
    };
    private static final String[] SPACES = {
        " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", "  \n  ", "\t\n", " \t ",
        "\u00A0", "\u3000 ", "\n\n\n\n", "                ", "\r", " \r\n ",
    };
    private static final String[] SPECIALS = {
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|begin_of_text|>",
        "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_5|>",
        "<|im_", "<|im_end", "im_end|>", "<|", "|>", "<<|im_end|>>", "<|im_start|><|im_end|>", "<|eot_id",
        "<|python_tag|>", "<|fim_prefix|>",
    };

    private final SplittableRandom rnd;

    public TokenizerCorpus(long seed) {
        this.rnd = new SplittableRandom(seed);
    }

    /** @return {@code count} strings, each of up to about {@code maxPieces} random pieces */
    public List<String> strings(int count, int maxPieces) {
        List<String> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            out.add(next(1 + rnd.nextInt(maxPieces)));
        }
        return out;
    }

    /** One random string of {@code pieces} pieces. */
    public String next(int pieces) {
        StringBuilder sb = new StringBuilder();
        for (int p = 0; p < pieces; p++) {
            int k = rnd.nextInt(100);
            if (k < 35) {
                sb.append(WORDS[rnd.nextInt(WORDS.length)]);
                sb.append(rnd.nextInt(4) == 0 ? "" : " ");
            } else if (k < 45) {
                sb.append(CODE[rnd.nextInt(CODE.length)]);
            } else if (k < 53) {
                sb.append(number());
            } else if (k < 65) {
                sb.append(SPACES[rnd.nextInt(SPACES.length)]);
            } else if (k < 80) {
                sb.append(UNICODE[rnd.nextInt(UNICODE.length)]);
            } else if (k < 86) {
                sb.append(SPECIALS[rnd.nextInt(SPECIALS.length)]);
            } else if (k < 93) {
                sb.append(punctuation());
            } else {
                randomCodePoints(sb, 1 + rnd.nextInt(6));
            }
        }
        return sb.toString();
    }

    private String number() {
        int digits = 1 + rnd.nextInt(rnd.nextInt(8) == 0 ? 40 : 9);
        StringBuilder sb = new StringBuilder();
        if (rnd.nextInt(5) == 0) {
            sb.append(rnd.nextBoolean() ? "-" : "$");
        }
        for (int i = 0; i < digits; i++) {
            sb.append((char) ('0' + rnd.nextInt(10)));
            if (rnd.nextInt(12) == 0) {
                sb.append(rnd.nextBoolean() ? "," : ".");
            }
        }
        return sb.toString();
    }

    private String punctuation() {
        String p = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
        StringBuilder sb = new StringBuilder();
        int n = 1 + rnd.nextInt(4);
        for (int i = 0; i < n; i++) {
            sb.append(p.charAt(rnd.nextInt(p.length())));
        }
        if (rnd.nextInt(4) == 0) {
            sb.append(rnd.nextBoolean() ? "\n" : "\r\n");
        }
        return sb.toString();
    }

    /** Random assigned code points (never unpaired surrogates: a Rust string cannot hold them). */
    private void randomCodePoints(StringBuilder sb, int n) {
        for (int i = 0; i < n; ) {
            int range = rnd.nextInt(4);
            int cp = switch (range) {
                case 0 -> 0x20 + rnd.nextInt(0x5F);
                case 1 -> 0xA0 + rnd.nextInt(0x2000);
                case 2 -> 0x2000 + rnd.nextInt(0xB000);
                default -> 0x1F300 + rnd.nextInt(0x700);
            };
            if (Character.isDefined(cp) && !Character.isSurrogate((char) cp) && Character.getType(cp) != Character.PRIVATE_USE) {
                sb.appendCodePoint(cp);
                i++;
            }
        }
    }

    /**
     * A growing chat transcript in Qwen's ChatML framing: a long system prompt and {@code turns} user/assistant
     * turns; used to show that the segment cache makes the re-encoding of earlier turns nearly free.
     */
    public List<String> chatPrefixes(int turns, int wordsPerTurn) {
        StringBuilder sb = new StringBuilder("<|im_start|>system\nYou are a careful assistant. ");
        for (int i = 0; i < 200; i++) {
            sb.append(WORDS[rnd.nextInt(WORDS.length)]).append(' ');
        }
        sb.append("<|im_end|>\n");
        List<String> out = new ArrayList<>();
        for (int t = 0; t < turns; t++) {
            sb.append(t % 2 == 0 ? "<|im_start|>user\n" : "<|im_start|>assistant\n");
            for (int i = 0; i < wordsPerTurn; i++) {
                sb.append(rnd.nextInt(10) == 0 ? number() : WORDS[rnd.nextInt(WORDS.length)]).append(' ');
            }
            sb.append("<|im_end|>\n");
            out.add(sb + "<|im_start|>assistant\n");
        }
        return out;
    }
}
