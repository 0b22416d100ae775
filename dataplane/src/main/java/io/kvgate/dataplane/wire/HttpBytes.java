package io.kvgate.dataplane.wire;

import io.netty.buffer.ByteBuf;

/** Byte-level HTTP/1.1 grammar (RFC 9110 §5.6, RFC 9112) shared by the wire codecs: no allocation. */
final class HttpBytes {
    private HttpBytes() {}

    static final byte CR = '\r';
    static final byte LF = '\n';

    private static final boolean[] TCHAR = new boolean[256];
    private static final boolean[] FIELD_VALUE = new boolean[256];

    static {
        for (int c = '0'; c <= '9'; c++) {
            TCHAR[c] = true;
        }
        for (int c = 'a'; c <= 'z'; c++) {
            TCHAR[c] = true;
            TCHAR[c - 32] = true;
        }
        for (char c : "!#$%&'*+-.^_`|~".toCharArray()) {
            TCHAR[c] = true;
        }
        // field-vchar = VCHAR / obs-text, plus SP and HTAB inside a value; no other control character.
        for (int c = 0x20; c < 0x7f; c++) {
            FIELD_VALUE[c] = true;
        }
        for (int c = 0x80; c < 0x100; c++) {
            FIELD_VALUE[c] = true;
        }
        FIELD_VALUE['\t'] = true;
    }

    static boolean isTchar(byte b) {
        return TCHAR[b & 0xff];
    }

    static boolean isFieldValue(byte b) {
        return FIELD_VALUE[b & 0xff];
    }

    static boolean isOws(byte b) {
        return b == ' ' || b == '\t';
    }

    /** The first index in [from, end) that is not OWS, or {@code end}. */
    static int skipOws(ByteBuf buf, int from, int end) {
        while (from < end && isOws(buf.getByte(from))) {
            from++;
        }
        return from;
    }

    /** {@code end} moved back over trailing OWS, never below {@code from}. */
    static int trimOwsEnd(ByteBuf buf, int from, int end) {
        while (end > from && isOws(buf.getByte(end - 1))) {
            end--;
        }
        return end;
    }

    static int lower(int b) {
        return b >= 'A' && b <= 'Z' ? b + 32 : b;
    }

    /** Whether {@code buf[index, index + name.length())} equals {@code name} (lower-case ASCII), ignoring case. */
    static boolean equalsIgnoreCase(ByteBuf buf, int index, String name) {
        for (int i = 0; i < name.length(); i++) {
            if (lower(buf.getByte(index + i)) != name.charAt(i)) {
                return false;
            }
        }
        return true;
    }

    /** Whether the bytes at [aIndex, +len) and [bIndex, +len) of {@code buf} are equal ignoring ASCII case. */
    static boolean equalsIgnoreCase(ByteBuf buf, int aIndex, int bIndex, int len) {
        for (int i = 0; i < len; i++) {
            if (lower(buf.getByte(aIndex + i)) != lower(buf.getByte(bIndex + i))) {
                return false;
            }
        }
        return true;
    }

    /** The value of a hex digit, or -1. */
    static int hexValue(byte b) {
        if (b >= '0' && b <= '9') {
            return b - '0';
        }
        int l = lower(b);
        if (l >= 'a' && l <= 'f') {
            return l - 'a' + 10;
        }
        return -1;
    }
}
