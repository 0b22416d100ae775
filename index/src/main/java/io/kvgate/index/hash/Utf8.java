package io.kvgate.index.hash;

/**
 * Allocation-free UTF-8 encoding of {@link String}s into a caller's buffer ({@code String.getBytes} allocates).
 * Python cannot encode an unpaired surrogate to UTF-8 (engines fail such a request), so those are reported as
 * {@code -1} instead of being replaced like {@code getBytes} would. Stateless, thread-safe.
 */
final class Utf8 {
    private Utf8() {}

    /** UTF-8 length of {@code s}, or -1 if it holds an unpaired surrogate. */
    static int encodedLength(CharSequence s) {
        int n = s.length();
        int bytes = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                bytes += 1;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c)) {
                if (i + 1 >= n || !Character.isLowSurrogate(s.charAt(i + 1))) {
                    return -1;
                }
                bytes += 4;
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return -1;
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }

    /** Writes the UTF-8 form of {@code s} (already checked by {@link #encodedLength}) at {@code off}; returns the end. */
    static int encode(CharSequence s, byte[] dst, int off) {
        int n = s.length();
        int p = off;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c < 0x80) {
                dst[p++] = (byte) c;
            } else if (c < 0x800) {
                dst[p++] = (byte) (0xC0 | (c >> 6));
                dst[p++] = (byte) (0x80 | (c & 0x3F));
            } else if (Character.isHighSurrogate(c)) {
                int cp = Character.toCodePoint(c, s.charAt(++i));
                dst[p++] = (byte) (0xF0 | (cp >> 18));
                dst[p++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                dst[p++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                dst[p++] = (byte) (0x80 | (cp & 0x3F));
            } else {
                dst[p++] = (byte) (0xE0 | (c >> 12));
                dst[p++] = (byte) (0x80 | ((c >> 6) & 0x3F));
                dst[p++] = (byte) (0x80 | (c & 0x3F));
            }
        }
        return p;
    }
}
