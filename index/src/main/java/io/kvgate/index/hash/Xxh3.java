package io.kvgate.index.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * XXH3-128 with seed 0 and the default secret — what vLLM's {@code xxhash_cbor} calls ({@code xxh3_128_digest}) —
 * written from the algorithm in xxHash's {@code doc/xxhash_spec.md} for the one use here: a byte range of a
 * reused buffer, the canonical digest written straight into a caller's array.
 *
 * <p>Why not zero-allocation-hashing's {@code LongTupleHashFunction.xx128()} (still the test oracle): a block's
 * CBOR is 36-400 bytes, where that library's generic access layer, seed handling and {@code long[]} result cost
 * about a fifth of the hash (measured in {@code BlockHashBench}); here seed 0 folds into constants, the secret
 * words of the 17-128 byte path are compile-time constants, and nothing is written but the digest. Every input
 * length path (0, 1-3, 4-8, 9-16, 17-128, 129-240, 241+ including multi-block inputs) is checked against Python's
 * {@code xxhash} reference vectors and against the library over every length to several kilobytes.
 *
 * <p>Public for the benchmarks' raw baseline; the hasher is its one production caller. Stateless, thread-safe, never
 * allocates.
 */
public final class Xxh3 {
    private static final VarHandle LE64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LE32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle BE64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    private static final long P32_1 = 0x9E3779B1L;
    private static final long P32_2 = 0x85EBCA77L;
    private static final long P32_3 = 0xC2B2AE3DL;
    private static final long P64_1 = 0x9E3779B185EBCA87L;
    private static final long P64_2 = 0xC2B2AE3D27D4EB4FL;
    private static final long P64_3 = 0x165667B19E3779F9L;
    private static final long P64_4 = 0x85EBCA77C2B2AE63L;
    private static final long P64_5 = 0x27D4EB2F165667C5L;
    private static final long PMX_1 = 0x165667919E3779F9L;
    private static final long PMX_2 = 0x9FB21C651E98DF25L;

    /** The default 192-byte secret (kSecret), read little-endian at any offset. */
    private static final byte[] SECRET = hex(
        "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
            + "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
            + "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
            + "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
            + "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
            + "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e");
    private static final int SECRET_LENGTH = 192;
    private static final int STRIPES_PER_BLOCK = (SECRET_LENGTH - 64) / 8;
    private static final int BLOCK_LENGTH = 64 * STRIPES_PER_BLOCK;
    /** Accumulator lanes of the long-input path: the size of the scratch {@link #hash128} takes. */
    public static final int ACC_LANES = 8;

    // Secret words of the 17-128 byte path as constants (the path every 16-token vLLM block takes).
    private static final long S0 = secret(0);
    private static final long S8 = secret(8);
    private static final long S16 = secret(16);
    private static final long S24 = secret(24);
    private static final long S32 = secret(32);
    private static final long S40 = secret(40);
    private static final long S48 = secret(48);
    private static final long S56 = secret(56);
    private static final long S64 = secret(64);
    private static final long S72 = secret(72);
    private static final long S80 = secret(80);
    private static final long S88 = secret(88);
    private static final long S96 = secret(96);
    private static final long S104 = secret(104);
    private static final long S112 = secret(112);
    private static final long S120 = secret(120);

    private Xxh3() {}

