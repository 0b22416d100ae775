package io.kvgate.ingest.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** TensorRT-LLM {@code /kv_cache_events} bodies: every shape of the fixture, hashes above 2^63, malformed bodies. */
class TrtllmEventDecoderTest {
    /** Records the listener's view ("E id rank window") and the handler's, in one ordered list. */
    private static final class Recorder implements KvEventHandler, TrtllmEventDecoder.EventListener {
        final RecordingHandler rec = new RecordingHandler();
        final List<String> events = rec.events;
        boolean skipRank1;

        @Override
        public void onBlockStored(BlockStoredEvent e) {
            rec.onBlockStored(e);
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
            rec.onBlockRemoved(e);
        }

        @Override
        public void onAllBlocksCleared() {
            rec.onAllBlocksCleared();
        }

        @Override
        public boolean onEvent(long eventId, int dpRank, long windowSize) {
            events.add("E " + eventId + " rank=" + dpRank + " window=" + windowSize);
            return !(skipRank1 && dpRank == 1);
        }

        @Override
        public void onBlockMoved(long blockKey, int fromMedium, int toMedium) {
            events.add("M " + Long.toUnsignedString(blockKey) + " " + Medium.name(fromMedium) + "->" + Medium.name(toMedium));
        }
    }

    private static byte[] fixture() throws IOException {
        try (InputStream in = TrtllmEventDecoderTest.class.getResourceAsStream("/trtllm/kv_cache_events.json")) {
            return in.readAllBytes();
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void everyShapeOfTheFixture() throws IOException {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = fixture();
        assertEquals(6, d.decode(body, 0, body.length));
        assertEquals(List.of(
            "E 0 rank=0 window=8192",
            "C", // created: a new engine process announcing its pools
            "E 1 rank=0 window=8192",
            // one callback per block, chained: the second block's parent is the first block
            "S keys=[17301473523140412513] parent=- tokens=[101,102] ipc=1 bs=2 lora=- medium=GPU group=-1",
            "S keys=[4211592339412097245] parent=17301473523140412513 tokens=[103,104] ipc=1 bs=2 lora=- medium=GPU group=-1",
            "E 0 rank=1 window=8192",
            "S keys=[99] parent=17301473523140412513 tokens=[103,104] ipc=1 bs=2 lora=- medium=CPU group=-1",
            "E 2 rank=0 window=8192",
            "M 17301473523140412513 GPU->CPU", // offloaded to host memory
            "E 3 rank=0 window=8192", // priority-only update: announced, nothing to apply
            "E 4 rank=0 window=8192",
            "R keys=[4211592339412097245,17301473523140412513] medium=none group=-1"), r.events);
        assertEquals(0, d.malformedBodies());
    }

    @Test
    void anEmptyDrainIsNoEvents() {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = utf8(" [ ] ");
        assertEquals(0, d.decode(body, 0, body.length));
        assertEquals(List.of(), r.events);
    }

    @Test
    void theListenerCanSkipAnEvent() throws IOException {
        Recorder r = new Recorder();
        r.skipRank1 = true;
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = fixture();
        assertEquals(6, d.decode(body, 0, body.length));
        assertTrue(r.events.contains("E 0 rank=1 window=8192"));
        assertTrue(r.events.stream().noneMatch(e -> e.startsWith("S keys=[99]")), r.events.toString());
    }

    @Test
    void keysInAnyOrderAndUnknownKeysAndTypesSkipped() {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = utf8("[{\"attention_dp_rank\": 2, \"window_size\": null, \"future\": {\"x\": [1, 2]},"
            + " \"data\": {\"blocks\": [{\"tokens\": [{\"token_id\": 7, \"type\": \"unique_token\"}], \"block_hash\": -1,"
            + " \"lora_id\": null}], \"type\": \"stored\"}, \"event_id\": 9},"
            + " {\"event_id\": 10, \"data\": {\"type\": \"evicted_to_mars\", \"block_hash\": 1}}]");
        assertEquals(2, d.decode(body, 0, body.length));
        assertEquals(List.of("E 9 rank=2 window=-1",
            "S keys=[18446744073709551615] parent=- tokens=[7] ipc=1 bs=1 lora=- medium=GPU group=-1",
            "E 10 rank=0 window=-1"), r.events); // an unknown type keeps its id in the rank's sequence
        assertEquals(1, d.unknownTypes());
    }

    @Test
    void blocksWithExtraTokenIdsAndTheirDescendantsAreNotDelivered() {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        String tok = "{\"type\": \"unique_token\", \"token_id\": %d, \"token_extra_id\": %d}";
        String block = "{\"type\": \"stored_block\", \"block_hash\": %d, \"tokens\": [" + tok + "], \"cache_level\": 0}";
        byte[] body = utf8("[{\"event_id\": 0, \"data\": {\"type\": \"stored\", \"parent_hash\": null, \"blocks\": ["
            + String.format(block, 1, 5, 0) + ", " + String.format(block, 2, 6, 77) + ", " + String.format(block, 3, 7, 0)
            + "]}, \"window_size\": 64}]");
        assertEquals(1, d.decode(body, 0, body.length));
        assertEquals(List.of("E 0 rank=0 window=64",
            "S keys=[1] parent=- tokens=[5] ipc=1 bs=1 lora=- medium=GPU group=-1"), r.events);
        assertEquals(2, d.droppedExtraIdBlocks());
    }

    @Test
    void malformedBodiesReportMalformedAfterTheCompleteEventsBeforeTheBreak() {
        String good = "{\"event_id\": 5, \"data\": {\"type\": \"removed\", \"block_hashes\": [1]}}";
        String[] bad = {
            "",                                             // empty body
            "{\"event_id\": 1}",                            // not an array
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [2",   // truncated
            "[" + good + ", 7]",                                                    // an event that is not an object
            "[" + good + "] trailing",
        };
        for (String b : bad) {
            Recorder r = new Recorder();
            TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
            byte[] body = utf8(b);
            assertEquals(TrtllmEventDecoder.MALFORMED, d.decode(body, 0, body.length), b);
            assertEquals(1, d.malformedBodies(), b);
            List<String> expected = new ArrayList<>();
            if (b.startsWith("[" + good)) {
                expected.add("E 5 rank=0 window=-1");
                expected.add("R keys=[1] medium=none group=-1");
            }
            assertEquals(expected, r.events, b);
        }
    }

    /**
     * A well-formed body with one unusable event: that event alone is skipped (before #36 each of these failed the
     * whole drained body, which cleared every rank). With its id readable the listener still sees it, so the next
     * event is not a gap; a bad removal clears its rank ("C"), since the block it removes cannot be named.
     */
    @Test
    void aBadValueCostsItsEventNeverTheBody() {
        String before = "{\"event_id\": 5, \"data\": {\"type\": \"removed\", \"block_hashes\": [1]}}";
        String after = "{\"event_id\": 7, \"data\": {\"type\": \"removed\", \"block_hashes\": [3]}}";
        String[][] cases = {
            // {bad event, what the recorder sees for it}
            {"{\"data\": {\"type\": \"created\"}}", ""},                                           // no event_id
            {"{\"event_id\": \"6\", \"data\": {\"type\": \"created\"}}", ""},                     // id not an integer
            {"{\"event_id\": 6, \"data\": {\"type\": \"created\"}, \"attention_dp_rank\": -1}", ""}, // rank unusable
            {"{\"event_id\": 6}", "E 6"},                                                          // no data
            {"{\"event_id\": 6, \"data\": {\"blocks\": []}}", "E 6"},                               // data without type
            {"{\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [18446744073709551616]}}", "E 6|C"},
            {"{\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [1.5]}}", "E 6|C"},
            {"{\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [\"not-hex\"]}}", "E 6|C"},
            {"{\"event_id\": 6, \"data\": {\"type\": \"stored\", \"blocks\": [{\"block_hash\": 3}]}}", "E 6"}, // no tokens
            {"{\"event_id\": 6, \"data\": {\"type\": \"stored\", \"blocks\": [{\"block_hash\": 3,"
                + " \"tokens\": [{\"token_extra_id\": 0}]}]}}", "E 6"},                               // token without id
            {"{\"event_id\": 6, \"data\": {\"type\": \"stored\", \"blocks\": [{\"block_hash\": {\"x\": [1]},"
                + " \"tokens\": [{\"token_id\": 1}]}]}}", "E 6"},                                     // hash an object
            {"{\"event_id\": 6, \"data\": {\"type\": \"updated\"}}", "E 6"},                         // updated without block_hash
        };
        for (String[] c : cases) {
            Recorder r = new Recorder();
            TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
            byte[] body = utf8("[" + before + ", " + c[0] + ", " + after + "]");
            assertEquals(3, d.decode(body, 0, body.length), c[0]);
            assertEquals(0, d.malformedBodies(), c[0]);
            assertEquals(1, d.badEvents(), c[0]);
            List<String> expected = new ArrayList<>(List.of("E 5 rank=0 window=-1", "R keys=[1] medium=none group=-1"));
            for (String e : c[1].isEmpty() ? new String[0] : c[1].split("\\|")) {
                expected.add(e.equals("C") ? "C" : e + " rank=0 window=-1");
            }
            expected.add("E 7 rank=0 window=-1");
            expected.add("R keys=[3] medium=none group=-1");
            assertEquals(expected, r.events, c[0]);
        }
    }

    /**
     * KV cache manager V2 with {@code kv_cache_event_hash_algo: v2_sha256}: {@code _normalize_block_hash} writes
     * {@code block_key.hex()} (a 64-digit string) for stored, parent and removed hashes, and {@code _normalize_token}
     * writes a multimodal token as {@code UniqueToken(token.hex())} (a string token_id, token_extra_id 0). Shape:
     * {@code KVCacheEventSerializer} ({@code tensorrt_llm/_utils.py}) over V2's {@code KVCacheEvent(event_id, data,
     * window_size, hash_algo, attention_dp_rank, layer_group_id)} ({@code _event_manager.py}).
     */
    @Test
    void v2Sha256StringHashesFoldAlikeEverywhereAndStringTokensAreNotIndexed() {
        String h1 = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0";
        String h2 = "00000000000000ff" + "1".repeat(48);
        String tok = "{\"type\": \"unique_token\", \"token_id\": %s, \"token_extra_id\": 0}";
        String block = "{\"type\": \"stored_block\", \"block_hash\": \"%s\", \"tokens\": [" + tok + ", " + tok
            + "], \"cache_level\": 0, \"priority\": 35}";
        String body = "["
            + "{\"event_id\": 0, \"data\": {\"type\": \"stored\", \"parent_hash\": null, \"blocks\": ["
            + String.format(block, h1, "101", "102") + ", " + String.format(block, h2, "103", "104")
            + "]}, \"window_size\": 32, \"hash_algo\": \"v2_sha256\", \"attention_dp_rank\": 0, \"layer_group_id\": 0},"
            // a multimodal block: its token is the hex of the content hash
            + "{\"event_id\": 1, \"data\": {\"type\": \"stored\", \"parent_hash\": \"" + h2 + "\", \"blocks\": ["
            + String.format(block, "ab".repeat(32), "\"0a1b2c\"", "105") + "]}, \"window_size\": 32, \"hash_algo\": \"v2_sha256\"},"
            + "{\"event_id\": 2, \"data\": {\"type\": \"updated\", \"block_hash\": \"" + h1 + "\", \"cache_level\":"
            + " {\"type\": \"event_diff\", \"new_value\": 1, \"old_value\": 0}, \"priority\": null}, \"window_size\": 32,"
            + " \"hash_algo\": \"v2_sha256\"},"
            + "{\"event_id\": 3, \"data\": {\"type\": \"removed\", \"block_hashes\": [\"" + h2 + "\", \"" + h1.toUpperCase()
            + "\"]}, \"window_size\": 32, \"hash_algo\": \"v2_sha256\"}]";
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] b = utf8(body);
        assertEquals(4, d.decode(b, 0, b.length));
        String k1 = Long.toUnsignedString(0x9bd96a485ad84efdL);
        String k2 = Long.toUnsignedString(0xffL);
        assertEquals(List.of(
            "E 0 rank=0 window=32",
            "S keys=[" + k1 + "] parent=- tokens=[101,102] ipc=1 bs=2 lora=- medium=GPU group=-1",
            "S keys=[" + k2 + "] parent=" + k1 + " tokens=[103,104] ipc=1 bs=2 lora=- medium=GPU group=-1",
            "E 1 rank=0 window=32", // the multimodal block is not indexed
            "E 2 rank=0 window=32",
            "M " + k1 + " GPU->CPU",
            "E 3 rank=0 window=32",
            "R keys=[" + k2 + "," + k1 + "] medium=none group=-1"), r.events);
        assertEquals(1, d.droppedExtraIdBlocks());
        assertEquals(0, d.badEvents());
        assertEquals(0, d.malformedBodies());
        assertEquals("v2_sha256", d.lastHashAlgo());
        assertEquals(7, d.stringHashes()); // 3 stored + 1 parent + 1 updated + 2 removed
    }

    @Test
    void hexFold() {
        assertEquals(0xffL, TrtllmEventDecoder.foldHexHash("ff"));
        assertEquals(0x0123456789abcdefL, TrtllmEventDecoder.foldHexHash("0123456789ABCDEF" + "77".repeat(8)));
        assertEquals(null, TrtllmEventDecoder.foldHexHash(""));
        assertEquals(null, TrtllmEventDecoder.foldHexHash("0x12"));
        assertEquals(null, TrtllmEventDecoder.foldHexHash("f".repeat(129)));
    }

    @Test
    void deepNestingIsRefused() {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = utf8("[{\"event_id\": 1, \"x\": " + "[".repeat(100) + "]".repeat(100)
            + ", \"data\": {\"type\": \"created\"}}]");
        assertEquals(TrtllmEventDecoder.MALFORMED, d.decode(body, 0, body.length));
    }
}
