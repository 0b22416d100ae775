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
            "S keys=[18446744073709551615] parent=- tokens=[7] ipc=1 bs=1 lora=- medium=GPU group=-1"), r.events);
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
            "[" + good + ", {\"data\": {\"type\": \"created\"}}]",                 // no event_id
            "[" + good + ", {\"event_id\": 6}]",                                   // no data
            "[" + good + ", {\"event_id\": \"6\", \"data\": {\"type\": \"created\"}}]",  // id not an integer
            "[" + good + ", {\"event_id\": 6, \"data\": {\"blocks\": []}}]",      // data without type
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [18446744073709551616]}}]", // 2^64
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"removed\", \"block_hashes\": [1.5]}}]",
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"stored\", \"blocks\": [{\"block_hash\": 3}]}}]", // no tokens
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"stored\", \"blocks\": [{\"block_hash\": 3,"
                + " \"tokens\": [{\"token_extra_id\": 0}]}]}}]",                    // token without id
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"updated\"}}]", // updated without block_hash
            "[" + good + ", {\"event_id\": 6, \"data\": {\"type\": \"created\"}, \"attention_dp_rank\": -1}]",
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

    @Test
    void deepNestingIsRefused() {
        Recorder r = new Recorder();
        TrtllmEventDecoder d = new TrtllmEventDecoder(r, r);
        byte[] body = utf8("[{\"event_id\": 1, \"x\": " + "[".repeat(100) + "]".repeat(100)
            + ", \"data\": {\"type\": \"created\"}}]");
        assertEquals(TrtllmEventDecoder.MALFORMED, d.decode(body, 0, body.length));
    }
}
