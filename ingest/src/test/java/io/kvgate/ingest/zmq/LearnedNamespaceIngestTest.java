package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.index.block.LearnedNamespace;
import io.kvgate.ingest.codec.TrtllmEventDecoder;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue #36 item 10 (review T5): TensorRT-LLM's drained stored blocks name their {@code cache_salt} and
 * {@code lora_id}; learned keys root a salted or adapter sequence in its namespace, so a base-model prompt with the
 * same tokens is no hit on them, and a salted prompt keyed by the gateway in the same salt's namespace is
 * (RuleHasherTest.trtllmLearnedKeysAreNamespacedBySaltAndAdapter computes the request side with the same function).
 */
class LearnedNamespaceIngestTest {
    private static final int EP = 2;
    private final BlockIndex index = new BlockIndex(1 << 12, 8);
    private final LearnedKeyMap learned = new LearnedKeyMap(1 << 10);
    private final IndexEventSink sink = new IndexEventSink(index, Fmix64ChainedTokenHasher.INSTANCE, learned);
    private final TrtllmEventDecoder decoder = new TrtllmEventDecoder(sink, (id, rank, window) -> true);

    @AfterEach
    void close() {
        index.close();
    }

    private static String stored(long eventId, long hash, String extra) {
        return "{\"event_id\":" + eventId + ",\"window_size\":4,\"data\":{\"type\":\"stored\",\"parent_hash\":null,"
            + "\"blocks\":[{\"type\":\"stored_block\",\"block_hash\":" + hash + ",\"tokens\":["
            + "{\"type\":\"unique_token\",\"token_id\":1,\"token_extra_id\":0},"
            + "{\"type\":\"unique_token\",\"token_id\":2,\"token_extra_id\":0}],\"cache_level\":0,\"priority\":35" + extra
            + "}]}}";
    }

    private void drain(String... events) {
        byte[] body = ("[" + String.join(",", events) + "]").getBytes(StandardCharsets.UTF_8);
        assertEquals(events.length, decoder.decode(body, 0, body.length));
    }

    @Test
    void saltedAndAdapterBlocksAreKeyedInTheirNamespace() {
        sink.target(EP, 0, KeyMode.LEARNED);
        drain(stored(0, 100, ""), stored(1, 101, ",\"cache_salt\":\"tenant-a\""), stored(2, 102, ",\"lora_id\":7"),
            stored(3, 103, ",\"cache_salt\":\"tenant-a\",\"lora_id\":7"), stored(4, 104, ",\"cache_salt\":null,\"lora_id\":null"));
        var h = Fmix64ChainedTokenHasher.INSTANCE;
        int[] tokens = {1, 2};
        long plain = h.blockKey(h.rootKey(), tokens, 0, 2);
        long salted = h.blockKey(LearnedNamespace.root(h, LearnedNamespace.ofSalt("tenant-a")), tokens, 0, 2);
        long adapter = h.blockKey(LearnedNamespace.root(h, LearnedNamespace.ofLora(7)), tokens, 0, 2);
        assertEquals(plain, learned.get(100));
        assertEquals(salted, learned.get(101), "the request side roots a tenant-a prompt here too");
        assertEquals(adapter, learned.get(102));
        assertEquals(plain, learned.get(104), "null salt and adapter: the base model's key");
        assertNotEquals(plain, salted);
        assertNotEquals(plain, adapter);
        assertNotEquals(salted, adapter);
        assertNotEquals(salted, learned.get(103), "salt and adapter together are a namespace of their own");
        assertNotEquals(adapter, learned.get(103));
        assertEquals(4, index.blocks(EP), "four distinct blocks: plain (twice), salted, adapter, both");
    }

    @Test
    void aSaltThatIsNotAStringCostsItsEventAlone() {
        sink.target(EP, 0, KeyMode.LEARNED);
        drain(stored(0, 100, ",\"cache_salt\":5"), stored(1, 101, ""));
        assertEquals(1, decoder.badEvents());
        assertEquals(0, learned.get(100));
        assertNotEquals(0, learned.get(101));
    }
}