    /**
     * Writes the canonical XXH3-128 digest of {@code in[off, off + len)} (high 64 bits first, big-endian — what
     * Python's {@code xxh3_128().digest()} returns) to {@code dst[dstOff, dstOff + 16)}.
     *
     * @param acc scratch of {@link #ACC_LANES} longs for inputs over 240 bytes (the caller's, so that path does not
     *            allocate either)
     */
    public static void hash128(byte[] in, int off, int len, byte[] dst, int dstOff, long[] acc) {
        long low;
        long high;
        if (len <= 16) {
            if (len > 8) {
                long first = (long) LE64.get(in, off);
                long last = (long) LE64.get(in, off + len - 8);
                long val1 = (S32 ^ S40) ^ first ^ last;
                long val2 = (S48 ^ S56) ^ last;
                long mLow = val1 * P64_1;
                long mHigh = Math.unsignedMultiplyHigh(val1, P64_1);
                long lo = mLow + ((long) (len - 1) << 54);
                long hi = mHigh + (val2 & 0xFFFF_FFFF_0000_0000L) + (val2 & 0xFFFF_FFFFL) * P32_2;
                lo ^= Long.reverseBytes(hi);
                long m2Low = lo * P64_2;
                long m2High = Math.unsignedMultiplyHigh(lo, P64_2) + hi * P64_2;
                low = avalanche(m2Low);
                high = avalanche(m2High);
            } else if (len >= 4) {
                long first = (int) LE32.get(in, off) & 0xFFFF_FFFFL;
                long last = (int) LE32.get(in, off + len - 4) & 0xFFFF_FFFFL;
                long value = (S16 ^ S24) ^ (first | last << 32);
                long mul = P64_1 + ((long) len << 2);
                long mLow = value * mul;
                long hi = Math.unsignedMultiplyHigh(value, mul) + (mLow << 1);
                long lo = mLow ^ (hi >>> 3);
                lo ^= lo >>> 35;
                lo *= PMX_2;
                lo ^= lo >>> 28;
                low = lo;
                high = avalanche(hi);
            } else if (len > 0) {
                int combined = (in[off + len - 1] & 0xFF) | len << 8 | (in[off] & 0xFF) << 16
                    | (in[off + (len >> 1)] & 0xFF) << 24;
                long sw0 = secret32(0) ^ secret32(4);
                long sw1 = secret32(8) ^ secret32(12);
                low = avalancheXxh64(sw0 ^ (combined & 0xFFFF_FFFFL));
                high = avalancheXxh64(sw1 ^ (Integer.rotateLeft(Integer.reverseBytes(combined), 13) & 0xFFFF_FFFFL));
            } else {
                low = avalancheXxh64(S64 ^ S72);
                high = avalancheXxh64(S80 ^ S88);
            }
        } else if (len <= 128) {
            long acc0 = len * P64_1;
            long acc1 = 0;
            int end = off + len;
            if (len > 32) {
                if (len > 64) {
                    if (len > 96) {
                        long a = (long) LE64.get(in, off + 48);
                        long b = (long) LE64.get(in, off + 56);
                        long c = (long) LE64.get(in, end - 64);
                        long d = (long) LE64.get(in, end - 56);
                        acc0 += mix(a ^ S96, b ^ S104);
                        acc1 += mix(c ^ S112, d ^ S120);
                        acc0 ^= c + d;
                        acc1 ^= a + b;
                    }
                    long a = (long) LE64.get(in, off + 32);
                    long b = (long) LE64.get(in, off + 40);
                    long c = (long) LE64.get(in, end - 48);
                    long d = (long) LE64.get(in, end - 40);
                    acc0 += mix(a ^ S64, b ^ S72);
                    acc1 += mix(c ^ S80, d ^ S88);
                    acc0 ^= c + d;
                    acc1 ^= a + b;
                }
                long a = (long) LE64.get(in, off + 16);
                long b = (long) LE64.get(in, off + 24);
                long c = (long) LE64.get(in, end - 32);
                long d = (long) LE64.get(in, end - 24);
                acc0 += mix(a ^ S32, b ^ S40);
                acc1 += mix(c ^ S48, d ^ S56);
                acc0 ^= c + d;
                acc1 ^= a + b;
            }
            long a = (long) LE64.get(in, off);
            long b = (long) LE64.get(in, off + 8);
            long c = (long) LE64.get(in, end - 16);
            long d = (long) LE64.get(in, end - 8);
            acc0 += mix(a ^ S0, b ^ S8);
            acc1 += mix(c ^ S16, d ^ S24);
            acc0 ^= c + d;
            acc1 ^= a + b;
            low = avalanche(acc0 + acc1);
            high = -avalanche(acc0 * P64_1 + acc1 * P64_4 + len * P64_2);
        } else if (len <= 240) {
            long acc0 = len * P64_1;
            long acc1 = 0;
            int chunks = len >> 5;
            for (int i = 0; i < 4; i++) {
                int p = off + 32 * i;
                long a = (long) LE64.get(in, p);
                long b = (long) LE64.get(in, p + 8);
                long c = (long) LE64.get(in, p + 16);
                long d = (long) LE64.get(in, p + 24);
                acc0 += mix(a ^ secret(32 * i), b ^ secret(32 * i + 8));
                acc1 += mix(c ^ secret(32 * i + 16), d ^ secret(32 * i + 24));
                acc0 ^= c + d;
                acc1 ^= a + b;
            }
            acc0 = avalanche(acc0);
            acc1 = avalanche(acc1);
            for (int i = 4; i < chunks; i++) {
                int p = off + 32 * i;
                int s = 32 * (i - 4) + 3;
                long a = (long) LE64.get(in, p);
                long b = (long) LE64.get(in, p + 8);
                long c = (long) LE64.get(in, p + 16);
                long d = (long) LE64.get(in, p + 24);
                acc0 += mix(a ^ secret(s), b ^ secret(s + 8));
                acc1 += mix(c ^ secret(s + 16), d ^ secret(s + 24));
                acc0 ^= c + d;
                acc1 ^= a + b;
            }
            // The last 32 bytes, halves swapped, secret offset 103 (seed 0: the negated seed is 0 too).
            int end = off + len;
            long a = (long) LE64.get(in, end - 16);
            long b = (long) LE64.get(in, end - 8);
            long c = (long) LE64.get(in, end - 32);
            long d = (long) LE64.get(in, end - 24);
            acc0 += mix(a ^ secret(103), b ^ secret(111));
            acc1 += mix(c ^ secret(119), d ^ secret(127));
            acc0 ^= c + d;
            acc1 ^= a + b;
            low = avalanche(acc0 + acc1);
            high = -avalanche(acc0 * P64_1 + acc1 * P64_4 + len * P64_2);
        } else {
            hashLong(in, off, len, dst, dstOff, acc);
            return;
        }
        BE64.set(dst, dstOff, high);
        BE64.set(dst, dstOff + 8, low);
    }

