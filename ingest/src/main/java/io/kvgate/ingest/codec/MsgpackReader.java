package io.kvgate.ingest.codec;

/**
 * A zero-allocation msgpack reader over a byte[] region: reads headers and scalars in place, compares strings
 * against expected byte constants, skips values iteratively (no recursion, so hostile nesting cannot overflow the
 * stack). Every read is bounds-checked against the region; violations throw the preallocated
 * {@link MsgpackFormatException} with the reason in {@link #errorReason()}.
 *
 * <p>Integers: every msgpack width (positive/negative fixint, uint8..uint64, int8..int64) is returned as the
 * same 64-bit two's-complement pattern, so a uint64 &ge; 2^63 (vLLM) and a negative int64 (SGLang) with the same
 * bits are the same {@code long}.
 *
 * <p><b>Threading contract:</b> not thread-safe; one per decoding thread, re-wrapped per frame.
 */
public final class MsgpackReader {
    public static final int NIL = 0xc0;

    private byte[] buf;
    private int pos;
    private int limit;
    private String errorReason = "";

    public void wrap(byte[] buffer, int offset, int length) {
        if (offset < 0 || length < 0 || offset + length > buffer.length) {
            throw new IndexOutOfBoundsException("offset=" + offset + " length=" + length + " buffer=" + buffer.length);
        }
        this.buf = buffer;
        this.pos = offset;
        this.limit = offset + length;
    }

    public int position() {
        return pos;
    }

    public void position(int position) {
        this.pos = position;
    }

    public int remaining() {
        return limit - pos;
    }

    public String errorReason() {
        return errorReason;
    }

    MsgpackFormatException fail(String reason) {
        errorReason = reason;
        return MsgpackFormatException.INSTANCE;
    }

    private void need(int n) {
        if (n < 0 || limit - pos < n) {
            throw fail("truncated");
        }
    }

    /** The next format byte (0..255) without consuming it. */
    public int peekFormat() {
        need(1);
        return buf[pos] & 0xFF;
    }

    public boolean tryReadNil() {
        if (peekFormat() == NIL) {
            pos++;
            return true;
        }
        return false;
    }

    public static boolean isArray(int f) {
        return (f & 0xF0) == 0x90 || f == 0xdc || f == 0xdd;
    }

    public static boolean isMap(int f) {
        return (f & 0xF0) == 0x80 || f == 0xde || f == 0xdf;
    }

    public static boolean isInt(int f) {
        return f <= 0x7f || f >= 0xe0 || (f >= 0xcc && f <= 0xd3);
    }

    public static boolean isString(int f) {
        return (f & 0xE0) == 0xa0 || f == 0xd9 || f == 0xda || f == 0xdb;
    }

    public static boolean isBin(int f) {
        return f == 0xc4 || f == 0xc5 || f == 0xc6;
    }

    public static boolean isFloat(int f) {
        return f == 0xca || f == 0xcb;
    }

    public int readArrayHeader() {
        int f = peekFormat();
        int n;
        if ((f & 0xF0) == 0x90) {
            pos++;
            n = f & 0x0F;
        } else if (f == 0xdc) {
            need(3);
            n = u16(pos + 1);
            pos += 3;
        } else if (f == 0xdd) {
            need(5);
            n = s32len(pos + 1);
            pos += 5;
        } else {
            throw fail("expected array");
        }
        // Every element takes at least one byte: a count beyond the bytes left is a lie, rejected before any loop.
        if (n > limit - pos) {
            throw fail("array length exceeds frame");
        }
        return n;
    }

    public int readMapHeader() {
        int f = peekFormat();
        int n;
        if ((f & 0xF0) == 0x80) {
            pos++;
            n = f & 0x0F;
        } else if (f == 0xde) {
            need(3);
            n = u16(pos + 1);
            pos += 3;
        } else if (f == 0xdf) {
            need(5);
            n = s32len(pos + 1);
            pos += 5;
        } else {
            throw fail("expected map");
        }
        if (n > (limit - pos) / 2) {
            throw fail("map length exceeds frame");
        }
        return n;
    }

    /** Any msgpack integer as its 64-bit pattern. */
    public long readLong() {
        int f = peekFormat();
        if (f <= 0x7f) {
            pos++;
            return f;
        }
        if (f >= 0xe0) {
            pos++;
            return (byte) f;
        }
        switch (f) {
            case 0xcc -> {
                need(2);
                long v = buf[pos + 1] & 0xFF;
                pos += 2;
                return v;
            }
            case 0xcd -> {
                need(3);
                long v = u16(pos + 1);
                pos += 3;
                return v;
            }
            case 0xce -> {
                need(5);
                long v = i32(pos + 1) & 0xFFFFFFFFL;
                pos += 5;
                return v;
            }
            case 0xcf, 0xd3 -> {
                need(9);
                long v = i64(pos + 1);
                pos += 9;
                return v;
            }
            case 0xd0 -> {
                need(2);
                long v = buf[pos + 1];
                pos += 2;
                return v;
            }
            case 0xd1 -> {
                need(3);
                long v = (short) u16(pos + 1);
                pos += 3;
                return v;
            }
            case 0xd2 -> {
                need(5);
                long v = i32(pos + 1);
                pos += 5;
                return v;
            }
            default -> throw fail("expected integer");
        }
    }

    /** An integer or float as a double (timestamps). */
    public double readNumber() {
        int f = peekFormat();
        if (f == 0xcb) {
            need(9);
            double d = Double.longBitsToDouble(i64(pos + 1));
            pos += 9;
            return d;
        }
        if (f == 0xca) {
            need(5);
            float x = Float.intBitsToFloat(i32(pos + 1));
            pos += 5;
            return x;
        }
        if (isInt(f)) {
            return readLong();
        }
        throw fail("expected number");
    }

