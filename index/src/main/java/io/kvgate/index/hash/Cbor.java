package io.kvgate.index.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * The subset of canonical CBOR (RFC 8949 §4.2.1, as {@code cbor2.dumps(..., canonical=True)} writes it) that vLLM
 * block hashes use: definite-length arrays, byte strings, text strings, unsigned integers up to 2^32-1, null.
 * Every head uses its shortest form. Writes into a caller's buffer and returns the new offset; never allocates.
 * Stateless, thread-safe.
 */
final class Cbor {
    static final int MAJOR_UINT = 0;
    static final int MAJOR_BYTES = 2;
    static final int MAJOR_TEXT = 3;
    static final int MAJOR_ARRAY = 4;
    static final byte NULL = (byte) 0xF6;

    /** Longest head: initial byte + 4-byte argument (arguments here never exceed 2^32-1). */
    static final int MAX_HEAD_BYTES = 5;

    private static final VarHandle LONG_BE =
        MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private Cbor() {}

    /** Writes a head with major type {@code major} and argument {@code value} in [0, 2^32-1]. */
    static int head(byte[] dst, int off, int major, long value) {
        int mt = major << 5;
        if (value < 24) {
            dst[off] = (byte) (mt | (int) value);
            return off + 1;
        }
        if (value < 0x100) {
            dst[off] = (byte) (mt | 24);
            dst[off + 1] = (byte) value;
            return off + 2;
        }
        if (value < 0x1_0000) {
            dst[off] = (byte) (mt | 25);
            dst[off + 1] = (byte) (value >>> 8);
            dst[off + 2] = (byte) value;
            return off + 3;
        }
        dst[off] = (byte) (mt | 26);
        dst[off + 1] = (byte) (value >>> 24);
        dst[off + 2] = (byte) (value >>> 16);
        dst[off + 3] = (byte) (value >>> 8);
        dst[off + 4] = (byte) value;
        return off + 5;
    }

    /** Size of a head for argument {@code value}. */
    static int headLength(long value) {
        return value < 24 ? 1 : value < 0x100 ? 2 : value < 0x1_0000 ? 3 : 5;
    }

    /**
     * Writes a token id as an unsigned integer. Token ids are u32 (HF tokenizers, SGLang's u32le packing), so the
     * int's bit pattern is read as unsigned: ids >= 2^31 arrive as negative ints.
     */
    static int token(byte[] dst, int off, int token) {
        // Tokens below 2^16 dominate every real vocabulary; test the common widths first.
        if ((token & ~0xFFFF) == 0) {
            if (token < 24) {
                dst[off] = (byte) token;
                return off + 1;
            }
            if (token < 0x100) {
                dst[off] = 0x18;
                dst[off + 1] = (byte) token;
                return off + 2;
            }
            dst[off] = 0x19;
            dst[off + 1] = (byte) (token >>> 8);
            dst[off + 2] = (byte) token;
            return off + 3;
        }
        dst[off] = 0x1A;
        dst[off + 1] = (byte) (token >>> 24);
        dst[off + 2] = (byte) (token >>> 16);
        dst[off + 3] = (byte) (token >>> 8);
        dst[off + 4] = (byte) token;
        return off + 5;
    }

    /**
     * Same bytes as {@link #token}, without branches: token widths in real prompts vary unpredictably, and a
     * mispredicted branch per token costs more than the arithmetic. Writes 8 bytes at {@code off} (only the first
     * 1, 2, 3 or 5 are meaningful), so {@code dst} needs 8 bytes of room after {@code off}.
     */
    static int tokenBranchless(byte[] dst, int off, int token) {
        long v = token & 0xFFFF_FFFFL;
        long ge24 = (23 - v) >>> 63;
        long ge256 = (255 - v) >>> 63;
        long ge65536 = (65_535 - v) >>> 63;
        long widthClass = ge24 + ge256 + ge65536;
        // Below 24 the value is the whole item (head 0); otherwise head 0x18/0x19/0x1A, then 1/2/4 value bytes.
        long head = (0x17 + widthClass) * ge24;
        int shift = (int) (56 - 8 * widthClass - 8 * ge65536);
        LONG_BE.set(dst, off, (head << 56) | (v << shift));
        return off + (int) (1 + widthClass + ge65536);
    }

    /** Writes a text string (must be free of unpaired surrogates, see {@link Utf8#encodedLength}). */
    static int text(byte[] dst, int off, CharSequence s, int utf8Length) {
        int p = head(dst, off, MAJOR_TEXT, utf8Length);
        return Utf8.encode(s, dst, p);
    }

    /** Bytes needed for a text string of {@code utf8Length} bytes. */
    static int textLength(int utf8Length) {
        return headLength(utf8Length) + utf8Length;
    }
}
