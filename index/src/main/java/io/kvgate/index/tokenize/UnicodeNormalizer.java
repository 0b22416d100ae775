package io.kvgate.index.tokenize;

import java.text.Normalizer;
import java.util.BitSet;
import java.util.List;

/**
 * The HF {@code NFC}/{@code NFD}/{@code NFKC}/{@code NFKD} normalizers (and a {@code Sequence} of them) on top of
 * {@link java.text.Normalizer}.
 *
 * <p>For NFC (Qwen) a quick check avoids the JDK call, and its allocation, for text that is already NFC: a string
 * is NFC when none of its code points is a mark (Mn/Mc/Me, covering every non-zero combining class and the
 * composing vowel signs), a Hangul V/T jamo, or a code point that NFC changes on its own (singletons, composition
 * exclusions). Those code points are found once at class init. Immutable; thread-safe.
 */
final class UnicodeNormalizer {
    private static final class NfcTable {
        /** Code points below 0x30000 that may change under NFC or combine with a neighbour. */
        static final BitSet UNSAFE = new BitSet(0x30000);

        static {
            for (int cp = 0x300; cp < 0x30000; cp++) {
                if (!Character.isDefined(cp) || (cp >= 0xD800 && cp <= 0xDFFF)) {
                    continue;
                }
                if (isMark(cp) || (cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) {
                    UNSAFE.set(cp);
                    continue;
                }
                String one = Character.toString(cp);
                if (!Normalizer.normalize(one, Normalizer.Form.NFC).equals(one)) {
                    UNSAFE.set(cp);
                }
            }
        }
    }

    private final Normalizer.Form[] forms;
    private final boolean nfcOnly;

    private UnicodeNormalizer(Normalizer.Form[] forms) {
        this.forms = forms;
        this.nfcOnly = forms.length == 1 && forms[0] == Normalizer.Form.NFC;
        if (nfcOnly) {
            NfcTable.UNSAFE.size(); // build the table at load, not on the first request
        }
    }

    static UnicodeNormalizer of(List<Normalizer.Form> forms) {
        return new UnicodeNormalizer(forms.toArray(new Normalizer.Form[0]));
    }

    private static boolean isMark(int cp) {
        int t = Character.getType(cp);
        return t == Character.NON_SPACING_MARK || t == Character.COMBINING_SPACING_MARK
                || t == Character.ENCLOSING_MARK;
    }

    /** @return false only if normalizing {@code s[from,to)} is known to return it unchanged */
    boolean mayChange(CharSequence s, int from, int to) {
        if (!nfcOnly) {
            return true;
        }
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (c < 0x300) {
                continue;
            }
            int cp = c;
            if (Character.isHighSurrogate(c) && i + 1 < to && Character.isLowSurrogate(s.charAt(i + 1))) {
                cp = Character.toCodePoint(c, s.charAt(++i));
            }
            if (cp < 0x30000 ? NfcTable.UNSAFE.get(cp) : isMark(cp)) {
                return true;
            }
        }
        return false;
    }

    String apply(CharSequence s) {
        CharSequence t = s;
        for (Normalizer.Form f : forms) {
            t = Normalizer.normalize(t, f);
        }
        return t.toString();
    }
}
