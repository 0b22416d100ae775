package io.kvgate.index.hash;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

/** Canonical heads at every width boundary, against RFC 8949 §3 (the same bytes cbor2 canonical writes). */
class CborTest {
    private static byte[] bytes(int... v) {
        byte[] b = new byte[v.length];
        for (int i = 0; i < v.length; i++) {
            b[i] = (byte) v[i];
        }
        return b;
    }

    private static byte[] token(int t) {
        byte[] buf = new byte[8];
        int end = Cbor.token(buf, 0, t);
        return Arrays.copyOf(buf, end);
    }

    private static byte[] head(int major, long v) {
        byte[] buf = new byte[8];
        int end = Cbor.head(buf, 0, major, v);
        assertEquals(end, Cbor.headLength(v));
        return Arrays.copyOf(buf, end);
    }

    @Test
    void tokenWidthBoundaries() {
        assertArrayEquals(bytes(0x00), token(0));
        assertArrayEquals(bytes(0x17), token(23));
        assertArrayEquals(bytes(0x18, 0x18), token(24));
        assertArrayEquals(bytes(0x18, 0xFF), token(255));
        assertArrayEquals(bytes(0x19, 0x01, 0x00), token(256));
        assertArrayEquals(bytes(0x19, 0xFF, 0xFF), token(65_535));
        assertArrayEquals(bytes(0x1A, 0x00, 0x01, 0x00, 0x00), token(65_536));
        assertArrayEquals(bytes(0x1A, 0x7F, 0xFF, 0xFF, 0xFF), token(Integer.MAX_VALUE));
        // u32 ids >= 2^31 arrive as negative ints and are encoded unsigned.
        assertArrayEquals(bytes(0x1A, 0x80, 0x00, 0x00, 0x00), token(Integer.MIN_VALUE));
        assertArrayEquals(bytes(0x1A, 0xFF, 0xFF, 0xFF, 0xFF), token(-1));
    }

    @Test
    void tokenRunWritesTheSameBytesAsOneTokenAtATime() {
        java.util.SplittableRandom rnd = new java.util.SplittableRandom(5);
        int[] edges = {0, 1, 15, 16, 23, 24, 25, 31, 32, 255, 256, 257, 65_535, 65_536, 65_537, Integer.MAX_VALUE,
            Integer.MIN_VALUE, -2, -1};
        // Every edge alone and beside every other edge (a token's store is overwritten by the next one's).
        for (int a : edges) {
            for (int b : edges) {
                assertRunMatches(new int[] {a, b, a}, 0, 3);
            }
        }
        for (int i = 0; i < 20_000; i++) {
            int n = rnd.nextInt(0, 70);
            int[] t = new int[n + 4];
            for (int j = 0; j < t.length; j++) {
                t[j] = switch (rnd.nextInt(5)) {
                    case 0 -> rnd.nextInt(0, 24);
                    case 1 -> rnd.nextInt(0, 256);
                    case 2 -> rnd.nextInt(0, 65_536);
                    case 3 -> rnd.nextInt(0, 300_000);
                    default -> rnd.nextInt();
                };
            }
            int from = rnd.nextInt(0, 5);
            assertRunMatches(t, from, Math.min(t.length, from + n));
        }
    }

    private static void assertRunMatches(int[] tokens, int from, int to) {
        byte[] want = new byte[5 * tokens.length + 16];
        int wantEnd = 7;
        for (int i = from; i < to; i++) {
            wantEnd = Cbor.token(want, wantEnd, tokens[i]);
        }
        byte[] got = new byte[5 * tokens.length + 16];
        java.util.Arrays.fill(got, (byte) 0xEE);
        int gotEnd = Cbor.tokenRun(got, 7, tokens, from, to);
        assertEquals(wantEnd, gotEnd, Arrays.toString(Arrays.copyOfRange(tokens, from, to)));
        assertArrayEquals(Arrays.copyOfRange(want, 7, wantEnd), Arrays.copyOfRange(got, 7, gotEnd),
            Arrays.toString(Arrays.copyOfRange(tokens, from, to)));
        for (int i = 0; i < 7; i++) {
            assertEquals((byte) 0xEE, got[i], "byte before the run");
        }
    }

    @Test
    void arrayTextAndByteHeads() {
        assertArrayEquals(bytes(0x80), head(Cbor.MAJOR_ARRAY, 0));
        assertArrayEquals(bytes(0x90), head(Cbor.MAJOR_ARRAY, 16));
        assertArrayEquals(bytes(0x97), head(Cbor.MAJOR_ARRAY, 23));
        assertArrayEquals(bytes(0x98, 24), head(Cbor.MAJOR_ARRAY, 24));
        assertArrayEquals(bytes(0x98, 0xFF), head(Cbor.MAJOR_ARRAY, 255));
        assertArrayEquals(bytes(0x99, 0x01, 0x00), head(Cbor.MAJOR_ARRAY, 256));
        assertArrayEquals(bytes(0x99, 0xFF, 0xFF), head(Cbor.MAJOR_ARRAY, 65_535));
        assertArrayEquals(bytes(0x9A, 0x00, 0x01, 0x00, 0x00), head(Cbor.MAJOR_ARRAY, 65_536));
        assertArrayEquals(bytes(0x9A, 0xFF, 0xFF, 0xFF, 0xFF), head(Cbor.MAJOR_ARRAY, 0xFFFF_FFFFL));
        assertArrayEquals(bytes(0x50), head(Cbor.MAJOR_BYTES, 16));
        assertArrayEquals(bytes(0x58, 0x20), head(Cbor.MAJOR_BYTES, 32));
        assertArrayEquals(bytes(0x61), head(Cbor.MAJOR_TEXT, 1));
        assertArrayEquals(bytes(0x77), head(Cbor.MAJOR_TEXT, 23));
        assertArrayEquals(bytes(0x78, 0x18), head(Cbor.MAJOR_TEXT, 24));
        assertArrayEquals(bytes(0x79, 0x01, 0x00), head(Cbor.MAJOR_TEXT, 256));
    }

    @Test
    void utf8MatchesJdkForValidStringsAndRejectsLoneSurrogates() {
        for (String s : new String[] {"", "a", "tenant-\u00e4", "\u65e5\u672c\u8a9e", "emoji-\uD83D\uDE00",
            "\u07FF\u0800\uFFFF", "\u0000"}) {
            byte[] expected = s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            assertEquals(expected.length, Utf8.encodedLength(s), s);
            byte[] out = new byte[expected.length + 2];
            assertEquals(expected.length + 1, Utf8.encode(s, out, 1));
            assertArrayEquals(expected, Arrays.copyOfRange(out, 1, 1 + expected.length));
        }
        assertEquals(-1, Utf8.encodedLength("a\uD83D"));
        assertEquals(-1, Utf8.encodedLength("\uDE00a"));
        assertEquals(-1, Utf8.encodedLength("\uD83Dx"));
    }
}
