package io.kvgate.ingest.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.PropertyRunner;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 fuzzing: {@link KvEventDecoder} on mutants of real vLLM/SGLang batches (the fixture frames and the
 * hostile corpus in {@code fuzz/kvevents.corpus}). Its contract on any bytes: it returns a count or
 * {@link KvEventDecoder#MALFORMED}; nothing escapes and nothing inside it throws (its catch-all would count a
 * decoder bug as a "handler error", so a handler that never throws must see zero); every event it delivers is
 * within the per-event limits; it accepts a frame only if msgpack-core reads the frame's first value as valid; and
 * it reads only its region of the buffer (the same frame between hostile bytes decodes to the same events).
 */
class KvEventDecoderFuzzTest {
    static final int MAX_BLOCKS = 64;
    static final int MAX_TOKEN_INTS = 256;
    /** An array32 header claiming 2^31-1 elements: what a read past the region would run into. */
    static final byte[] HOSTILE_PAD = {(byte) 0xdd, 0x7f, -1, -1, -1, (byte) 0xc1};
    static final List<byte[]> EVENT_TOKENS;

    static {
        List<byte[]> t = new ArrayList<>(MsgpackReaderFuzzTest.MSGPACK_TOKENS);
        for (String s : List.of("BlockStored", "BlockRemoved", "AllBlocksCleared", "type", "block_hashes",
            "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "group_idx", "GPU", "CPU")) {
            byte[] b = new byte[s.length() + 1];
            b[0] = (byte) (0xa0 | s.length());
            System.arraycopy(s.getBytes(java.nio.charset.StandardCharsets.US_ASCII), 0, b, 1, s.length());
            t.add(b);
        }
        EVENT_TOKENS = List.copyOf(t);
    }

    static final List<byte[]> SEEDS = MsgpackReaderFuzzTest.seeds();
    /** Half mutants of the fixtures and corpus, half soups of msgpack headers and event strings. */
    static final PropertyRunner.Generator<byte[]> MUTANTS = random -> random.nextBoolean()
        ? ByteMutations.mutant(random, SEEDS, EVENT_TOKENS, 6, MsgpackReaderFuzzTest.MAX_INPUT_BYTES)
        : ByteMutations.tokenSoup(random, EVENT_TOKENS, 40);
    /** A frame and how many hostile bytes precede it in its buffer (0..16). */
    static final PropertyRunner.Generator<PaddedFrame> PADDED_MUTANTS =
        random -> new PaddedFrame(MUTANTS.next(random), random.nextInt(17));

    record PaddedFrame(byte[] frame, int pad) {
    }

    @Test
    void corpusAndFixturesDecodeWithinContract() {
        for (byte[] frame : MsgpackReaderFuzzTest.seeds()) {
            assertWithinContract(frame);
            assertReadsOnlyItsRegion(frame, 7);
        }
    }

    @Test
    void mutantsDecodeWithinContract() {
        PropertyRunner.check("mutantsDecodeWithinContract", 4311, 500, MUTANTS,
            KvEventDecoderFuzzTest::assertWithinContract);
    }

    @Test
    void aFrameIsReadInsideItsRegionOnly() {
        PropertyRunner.check("aFrameIsReadInsideItsRegionOnly", 4312, 200, PADDED_MUTANTS,
            p -> assertReadsOnlyItsRegion(p.frame(), p.pad()));
    }

    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzMutantsDecodeWithinContract() {
        PropertyRunner.fuzz("fuzzMutantsDecodeWithinContract", PADDED_MUTANTS, p -> {
            assertWithinContract(p.frame());
            assertReadsOnlyItsRegion(p.frame(), p.pad());
        });
    }

    static void assertWithinContract(byte[] frame) {
        CheckingHandler h = new CheckingHandler();
        KvEventDecoder d = new KvEventDecoder(h, MAX_BLOCKS, MAX_TOKEN_INTS);
        int r = d.decode(frame, 0, frame.length);
        assertEquals(0, d.handlerErrors(), () -> "the decoder threw inside (" + d.lastError() + ") on "
            + MsgpackReaderFuzzTest.hex(frame));
        assertTrue(r == KvEventDecoder.MALFORMED || (r >= 0 && r <= frame.length), "result " + r);
        assertTrue(h.callbacks >= Math.max(r, 0), "returned " + r + " events but delivered " + h.callbacks);
        if (r >= 0) {
            assertTrue(msgpackCoreReadsOneValue(frame), () -> "accepted a frame msgpack-core rejects: "
                + MsgpackReaderFuzzTest.hex(frame));
        }
    }

    static void assertReadsOnlyItsRegion(byte[] frame, int pad) {
        RecordingHandler tight = new RecordingHandler();
        int expected = new KvEventDecoder(tight, MAX_BLOCKS, MAX_TOKEN_INTS).decode(frame, 0, frame.length);
        byte[] padded = new byte[pad + frame.length + HOSTILE_PAD.length * 4];
        for (int i = 0; i < padded.length; i++) {
            padded[i] = HOSTILE_PAD[i % HOSTILE_PAD.length];
        }
        System.arraycopy(frame, 0, padded, pad, frame.length);
        RecordingHandler inside = new RecordingHandler();
        int got = new KvEventDecoder(inside, MAX_BLOCKS, MAX_TOKEN_INTS).decode(padded, pad, frame.length);
        assertEquals(expected, got, () -> "the bytes around the frame changed its result: "
            + MsgpackReaderFuzzTest.hex(frame));
        assertEquals(tight.events, inside.events);
    }

    static boolean msgpackCoreReadsOneValue(byte[] frame) {
        return MsgpackReaderFuzzTest.referenceSkip(frame) >= 0;
    }

    /** Checks each event inside its callback (the flyweights are only valid there); never throws a RuntimeException. */
    static final class CheckingHandler implements KvEventHandler {
        int callbacks;

        @Override
        public void onBlockStored(BlockStoredEvent e) {
            callbacks++;
            check(e.blockCount() >= 1 && e.blockCount() <= MAX_BLOCKS, "stored block count " + e.blockCount());
            check(e.tokenInts() >= 0 && e.tokenInts() <= MAX_TOKEN_INTS, "stored token ints " + e.tokenInts());
            check(e.intsPerCell() == 1 || e.intsPerCell() == 2, "ints per cell " + e.intsPerCell());
            check(e.tokenCells() * e.intsPerCell() == e.tokenInts(), "cells " + e.tokenCells() + " x "
                + e.intsPerCell() + " != ints " + e.tokenInts());
            check(Medium.name(e.medium()) != null, "medium " + e.medium());
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
            callbacks++;
            check(e.blockCount() >= 1 && e.blockCount() <= MAX_BLOCKS, "removed block count " + e.blockCount());
            check(Arrays.stream(e.blockKeys()).count() >= e.blockCount(), "keys array shorter than count");
        }

        @Override
        public void onAllBlocksCleared() {
            callbacks++;
        }

        private static void check(boolean ok, String what) {
            if (!ok) {
                throw new AssertionError(what); // an Error: the decoder's catch-all must not swallow it
            }
        }
    }
}