    /** Reads a str header; returns the payload length, the payload starts at {@link #position()}. */
    public int readStringHeader() {
        int f = peekFormat();
        int n;
        if ((f & 0xE0) == 0xa0) {
            pos++;
            n = f & 0x1F;
        } else if (f == 0xd9) {
            need(2);
            n = buf[pos + 1] & 0xFF;
            pos += 2;
        } else if (f == 0xda) {
            need(3);
            n = u16(pos + 1);
            pos += 3;
        } else if (f == 0xdb) {
            need(5);
            n = s32len(pos + 1);
            pos += 5;
        } else {
            throw fail("expected string");
        }
        need(n);
        return n;
    }

    /** Reads a str header when the next value is a str (returns its length), else returns -1 consuming nothing. */
    public int readStringHeaderOrMinus1() {
        return isString(peekFormat()) ? readStringHeader() : -1;
    }

    /** Reads a bin header; returns the payload length, the payload starts at {@link #position()}. */
    public int readBinHeader() {
        int f = peekFormat();
        int n;
        if (f == 0xc4) {
            need(2);
            n = buf[pos + 1] & 0xFF;
            pos += 2;
        } else if (f == 0xc5) {
            need(3);
            n = u16(pos + 1);
            pos += 3;
        } else if (f == 0xc6) {
            need(5);
            n = s32len(pos + 1);
            pos += 5;
        } else {
            throw fail("expected bin");
        }
        need(n);
        return n;
    }

    /**
     * Reads a str and compares it with {@code expected} (ASCII bytes); consumes it either way.
     */
    public boolean readStringEquals(byte[] expected) {
        int n = readStringHeader();
        boolean eq = n == expected.length && regionEquals(pos, expected);
        pos += n;
        return eq;
    }

    /** Compares the str payload of length {@code n} at {@code at} (already positioned by the caller). */
    boolean regionEquals(int at, byte[] expected) {
        for (int i = 0; i < expected.length; i++) {
            if (buf[at + i] != expected[i]) {
                return false;
            }
        }
        return true;
    }

    /** Skips {@code n} bytes (payload of a str/bin already read by its header). */
    public void skipBytes(int n) {
        need(n);
        pos += n;
    }

    /** Big-endian long of the last (up to) 8 bytes of {@code [at, at+n)}: the vLLM bytes-hash fold. */
    long foldLast8(int at, int n) {
        int from = Math.max(at, at + n - 8);
        long v = 0;
        for (int i = from; i < at + n; i++) {
            v = (v << 8) | (buf[i] & 0xFF);
        }
        return v;
    }

    /** Skips one complete value of any type, iteratively. */
    public void skipValue() {
        long pending = 1;
        while (pending > 0) {
            pending--;
            int f = peekFormat();
            if (f <= 0x7f || f >= 0xe0 || f == 0xc0 || f == 0xc2 || f == 0xc3) {
                pos++;
            } else if ((f & 0xF0) == 0x90 || f == 0xdc || f == 0xdd) {
                pending += readArrayHeader();
            } else if ((f & 0xF0) == 0x80 || f == 0xde || f == 0xdf) {
                pending += 2L * readMapHeader();
            } else if ((f & 0xE0) == 0xa0 || f == 0xd9 || f == 0xda || f == 0xdb) {
                skipBytes(readStringHeader());
            } else {
                switch (f) {
                    case 0xc4, 0xc5, 0xc6 -> skipBytes(readBinHeader());
                    case 0xcc, 0xd0 -> skipBytes(2);
                    case 0xcd, 0xd1 -> skipBytes(3);
                    case 0xce, 0xd2, 0xca -> skipBytes(5);
                    case 0xcf, 0xd3, 0xcb -> skipBytes(9);
                    case 0xd4 -> skipBytes(3);
                    case 0xd5 -> skipBytes(4);
                    case 0xd6 -> skipBytes(6);
                    case 0xd7 -> skipBytes(10);
                    case 0xd8 -> skipBytes(18);
                    case 0xc7 -> {
                        need(2);
                        int n = buf[pos + 1] & 0xFF;
                        skipBytes(3 + n);
                    }
                    case 0xc8 -> {
                        need(3);
                        int n = u16(pos + 1);
                        skipBytes(4 + n);
                    }
                    case 0xc9 -> {
                        need(5);
                        int n = s32len(pos + 1);
                        if (n > Integer.MAX_VALUE - 6) {
                            throw fail("ext length");
                        }
                        skipBytes(6 + n);
                    }
                    default -> throw fail("reserved format byte 0xc1");
                }
            }
            if (pending > limit - pos) {
                throw fail("element count exceeds frame");
            }
        }
    }

    private int u16(int at) {
        return ((buf[at] & 0xFF) << 8) | (buf[at + 1] & 0xFF);
    }

    private int i32(int at) {
        return ((buf[at] & 0xFF) << 24) | ((buf[at + 1] & 0xFF) << 16) | ((buf[at + 2] & 0xFF) << 8)
            | (buf[at + 3] & 0xFF);
    }

    /** A 32-bit length; anything above Integer.MAX_VALUE cannot fit a frame and is malformed. */
    private int s32len(int at) {
        int n = i32(at);
        if (n < 0) {
            throw fail("length exceeds 2^31");
        }
        return n;
    }

    private long i64(int at) {
        return ((long) i32(at) << 32) | (i32(at + 4) & 0xFFFFFFFFL);
    }
}
