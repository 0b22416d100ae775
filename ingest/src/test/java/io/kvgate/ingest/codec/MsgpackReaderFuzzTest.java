package io.kvgate.ingest.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.random.RandomGenerator;

import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessageUnpacker;

/**
 * Issue #43 fuzzing: {@link MsgpackReader} against msgpack-core, the reference implementation, as the oracle. On
 * any bytes, {@link MsgpackReader#skipValue} accepts exactly what msgpack-core's {@code skipValue} accepts and
 * consumes the same number of bytes, and rejects everything else with {@link MsgpackFormatException} (no other
 * exception); every integer width reads as msgpack-core's value folded to 64 bits. The default run replays the
 * corpus and a few hundred fixed-seed tries per property; {@code ./kvgate test --fuzz} runs the fuzz-tier copies
 * with random seeds and {@code -Dfuzz.tries} tries.
 */
class MsgpackReaderFuzzTest {
    static final int MAX_INPUT_BYTES = 2048;
    /** Format bytes worth planting: every header kind, its width boundaries, and the reserved 0xc1. */
    static final List<byte[]> MSGPACK_TOKENS = List.of(
        new byte[] {(byte) 0xc0}, new byte[] {(byte) 0xc1}, new byte[] {(byte) 0xc2}, new byte[] {(byte) 0x7f},
        new byte[] {(byte) 0x80}, new byte[] {(byte) 0x8f}, new byte[] {(byte) 0x90}, new byte[] {(byte) 0x9f},
        new byte[] {(byte) 0xa0}, new byte[] {(byte) 0xbf}, new byte[] {(byte) 0xe0}, new byte[] {(byte) 0xff},
        new byte[] {(byte) 0xdc, 0, 2}, new byte[] {(byte) 0xdd, 0x7f, -1, -1, -1}, new byte[] {(byte) 0xdd, -1, -1, -1, -1},
        new byte[] {(byte) 0xde, -1, -1}, new byte[] {(byte) 0xdf, 0, 0, 0, 1}, new byte[] {(byte) 0xdb, -1, -1, -1, -6},
        new byte[] {(byte) 0xd9, 5}, new byte[] {(byte) 0xc4, 9}, new byte[] {(byte) 0xc6, 0x7f, -1, -1, -1},
        new byte[] {(byte) 0xc7, 1, 2}, new byte[] {(byte) 0xc9, 0x7f, -1, -1, -6, 0}, new byte[] {(byte) 0xd4, 1},
        new byte[] {(byte) 0xd8, 1}, new byte[] {(byte) 0xcf, -1, -1, -1, -1, -1, -1, -1, -1},
        new byte[] {(byte) 0xd3, -128, 0, 0, 0, 0, 0, 0, 0}, new byte[] {(byte) 0xcb, 0x7f, -8, 0, 0, 0, 0, 0, 1});

