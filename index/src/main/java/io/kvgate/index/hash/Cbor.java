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
     * Per-width forms of a token head, indexed by {@code numberOfLeadingZeros(token)} (32 for tokens below 24):
     * {@code head << 56 | length << 8 | shift}. The shift places the value's bytes right after the head in a
     * big-endian word; {@link #tokenRun} ORs the value in and stores the word, so one lookup replaces the three
     * width comparisons and the arithmetic that turned them into a head, a shift and a length.
     */
    private static final long[] TOKEN_FORMS = tokenForms();

    private static long[] tokenForms() {
        long[] forms = new long[33];
        for (int lz = 0; lz <= 32; lz++) {
            int bits = 32 - lz;
            // 16..31 share lz 27 and get the two-byte form: tokenRun sends those below 24 to index 32 (one byte).
            int valueBytes = bits <= 4 ? 0 : bits <= 8 ? 1 : bits <= 16 ? 2 : 4;
            long head = valueBytes == 0 ? 0 : valueBytes == 4 ? 0x1A : 0x17 + valueBytes;
            forms[lz] = head << 56 | (long) (1 + valueBytes) << 8 | (56 - 8 * valueBytes);
        }
        return forms;
    }

    /**
     * Writes {@code tokens[from, to)} as consecutive CBOR unsigned integers (the same bytes as {@link #token} for
     * each) and returns the end offset. Branch-free per token — real prompts mix widths unpredictably, and a
     * mispredicted branch costs more than the lookup — with one 8-byte store per token: only the first 1, 2, 3 or
     * 5 bytes of each store are the token's, the rest is overwritten by the next token's store, and the bytes past
     * the returned end are garbage. {@code dst} needs 8 bytes of room after the last token's start.
     *
     * <p>The word stored is {@code form | value << form} (Java masks the shift to the form's low 6 bits): the
     * form's length and shift fields sit in the word's last two bytes, past every encoding's end, so they need no
     * masking either.
     */
    static int tokenRun(byte[] dst, int off, int[] tokens, int from, int to) {
        long[] forms = TOKEN_FORMS;
        int p = off;
        for (int i = from; i < to; i++) {
            int t = tokens[i];
            int index = Integer.compareUnsigned(t, 24) < 0 ? 32 : Integer.numberOfLeadingZeros(t);
            long form = forms[index];
            LONG_BE.set(dst, p, form | (t & 0xFFFF_FFFFL) << form);
            p += (int) form >>> 8;
        }
        return p;
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
