package io.kvgate.index.hash;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.HexFormat;
import java.util.SplittableRandom;

import com.fasterxml.jackson.databind.JsonNode;
import net.openhft.hashing.LongTupleHashFunction;
import org.junit.jupiter.api.Test;

/** Our XXH3-128 against Python's xxhash (golden vectors) and zero-allocation-hashing's xx128 (every length). */
class Xxh3Test {
    private static byte[] digest(byte[] in, int off, int len) {
        byte[] out = new byte[16];
        Xxh3.hash128(in, off, len, out, 0, new long[Xxh3.ACC_LANES]);
        return out;
    }

    /** kv_hash_random_vectors.json: xxhash 3.x's xxh3_128 digests of (i * 7 + 3) bytes, lengths 0..10000. */
    @Test
    void pythonXxhashVectorsOnEveryLengthPath() {
        JsonNode doc = Fixtures.load("kv_hash_random_vectors.json");
        byte[] data = new byte[10_000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7 + 3);
        }
        int n = 0;
        int multiBlock = 0;
        for (JsonNode c : doc.get("xxh3_128")) {
            int len = c.get("length").asInt();
            assertEquals(c.get("digest_hex").asText(), HexFormat.of().formatHex(digest(data, 0, len)), "length " + len);
            n++;
            multiBlock += len > 2048 ? 1 : 0;
        }
        assertEquals(1106, n);
        assertEquals(true, multiBlock > 0, "vectors reach the multi-block long path");
    }

    /** Random bytes at a random offset, every length up to 4 KiB (all paths, block boundaries of the long path). */
    @Test
    void sameAsZeroAllocationHashingOnEveryLengthAndOffset() {
        SplittableRandom rnd = new SplittableRandom(11);
        byte[] data = new byte[4_200];
        long[] acc = new long[Xxh3.ACC_LANES];
        byte[] out = new byte[20];
        long[] r = new long[2];
        for (int len = 0; len <= 4_096; len++) {
            for (int i = 0; i < data.length; i++) {
                data[i] = (byte) rnd.nextInt();
            }
            int off = rnd.nextInt(0, 100);
            Xxh3.hash128(data, off, len, out, 3, acc);
            LongTupleHashFunction.xx128().hashBytes(data, off, len, r);
            byte[] want = ByteBuffer.allocate(16).putLong(r[1]).putLong(r[0]).array();
            byte[] got = java.util.Arrays.copyOfRange(out, 3, 19);
            assertArrayEquals(want, got, "length " + len + " offset " + off);
        }
    }

    /** The digest goes to the range asked for and nowhere else; the input is only read. */
    @Test
    void writesOnlyTheSixteenDigestBytes() {
        byte[] in = new byte[300];
        new SplittableRandom(3).nextBytes(in);
        byte[] before = in.clone();
        byte[] dst = new byte[40];
        java.util.Arrays.fill(dst, (byte) 0x5A);
        for (int len : new int[] {0, 3, 8, 16, 100, 200, 300}) {
            Xxh3.hash128(in, 0, len, dst, 12, new long[Xxh3.ACC_LANES]);
            for (int i = 0; i < dst.length; i++) {
                if (i < 12 || i >= 28) {
                    assertEquals((byte) 0x5A, dst[i], "byte " + i + " after length " + len);
                }
            }
        }
        assertArrayEquals(before, in);
    }
}
