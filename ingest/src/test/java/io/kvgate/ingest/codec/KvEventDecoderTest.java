package io.kvgate.ingest.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

class KvEventDecoderTest {

    private final RecordingHandler rec = new RecordingHandler();
    private final KvEventDecoder decoder = new KvEventDecoder(rec, 64, 256);

    private List<String> decode(byte[] frame) {
        rec.events.clear();
        int n = decoder.decode(frame, 0, frame.length);
        assertTrue(n >= 0, () -> "malformed: " + decoder.lastError());
        assertEquals(rec.events.size(), n);
        return List.copyOf(rec.events);
    }

    interface Body {
        void write(MessageBufferPacker p) throws IOException;
    }

    static byte[] pack(Body b) throws IOException {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            b.write(p);
            return p.toByteArray();
        }
    }

    static void str(MessageBufferPacker p, String s) throws IOException {
        p.packString(s);
    }

    static void longs(MessageBufferPacker p, long... v) throws IOException {
        p.packArrayHeader(v.length);
        for (long x : v) {
            p.packLong(x);
        }
    }

    static void ints(MessageBufferPacker p, int from, int count) throws IOException {
        p.packArrayHeader(count);
        for (int i = 0; i < count; i++) {
            p.packInt(from + i);
        }
    }

    static String range(int from, int count) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < count; i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(from + i);
        }
        return sb.toString();
    }

    @Test
    void arrayFormThreeElementBatch() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(3).packDouble(1.25).packArrayHeader(3);
            p.packArrayHeader(7);
            str(p, "BlockStored");
            longs(p, 10, 11);
            p.packNil();
            ints(p, 1, 8);
            p.packInt(4).packNil();
            str(p, "GPU");
            p.packArrayHeader(3);
            str(p, "BlockRemoved");
            longs(p, 11);
            str(p, "GPU");
            p.packArrayHeader(1);
            str(p, "AllBlocksCleared");
            p.packInt(2);
        });
        assertEquals(List.of(
            "S keys=[10,11] parent=- tokens=[" + range(1, 8) + "] ipc=1 bs=4 lora=- medium=GPU group=-1",
            "R keys=[11] medium=GPU group=-1",
            "C"), decode(f));
        assertEquals(2, decoder.lastDpRank());
        assertEquals(1.25, decoder.lastTimestamp());
    }

    @Test
    void twoElementBatchAndMinimalFields() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(2).packFloat(2.5f).packArrayHeader(2);
            p.packArrayHeader(5);
            str(p, "BlockStored");
            longs(p, 5);
            p.packLong(4);
            ints(p, 0, 2);
            p.packInt(2);
            p.packArrayHeader(2);
            str(p, "BlockRemoved");
            longs(p, 5);
        });
        assertEquals(List.of(
            "S keys=[5] parent=4 tokens=[0,1] ipc=1 bs=2 lora=- medium=none group=-1",
            "R keys=[5] medium=none group=-1"), decode(f));
        assertEquals(-1, decoder.lastDpRank());
    }

    @Test
    void everyIntegerWidthGivesTheSame64BitPattern() throws IOException {
        // Raw formats written by hand: msgpack-core always picks the shortest, engines need not.
        byte[][] encodings = {
            {0x05}, {(byte) 0xcc, 0x05}, {(byte) 0xcd, 0, 0x05}, {(byte) 0xce, 0, 0, 0, 0x05},
            {(byte) 0xcf, 0, 0, 0, 0, 0, 0, 0, 0x05}, {(byte) 0xd0, 0x05}, {(byte) 0xd1, 0, 0x05},
            {(byte) 0xd2, 0, 0, 0, 0x05}, {(byte) 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x05},
        };
        for (byte[] enc : encodings) {
            byte[] f = pack(p -> {
                p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
                str(p, "BlockRemoved");
                p.packArrayHeader(1);
                p.writePayload(enc);
            });
            assertEquals(List.of("R keys=[5] medium=none group=-1"), decode(f), HexFormat.of().formatHex(enc));
        }
        byte[][] minusOne = {
            {(byte) 0xff}, {(byte) 0xd0, (byte) 0xff}, {(byte) 0xd1, (byte) 0xff, (byte) 0xff},
            {(byte) 0xd2, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff},
            {(byte) 0xd3, -1, -1, -1, -1, -1, -1, -1, -1}, {(byte) 0xcf, -1, -1, -1, -1, -1, -1, -1, -1},
        };
        for (byte[] enc : minusOne) {
            byte[] f = pack(p -> {
                p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
                str(p, "BlockRemoved");
                p.packArrayHeader(1);
                p.writePayload(enc);
            });
            assertEquals(List.of("R keys=[18446744073709551615] medium=none group=-1"), decode(f),
                HexFormat.of().formatHex(enc));
        }
    }

    @Test
    void uint64AboveSignedRangeAndNegativeInt64ShareTheBitPattern() throws IOException {
        BigInteger big = BigInteger.ONE.shiftLeft(64).subtract(BigInteger.valueOf(5)); // 2^64-5 as uint64
        byte[] a = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
            str(p, "BlockRemoved");
            p.packArrayHeader(1).packBigInteger(big);
        });
        byte[] b = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
            str(p, "BlockRemoved");
            longs(p, -5);
        });
        assertEquals((byte) 0xcf, a[a.length - 9]);
        assertEquals(decode(a), decode(b));
        assertEquals(List.of("R keys=[" + big + "] medium=none group=-1"), decode(b));
    }

    @Test
    void binHashesFoldTheirLast8BytesBigEndian() throws IOException {
        byte[] digest = new byte[32];
        for (int i = 0; i < 32; i++) {
            digest[i] = (byte) (i + 1);
        }
        byte[] f = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(5);
            str(p, "BlockStored");
            p.packArrayHeader(2).packBinaryHeader(32).writePayload(digest);
            p.packBinaryHeader(3).writePayload(new byte[] {1, 2, 3});
            p.packBinaryHeader(16).writePayload(digest, 0, 16);
            ints(p, 0, 2);
            p.packInt(1);
        });
        long last8 = 0x191A1B1C1D1E1F20L;
        assertEquals(List.of("S keys=[" + Long.toUnsignedString(last8) + ",66051] parent="
            + Long.toUnsignedString(0x090A0B0C0D0E0F10L) + " tokens=[0,1] ipc=1 bs=1 lora=- medium=none group=-1"),
            decode(f));
    }

    @Test
    void bigramTokenCellsKeepBothElements() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(3).packDouble(0).packArrayHeader(1).packArrayHeader(7);
            str(p, "BlockStored");
            longs(p, -9);
            p.packNil();
            p.packArrayHeader(2);
            p.packArrayHeader(2).packInt(100).packInt(200);
            p.packArrayHeader(2).packInt(200).packInt(300);
            p.packInt(2).packNil();
            str(p, "GPU");
            p.packNil();
        });
        assertEquals(List.of("S keys=[18446744073709551607] parent=- tokens=[100,200,200,300] ipc=2 bs=2 lora=- "
            + "medium=GPU group=-1"), decode(f));
    }

    /**
     * TensorRT-LLM's streaming publisher (PR #17023): a positional batch {@code [ts, events, data_parallel_rank]} of
     * map events in the order the native {@code packStoredEvent} writes them (map of 8: type, block_hashes,
     * parent_block_hash, token_ids, block_size, lora_id, medium, lora_name), signed 64-bit radix keys, a nil parent
     * for a chain's first block, BlockRemoved as {@code {type, block_hashes, medium}}.
     */
    @Test
    void trtllmStreamingBatchDecodes() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(3).packDouble(1.7e9).packArrayHeader(3);
            p.packMapHeader(8);
            str(p, "type");
            str(p, "BlockStored");
            str(p, "block_hashes");
            longs(p, 7626725223439765602L, -2732255166055541250L);
            str(p, "parent_block_hash");
            p.packNil();
            str(p, "token_ids");
            ints(p, 1, 64);
            str(p, "block_size");
            p.packInt(32);
            str(p, "lora_id");
            p.packNil();
            str(p, "medium");
            str(p, "GPU");
            str(p, "lora_name");
            p.packNil();
            p.packMapHeader(8);
            str(p, "type");
            str(p, "BlockStored");
            str(p, "block_hashes");
            longs(p, 5L);
            str(p, "parent_block_hash");
            p.packLong(-2732255166055541250L);
            str(p, "token_ids");
            ints(p, 65, 32);
            str(p, "block_size");
            p.packInt(32);
            str(p, "lora_id");
            p.packNil();
            str(p, "medium");
            str(p, "GPU");
            str(p, "lora_name");
            p.packNil();
            p.packMapHeader(3);
            str(p, "type");
            str(p, "BlockRemoved");
            str(p, "block_hashes");
            longs(p, 5L, -2732255166055541250L);
            str(p, "medium");
            str(p, "GPU");
            p.packInt(1);
        });
        // The recorder prints the 64-bit pattern unsigned: the same bits as the signed key the engine sent.
        String second = Long.toUnsignedString(-2732255166055541250L);
        assertEquals(List.of(
            "S keys=[7626725223439765602," + second + "] parent=- tokens=[" + range(1, 64) + "] ipc=1 bs=32 lora=-"
                + " medium=GPU group=-1",
            "S keys=[5] parent=" + second + " tokens=[" + range(65, 32) + "] ipc=1 bs=32 lora=- medium=GPU group=-1",
            "R keys=[5," + second + "] medium=GPU group=-1"), decode(f));
    }

    @Test
    void mapFormByNameWithTypeAnywhereAndUnknownKeys() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(3).packDouble(0).packArrayHeader(3);
            p.packMapHeader(7);
            str(p, "token_ids");
            ints(p, 3, 4);
            str(p, "unknown_future");
            p.packMapHeader(1);
            str(p, "nested");
            p.packArrayHeader(2).packInt(1).packString("x");
            str(p, "block_size");
            p.packInt(2);
            str(p, "block_hashes");
            longs(p, 1, 2);
            str(p, "type");
            str(p, "BlockStored");
            str(p, "medium");
            str(p, "DISK");
            str(p, "group_idx");
            p.packInt(3);
            p.packMapHeader(2);
            str(p, "block_hashes");
            longs(p, 2);
            str(p, "type");
            str(p, "BlockRemoved");
            p.packMapHeader(1);
            str(p, "type");
            str(p, "AllBlocksCleared");
            p.packNil();
        });
        assertEquals(List.of(
            "S keys=[1,2] parent=- tokens=[3,4,5,6] ipc=1 bs=2 lora=- medium=DISK group=3",
            "R keys=[2] medium=none group=-1", "C"), decode(f));
    }

    /**
     * vLLM's hybrid-model events (kv_events.py BlockStored: ..., medium, lora_name, extra_keys, group_idx,
     * kv_cache_spec_kind, kv_cache_spec_sliding_window; BlockRemoved: block_hashes, medium, group_idx), positional
     * and by name: the group and its kind reach the handler.
     */
    @Test
    void hybridGroupIndexAndSpecKindPositionalAndByName() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(3).packDouble(0).packArrayHeader(4);
            p.packArrayHeader(12);
            str(p, "BlockStored");
            longs(p, 7);
            p.packNil();
            ints(p, 1, 2);
            p.packInt(2).packNil();
            str(p, "GPU");
            p.packNil().packNil();
            p.packInt(1);
            str(p, "sliding_window");
            p.packInt(4096);
            p.packArrayHeader(4);
            str(p, "BlockRemoved");
            longs(p, 7);
            str(p, "GPU");
            p.packInt(1);
            p.packMapHeader(7);
            str(p, "type");
            str(p, "BlockStored");
            str(p, "block_hashes");
            longs(p, 8);
            str(p, "token_ids");
            ints(p, 3, 2);
            str(p, "block_size");
            p.packInt(2);
            str(p, "group_idx");
            p.packInt(0);
            str(p, "kv_cache_spec_kind");
            str(p, "full_attention");
            str(p, "kv_cache_spec_sliding_window");
            p.packNil();
            p.packMapHeader(5);
            str(p, "type");
            str(p, "BlockStored");
            str(p, "block_hashes");
            longs(p, 9);
            str(p, "token_ids");
            ints(p, 5, 2);
            str(p, "block_size");
            p.packInt(2);
            str(p, "kv_cache_spec_kind");
            str(p, "some_future_kind");
            p.packNil();
        });
        assertEquals(List.of(
            "S keys=[7] parent=- tokens=[1,2] ipc=1 bs=2 lora=- medium=GPU group=1 kind=sliding_window",
            "R keys=[7] medium=GPU group=1",
            "S keys=[8] parent=- tokens=[3,4] ipc=1 bs=2 lora=- medium=none group=0 kind=full_attention",
            "S keys=[9] parent=- tokens=[5,6] ipc=1 bs=2 lora=- medium=none group=-1 kind=other"), decode(f));
    }

    @Test
    void unknownTagsTrailingFieldsAndCacheSaltAreSkipped() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(4).packDouble(0).packArrayHeader(4);
            p.packArrayHeader(3);
            str(p, "BlockTransferred");
            longs(p, 1);
            p.packMapHeader(1).packString("a").packInt(1);
            p.packMapHeader(2);
            str(p, "type");
            str(p, "Unknown");
            str(p, "block_hashes");
            longs(p, 1);
            // BlockStored with SGLang metadata map after medium, then 10 more unknown trailing fields
            p.packArrayHeader(8 + 10);
            str(p, "BlockStored");
            longs(p, 77);
            p.packNil();
            ints(p, 1, 2);
            p.packInt(2).packNil();
            str(p, "GPU");
            p.packMapHeader(1);
            str(p, "cache_salt");
            str(p, "tenant-a");
            for (int i = 0; i < 10; i++) {
                p.packArrayHeader(1).packString("future" + i);
            }
            p.packArrayHeader(5);
            str(p, "BlockRemoved");
            longs(p, 77);
            str(p, "CPU");
            p.packInt(1);
            p.packExtensionTypeHeader((byte) 1, 4).writePayload(new byte[4]);
            p.packInt(0);
            p.packString("trailing batch element");
        });
        assertEquals(List.of(
            "S keys=[77] parent=- tokens=[1,2] ipc=1 bs=2 lora=- medium=GPU group=-1",
            "R keys=[77] medium=CPU group=1"), decode(f));
        assertEquals(2, decoder.unknownEvents());
        assertEquals(0, decoder.lastDpRank());
    }

    @Test
    void pythonEncodedFixturesDecodeToTheirExpectedEvents() throws IOException {
        List<String[]> cases = fixtures();
        assertEquals(8, cases.size());
        for (String[] c : cases) {
            byte[] f = HexFormat.of().parseHex(c[1]);
            KvEventDecoder big = new KvEventDecoder(rec);
            rec.events.clear();
            int n = big.decode(f, 0, f.length);
            assertTrue(n >= 0, c[0] + ": " + big.lastError());
            assertEquals(List.of(c[2].split(";")), rec.events, c[0]);
        }
    }

    static List<String[]> fixtures() throws IOException {
        List<String[]> out = new ArrayList<>();
        try (InputStream in = KvEventDecoderTest.class.getResourceAsStream("/kvevents/kv_event_frames.txt")) {
            String text = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
            for (String line : text.split("\n")) {
                if (!line.isBlank()) {
                    out.add(line.split("\\|", 3));
                }
            }
        }
        return out;
    }

    /** Three events, one per kind, in vLLM's current map form; written once and wrapped in either batch shape. */
    private static void threeMapEvents(MessageBufferPacker p) throws IOException {
        p.packArrayHeader(3);
        p.packMapHeader(5);
        str(p, "type");
        str(p, "BlockStored");
        str(p, "block_hashes");
        longs(p, 7, 8);
        str(p, "parent_block_hash");
        p.packLong(6);
        str(p, "token_ids");
        ints(p, 20, 4);
        str(p, "block_size");
        p.packInt(2);
        p.packMapHeader(2);
        str(p, "type");
        str(p, "BlockRemoved");
        str(p, "block_hashes");
        longs(p, 8);
        p.packMapHeader(1);
        str(p, "type");
        str(p, "AllBlocksCleared");
    }

    private static final List<String> THREE_EVENTS = List.of(
        "S keys=[7,8] parent=6 tokens=[20,21,22,23] ipc=1 bs=2 lora=- medium=none group=-1",
        "R keys=[8] medium=none group=-1", "C");

    /**
     * vLLM's {@code EventBatch} at commit 0181ea31 ({@code vllm/distributed/kv_events.py}) is a msgspec Struct
     * without {@code array_like=True}: the batch is then the map {@code {ts, events, data_parallel_rank}}, the rank
     * omitted while None ({@code omit_defaults=True}). Released engines (<= 0.29) still send the array. Both shapes
     * of the same events decode to the same deliveries, rank and timestamp, alternating on one decoder.
     */
    @Test
    void mapShapedBatchDecodesLikeTheArrayBatch() throws IOException {
        byte[] array = pack(p -> {
            p.packArrayHeader(3).packDouble(3.5);
            threeMapEvents(p);
            p.packInt(1);
        });
        byte[] map = pack(p -> {
            p.packMapHeader(3);
            str(p, "ts");
            p.packDouble(3.5);
            str(p, "events");
            threeMapEvents(p);
            str(p, "data_parallel_rank");
            p.packInt(1);
        });
        for (byte[] f : List.of(array, map, array, map)) {
            assertEquals(THREE_EVENTS, decode(f));
            assertEquals(1, decoder.lastDpRank());
            assertEquals(3.5, decoder.lastTimestamp());
        }
        assertEquals(0, decoder.malformedFrames());
    }

    @Test
    void mapShapedBatchToleratesOmittedRankKeyOrderAndUnknownKeys() throws IOException {
        byte[] noRank = pack(p -> {
            p.packMapHeader(2);
            str(p, "ts");
            p.packDouble(1.0);
            str(p, "events");
            threeMapEvents(p);
        });
        assertEquals(THREE_EVENTS, decode(noRank));
        assertEquals(-1, decoder.lastDpRank());
        byte[] reordered = pack(p -> {
            p.packMapHeader(5);
            str(p, "data_parallel_rank");
            p.packInt(4);
            str(p, "future_field");
            p.packMapHeader(1);
            str(p, "x");
            p.packArrayHeader(1).packInt(9);
            p.packInt(17); // a non-string key is skipped with its value
            p.packString("ignored");
            str(p, "events");
            threeMapEvents(p);
            str(p, "ts");
            p.packInt(12);
        });
        assertEquals(THREE_EVENTS, decode(reordered));
        assertEquals(4, decoder.lastDpRank());
        assertEquals(12.0, decoder.lastTimestamp());
    }

    @Test
    void mapShapedBatchWithoutEventsOrCutShortIsMalformed() throws IOException {
        byte[] noEvents = pack(p -> {
            p.packMapHeader(2);
            str(p, "ts");
            p.packDouble(1.0);
            str(p, "data_parallel_rank");
            p.packInt(0);
        });
        KvEventDecoder d = new KvEventDecoder(rec);
        assertEquals(KvEventDecoder.MALFORMED, d.decode(noEvents, 0, noEvents.length));
        assertTrue(d.lastError().contains("no events"), d.lastError());
        byte[] map = pack(p -> {
            p.packMapHeader(3);
            str(p, "ts");
            p.packDouble(3.5);
            str(p, "events");
            threeMapEvents(p);
            str(p, "data_parallel_rank");
            p.packInt(1);
        });
        for (int len = 0; len < map.length; len++) {
            assertEquals(KvEventDecoder.MALFORMED, d.decode(map, 0, len), "cut at " + len);
        }
        assertEquals(3, d.decode(map, 0, map.length));
    }

    @Test
    void everyTruncationIsMalformedNeverThrown() throws IOException {
        for (String[] c : fixtures()) {
            byte[] f = HexFormat.of().parseHex(c[1]);
            KvEventDecoder d = new KvEventDecoder(rec);
            for (int len = 0; len < f.length; len++) {
                assertEquals(KvEventDecoder.MALFORMED, d.decode(f, 0, len), c[0] + " cut at " + len);
            }
            // the frame at an offset inside a bigger buffer decodes the same
            byte[] shifted = new byte[f.length + 10];
            System.arraycopy(f, 0, shifted, 5, f.length);
            assertTrue(d.decode(shifted, 5, f.length) >= 0);
            assertEquals(f.length + 1L, d.frames());
            assertEquals(f.length, d.malformedFrames());
        }
    }

    @Test
    void fuzzedFramesNeverThrow() throws IOException {
        Random rnd = new Random(42);
        List<byte[]> seeds = new ArrayList<>();
        for (String[] c : fixtures()) {
            seeds.add(HexFormat.of().parseHex(c[1]));
        }
        KvEventDecoder d = new KvEventDecoder(new RecordingHandler(), 64, 256);
        for (int i = 0; i < 50_000; i++) {
            byte[] f;
            if (i % 5 == 0) {
                f = new byte[rnd.nextInt(64)];
                rnd.nextBytes(f);
            } else {
                f = seeds.get(rnd.nextInt(seeds.size())).clone();
                int flips = 1 + rnd.nextInt(4);
                for (int k = 0; k < flips; k++) {
                    f[rnd.nextInt(f.length)] = (byte) rnd.nextInt(256);
                }
            }
            int r = d.decode(f, 0, f.length); // must return, whatever the bytes
            assertTrue(r >= KvEventDecoder.MALFORMED);
        }
        assertTrue(d.malformedFrames() > 10_000, "most fuzzed frames are malformed: " + d.malformedFrames());
    }

    @Test
    void hostileLengthsAndOversizeEventsAreCounted() throws IOException {
        // array32 header claiming 2^31-1 elements in a 10-byte frame
        byte[] lie = {(byte) 0x92, (byte) 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xdd, 0x7f, -1, -1, -1};
        assertEquals(KvEventDecoder.MALFORMED, decoder.decode(lie, 0, lie.length));
        byte[] tooMany = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
            str(p, "BlockRemoved");
            p.packArrayHeader(65);
            for (int i = 0; i < 65; i++) {
                p.packInt(i);
            }
        });
        // A removal beyond the buffer is delivered in chunks (dropping it would leave phantom blocks).
        rec.events.clear();
        assertEquals(1, decoder.decode(tooMany, 0, tooMany.length));
        assertEquals(1, decoder.oversizeEvents());
        assertEquals(2, rec.events.size());
        assertTrue(rec.events.get(0).startsWith("R keys=[0,1,2,"), rec.events.get(0));
        assertEquals("R keys=[64] medium=none group=-1", rec.events.get(1));
        byte[] deep = new byte[4000];
        java.util.Arrays.fill(deep, (byte) 0x91); // 4000 nested 1-element arrays
        byte[] framed = new byte[deep.length + 12];
        framed[0] = (byte) 0x92;
        framed[1] = (byte) 0xcb;
        framed[10] = (byte) 0x91;
        framed[11] = (byte) 0x91; // events[0] = [ [ [ ... (skipped as unknown-tag array)
        System.arraycopy(deep, 0, framed, 12, deep.length);
        assertEquals(KvEventDecoder.MALFORMED, decoder.decode(framed, 0, framed.length));
    }

    @Test
    void oversizeStoredEventsAreDroppedByReasonAndTheRestOfTheBatchApplies() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(4);
            // 65 hashes > maxBlocksPerEvent 64
            p.packArrayHeader(5);
            str(p, "BlockStored");
            p.packArrayHeader(65);
            for (int i = 0; i < 65; i++) {
                p.packInt(i);
            }
            p.packNil();
            p.packArrayHeader(65);
            for (int i = 0; i < 65; i++) {
                p.packInt(i);
            }
            p.packInt(1);
            // 257 token ints > maxTokenIntsPerEvent 256, in bigram cells
            p.packArrayHeader(5);
            str(p, "BlockStored");
            longs(p, 7);
            p.packNil();
            p.packArrayHeader(129);
            for (int i = 0; i < 129; i++) {
                p.packArrayHeader(2).packInt(i).packInt(i + 1);
            }
            p.packInt(129);
            p.packArrayHeader(2);
            str(p, "BlockRemoved");
            longs(p, 3);
            p.packArrayHeader(1);
            str(p, "AllBlocksCleared");
        });
        rec.events.clear();
        assertEquals(2, decoder.decode(f, 0, f.length), "the two oversize events are dropped, the rest delivered");
        assertEquals(List.of("R keys=[3] medium=none group=-1", "C"), rec.events);
        assertEquals(1, decoder.droppedTooManyBlocks());
        assertEquals(1, decoder.droppedTooManyTokens());
        assertEquals(0, decoder.malformedFrames());
    }

    @Test
    void partialFrameDeliversCompleteEventsBeforeTheBreak() throws IOException {
        byte[] f = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(2);
            p.packArrayHeader(2);
            str(p, "BlockRemoved");
            longs(p, 1);
            p.packArrayHeader(2);
            str(p, "BlockRemoved");
            p.packArrayHeader(1);
            p.packString("not a hash");
        });
        rec.events.clear();
        assertEquals(KvEventDecoder.MALFORMED, decoder.decode(f, 0, f.length));
        assertEquals(List.of("R keys=[1] medium=none group=-1"), rec.events);
        assertEquals(1, decoder.lastEventCount());
    }

    @Test
    void handlerExceptionsAreContained() throws IOException {
        KvEventDecoder d = new KvEventDecoder(new KvEventHandler() {
            @Override
            public void onBlockStored(BlockStoredEvent event) {
            }

            @Override
            public void onBlockRemoved(BlockRemovedEvent event) {
                throw new IllegalStateException("bug");
            }

            @Override
            public void onAllBlocksCleared() {
            }
        });
        byte[] f = pack(p -> {
            p.packArrayHeader(2).packDouble(0).packArrayHeader(1).packArrayHeader(2);
            str(p, "BlockRemoved");
            longs(p, 1);
        });
        assertEquals(KvEventDecoder.MALFORMED, d.decode(f, 0, f.length));
        assertEquals(1, d.handlerErrors());
    }
}
