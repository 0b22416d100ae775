package io.kvgate.index.tokenize;

/**
 * GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable char so that vocab and merge strings in
 * tokenizer.json are text. Printable Latin-1 bytes map to themselves; the other 68 map to U+0100.. in byte order.
 *
 * <p>Immutable tables; thread-safe.
 */
final class ByteLevel {
    private static final char[] BYTE_TO_CHAR = new char[256];
    private static final short[] CHAR_TO_BYTE = new short[512];

    static {
        java.util.Arrays.fill(CHAR_TO_BYTE, (short) -1);
        int n = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char c = printable ? (char) b : (char) (256 + n++);
            BYTE_TO_CHAR[b] = c;
            CHAR_TO_BYTE[c] = (short) b;
        }
    }

    private ByteLevel() {
    }

    static char charOf(int b) {
        return BYTE_TO_CHAR[b & 0xFF];
    }

    /**
     * Converts a byte-level token string (as stored in tokenizer.json) back to its raw bytes.
     *
     * @return the bytes, or null if the string holds a char outside the byte-level alphabet
     */
    static byte[] toBytes(String token) {
        byte[] out = new byte[token.length()];
        for (int i = 0; i < token.length(); i++) {
            char c = token.charAt(i);
            if (c >= CHAR_TO_BYTE.length || CHAR_TO_BYTE[c] < 0) {
                return null;
            }
            out[i] = (byte) CHAR_TO_BYTE[c];
        }
        return out;
    }
}