    /** Inputs over 240 bytes: eight lanes over 64-byte stripes, 1024-byte blocks, scrambled between blocks. */
    private static void hashLong(byte[] in, int off, int len, byte[] dst, int dstOff, long[] acc) {
        acc[0] = P32_3;
        acc[1] = P64_1;
        acc[2] = P64_2;
        acc[3] = P64_3;
        acc[4] = P64_4;
        acc[5] = P32_2;
        acc[6] = P64_5;
        acc[7] = P32_1;
        int blocks = (len - 1) / BLOCK_LENGTH;
        for (int n = 0; n < blocks; n++) {
            int blockStart = off + n * BLOCK_LENGTH;
            for (int s = 0; s < STRIPES_PER_BLOCK; s++) {
                accumulate(acc, in, blockStart + 64 * s, 8 * s);
            }
            for (int i = 0; i < 8; i++) {
                long a = acc[i];
                a ^= a >>> 47;
                a ^= secret(SECRET_LENGTH - 64 + 8 * i);
                acc[i] = a * P32_1;
            }
        }
        int lastStart = off + blocks * BLOCK_LENGTH;
        int lastLength = len - blocks * BLOCK_LENGTH;
        int fullStripes = (lastLength - 1) / 64;
        for (int s = 0; s < fullStripes; s++) {
            accumulate(acc, in, lastStart + 64 * s, 8 * s);
        }
        accumulate(acc, in, off + len - 64, SECRET_LENGTH - 64 - 7);
        long low = mergeAccs(acc, len * P64_1, 11);
        long high = mergeAccs(acc, ~(len * P64_2), SECRET_LENGTH - 64 - 11);
        BE64.set(dst, dstOff, high);
        BE64.set(dst, dstOff + 8, low);
    }

    private static void accumulate(long[] acc, byte[] in, int stripe, int secretOffset) {
        for (int i = 0; i < 8; i++) {
            long data = (long) LE64.get(in, stripe + 8 * i);
            long key = data ^ secret(secretOffset + 8 * i);
            acc[i ^ 1] += data;
            acc[i] += (key & 0xFFFF_FFFFL) * (key >>> 32);
        }
    }

    private static long mergeAccs(long[] acc, long start, int secretOffset) {
        long result = start;
        for (int i = 0; i < 4; i++) {
            result += mix(acc[2 * i] ^ secret(secretOffset + 16 * i), acc[2 * i + 1] ^ secret(secretOffset + 16 * i + 8));
        }
        return avalanche(result);
    }

    /** 64x64 -> 128-bit multiply, folded: low half xor high half. */
    private static long mix(long x, long y) {
        return x * y ^ Math.unsignedMultiplyHigh(x, y);
    }

    private static long avalanche(long x) {
        x ^= x >>> 37;
        x *= PMX_1;
        return x ^ (x >>> 32);
    }

    private static long avalancheXxh64(long x) {
        x ^= x >>> 33;
        x *= P64_2;
        x ^= x >>> 29;
        x *= P64_3;
        return x ^ (x >>> 32);
    }

    private static long secret(int offset) {
        return (long) LE64.get(SECRET, offset);
    }

    private static long secret32(int offset) {
        return (int) LE32.get(SECRET, offset) & 0xFFFF_FFFFL;
    }

    private static byte[] hex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s, 2 * i, 2 * i + 2, 16);
        }
        return b;
    }
}
