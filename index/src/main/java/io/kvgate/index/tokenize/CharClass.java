package io.kvgate.index.tokenize;

/**
 * Unicode classes used by the Qwen/Llama pre-tokenizer regex, with the semantics of the Rust regex engines HF
 * {@code tokenizers} uses (Oniguruma / fancy-regex): {@code \p{L}} = general categories Lu Ll Lt Lm Lo,
 * {@code \p{N}} = Nd Nl No, {@code \s} = the Unicode White_Space property (note: not Java's
 * {@link Character#isWhitespace}, which excludes U+00A0/U+2007/U+202F and includes U+001C..U+001F).
 *
 * <p>BMP classes come from one 64 KiB table built at class init; supplementary code points are classified with
 * {@link Character#getType}. Immutable; thread-safe. Unicode version is the JDK's (16.0 for JDK 25); code points
 * assigned after the Rust engine's Unicode version could classify differently.
 */
final class CharClass {
    static final byte OTHER = 0;
    static final byte LETTER = 1;
    static final byte NUMBER = 2;
    static final byte SPACE = 3;

    private static final byte[] BMP = new byte[65536];

    static {
        for (int c = 0; c < 65536; c++) {
            BMP[c] = compute(c);
        }
    }

    private CharClass() {
    }

    private static byte compute(int cp) {
        if (isWhiteSpace(cp)) {
            return SPACE;
        }
        return switch (Character.getType(cp)) {
            case Character.UPPERCASE_LETTER, Character.LOWERCASE_LETTER, Character.TITLECASE_LETTER,
                 Character.MODIFIER_LETTER, Character.OTHER_LETTER -> LETTER;
            case Character.DECIMAL_DIGIT_NUMBER, Character.LETTER_NUMBER, Character.OTHER_NUMBER -> NUMBER;
            default -> OTHER;
        };
    }

    /** The Unicode White_Space property (PropList.txt); every member is in the BMP. */
    static boolean isWhiteSpace(int cp) {
        return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680
                || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F
                || cp == 0x205F || cp == 0x3000;
    }

    static byte of(int cp) {
        return cp < 65536 ? BMP[cp] : compute(cp);
    }

    static byte ofChar(char c) {
        return BMP[c];
    }

    /** Rust regex {@code \w} (Unicode): Alphabetic, marks, decimal numbers, connector punctuation, joiners. */
    static boolean isWordChar(int cp) {
        if (Character.isAlphabetic(cp) || cp == 0x200C || cp == 0x200D) {
            return true;
        }
        int t = Character.getType(cp);
        return t == Character.NON_SPACING_MARK || t == Character.COMBINING_SPACING_MARK
                || t == Character.ENCLOSING_MARK || t == Character.DECIMAL_DIGIT_NUMBER
                || t == Character.CONNECTOR_PUNCTUATION;
    }
}
