package io.kvgate.dataplane.wire;

/**
 * JSON string literals the gateway writes itself (error objects, request edits, access-log lines): one escaping for
 * all of them, allocation-free (no formatter per control character).
 */
public final class JsonText {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private JsonText() {}

    /** Appends {@code s} as a JSON string literal, quotes included. */
    public static void appendQuoted(StringBuilder b, String s) {
        b.append('"');
        appendEscaped(b, s);
        b.append('"');
    }

    /**
     * Appends {@code s} escaped for the inside of a JSON string: quote, backslash and every control character; DEL and
     * U+2028/2029 too, so a line stays one line for JavaScript and log readers.
     */
    public static void appendEscaped(StringBuilder b, String s) {
        for (int i = 0, n = s.length(); i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20 || c == 0x7f || c == '\u2028' || c == '\u2029') {
                        b.append("\\u").append(HEX[c >> 12 & 0xf]).append(HEX[c >> 8 & 0xf]).append(HEX[c >> 4 & 0xf])
                            .append(HEX[c & 0xf]);
                    } else {
                        b.append(c);
                    }
                }
            }
        }
    }
}