    static List<byte[]> seeds() {
        List<byte[]> seeds = new ArrayList<>(FuzzCorpus.bytes(FuzzCorpus.load("/fuzz/kvevents.corpus")));
        try {
            for (String[] fixture : KvEventDecoderTest.fixtures()) {
                seeds.add(java.util.HexFormat.of().parseHex(fixture[1]));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return seeds;
    }

    static final List<byte[]> SEEDS = seeds();
    /** A third each: mutants of the fixtures and corpus, soups of format bytes, and plain noise up to 256 bytes. */
    static final PropertyRunner.Generator<byte[]> MUTANTS = random -> switch (random.nextInt(3)) {
        case 0 -> ByteMutations.mutant(random, SEEDS, MSGPACK_TOKENS, 6, MAX_INPUT_BYTES);
        case 1 -> ByteMutations.tokenSoup(random, MSGPACK_TOKENS, 40);
        default -> ByteMutations.randomBytes(random, 256);
    };
    static final PropertyRunner.Generator<Long> SHAPE_SEEDS = RandomGenerator::nextLong;

    /** An integer and the format it is written in (see {@link #encodeInteger}). */
    record WidthCase(long value, int width) {
    }

    /** Every width 0..10, each with a value of any magnitude (see {@link #interestingLong}). */
    static final PropertyRunner.Generator<WidthCase> WIDTH_CASES =
        random -> new WidthCase(interestingLong(random), random.nextInt(11));

    /** The values at the format's width boundaries, which a uniform long would essentially never be. */
    static final long[] BOUNDARY_LONGS = {0, 1, -1, 31, 32, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768,
        -32768, -32769, 65535, 65536, Integer.MAX_VALUE, Integer.MIN_VALUE, 0xffff_ffffL, 0x1_0000_0000L,
        Long.MAX_VALUE, Long.MIN_VALUE};

    /**
     * A long of a random magnitude (a uniform long would nearly always need the widest format, and the packer's
     * smallest-encoding widths 9 and 10 would never pick a narrow one), and one in eight a boundary value.
     */
    static long interestingLong(RandomGenerator random) {
        if (random.nextInt(8) == 0) {
            return BOUNDARY_LONGS[random.nextInt(BOUNDARY_LONGS.length)];
        }
        return random.nextLong() >> random.nextInt(64);
    }

    @Test
    void corpusSkipsExactlyAsMsgpackCore() {
        for (FuzzCorpus.Entry e : FuzzCorpus.load("/fuzz/kvevents.corpus")) {
            assertSkipAgrees(e.bytes());
        }
    }

    @Test
    void mutantsSkipExactlyAsMsgpackCore() {
        PropertyRunner.check("mutantsSkipExactlyAsMsgpackCore", 4301, 400, MUTANTS,
            MsgpackReaderFuzzTest::assertSkipAgrees);
    }

    @Test
    void validValuesSkipWhole() {
        PropertyRunner.check("validValuesSkipWhole", 4302, 200, SHAPE_SEEDS, MsgpackReaderFuzzTest::assertSkippedWhole);
    }

    static void assertSkippedWhole(long shapeSeed) throws IOException {
        byte[] value = randomValue(new Random(shapeSeed));
        assertSkipAgrees(value);
        MsgpackReader r = new MsgpackReader();
        r.wrap(value, 0, value.length);
        r.skipValue();
        assertEquals(0, r.remaining(), "a valid value is skipped whole");
    }

    @Test
    void everyIntegerWidthReadsAsMsgpackCore() {
        PropertyRunner.check("everyIntegerWidthReadsAsMsgpackCore", 4303, 300, WIDTH_CASES,
            c -> assertReadsAsMsgpackCore(c.value(), c.width()));
    }

    static void assertReadsAsMsgpackCore(long value, int width) throws IOException {
        byte[] encoded = encodeInteger(value, width);
        MsgpackReader r = new MsgpackReader();
        r.wrap(encoded, 0, encoded.length);
        long ours = r.readLong();
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(encoded)) {
            BigInteger reference = u.unpackBigInteger();
            assertEquals(reference.longValue(), ours, () -> "width " + width + " " + hex(encoded));
        }
        assertEquals(0, r.remaining());
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzMutantsSkipExactlyAsMsgpackCore() {
        PropertyRunner.fuzz("fuzzMutantsSkipExactlyAsMsgpackCore", MUTANTS, MsgpackReaderFuzzTest::assertSkipAgrees);
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzValidValuesSkipWhole() {
        PropertyRunner.fuzz("fuzzValidValuesSkipWhole", SHAPE_SEEDS, MsgpackReaderFuzzTest::assertSkippedWhole);
    }

    /** Our skip and the msgpack-core reference agree on accept/reject and on the bytes consumed. */
    static void assertSkipAgrees(byte[] input) {
        long reference = referenceSkip(input);
        MsgpackReader r = new MsgpackReader();
        r.wrap(input, 0, input.length);
        long ours;
        try {
            r.skipValue();
            ours = r.position();
        } catch (MsgpackFormatException e) {
            ours = -1;
        }
        assertEquals(reference, ours, () -> "msgpack-core consumed " + reference + " bytes, MsgpackReader "
            + "(-1 = rejected: " + r.errorReason() + ") of " + hex(input));
    }

    /**
     * Bytes one value takes per msgpack-core, or -1 if it cannot read one. Containers are walked here with a long
     * count and everything else is left to msgpack-core: its own {@code skipValue} keeps the count of pending values
     * in an int, so an array32 or map32 header claiming ~2^31 elements wraps it negative and it "skips" a value it
     * never read (e.g. {@code 8f dd 7f ff ff ff} is accepted as 6 bytes) — a msgpack-core quirk, not a reference.
     */
    static long referenceSkip(byte[] input) {
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(input)) {
            long pending = 1;
            while (pending > 0) {
                pending--;
                switch (u.getNextFormat().getValueType()) {
                    case ARRAY -> pending += u.unpackArrayHeader();
                    case MAP -> pending += 2L * u.unpackMapHeader();
                    default -> u.skipValue();
                }
            }
            return u.getTotalReadBytes();
        } catch (IOException | MessagePackException e) {
            return -1;
        }
    }

    /** A random valid msgpack value, every type, nesting up to depth 6, a few hundred bytes at most. */
    static byte[] randomValue(Random rnd) throws IOException {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            writeValue(p, rnd, 0);
            return p.toByteArray();
        }
    }

    private static void writeValue(MessageBufferPacker p, Random rnd, int depth) throws IOException {
        int kind = rnd.nextInt(depth >= 6 ? 8 : 10);
        switch (kind) {
            case 0 -> p.packNil();
            case 1 -> p.packBoolean(rnd.nextBoolean());
            case 2 -> p.packLong(rnd.nextLong() >> rnd.nextInt(64));
            case 3 -> p.packBigInteger(new BigInteger(Long.toUnsignedString(rnd.nextLong() >>> rnd.nextInt(64))));
            case 4 -> p.packDouble(rnd.nextDouble());
            case 5 -> p.packFloat(rnd.nextFloat());
            case 6 -> p.packString("s".repeat(rnd.nextInt(rnd.nextBoolean() ? 40 : 300)));
            case 7 -> {
                byte[] b = new byte[rnd.nextInt(300)];
                if (rnd.nextBoolean()) {
                    p.packBinaryHeader(b.length).writePayload(b);
                } else {
                    p.packExtensionTypeHeader((byte) rnd.nextInt(128), b.length).writePayload(b);
                }
            }
            case 8 -> {
                int n = rnd.nextInt(rnd.nextInt(10) == 0 ? 20 : 5);
                p.packArrayHeader(n);
                for (int i = 0; i < n; i++) {
                    writeValue(p, rnd, depth + 1);
                }
            }
            default -> {
                int n = rnd.nextInt(rnd.nextInt(10) == 0 ? 20 : 4);
                p.packMapHeader(n);
                for (int i = 0; i < 2 * n; i++) {
                    writeValue(p, rnd, depth + 1);
                }
            }
        }
    }

    /**
     * {@code value} in format {@code width}: 0 fixint/negative fixint, 1..4 uint8..uint64, 5..8 int8..int64, 9..10
     * the smallest encodings msgpack-core's packer picks (signed and unsigned views). Bits that do not fit a narrow
     * width are dropped, so every width is exercised with every kind of value.
     */
    static byte[] encodeInteger(long value, int width) throws IOException {
        return switch (width) {
            case 0 -> new byte[] {(byte) (value < 0 ? 0xe0 | (value & 0x1f) : value & 0x7f)};
            case 1 -> new byte[] {(byte) 0xcc, (byte) value};
            case 2 -> bigEndian(0xcd, value, 2);
            case 3 -> bigEndian(0xce, value, 4);
            case 4 -> bigEndian(0xcf, value, 8);
            case 5 -> new byte[] {(byte) 0xd0, (byte) value};
            case 6 -> bigEndian(0xd1, value, 2);
            case 7 -> bigEndian(0xd2, value, 4);
            case 8 -> bigEndian(0xd3, value, 8);
            case 9 -> packed(p -> p.packLong(value));
            default -> packed(p -> p.packBigInteger(new BigInteger(Long.toUnsignedString(value))));
        };
    }

    private interface Packing {
        void write(MessageBufferPacker p) throws IOException;
    }

    private static byte[] packed(Packing w) throws IOException {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            w.write(p);
            return p.toByteArray();
        }
    }

    private static byte[] bigEndian(int format, long value, int bytes) {
        byte[] b = new byte[1 + bytes];
        b[0] = (byte) format;
        for (int i = 0; i < bytes; i++) {
            b[bytes - i] = (byte) (value >>> (8 * i));
        }
        return b;
    }

    static String hex(byte[] b) {
        return java.util.HexFormat.of().formatHex(b);
    }
}
