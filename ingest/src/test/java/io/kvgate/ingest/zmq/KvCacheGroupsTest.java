package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.codec.KvEventDecoder;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * A hybrid model's events as vLLM publishes them (one stream per KV-cache group, {@code group_idx} and
 * {@code kv_cache_spec_kind} on stores, {@code group_idx} alone on removals): only the full-attention group reaches
 * the index, the other groups' blocks are counted, and groups hashed finer than the rule are warned about.
 */
class KvCacheGroupsTest {
    private static final int EP = 5;
    private final BlockIndex index = new BlockIndex(1 << 12, 8);
    private final IndexEventSink sink = new IndexEventSink(index, Fmix64ChainedTokenHasher.INSTANCE, new LearnedKeyMap(1 << 10));
    private final KvEventDecoder decoder = new KvEventDecoder(sink);

    @AfterEach
    void close() {
        index.close();
    }

    @Test
    void onlyTheFullAttentionGroupIsIndexed() throws IOException {
        sink.target(EP, 0, KeyMode.ENGINE);
        // The full-attention group caches blocks 1 and 2; the sliding-window group announces the same chain and one
        // block (3) the full group does not hold.
        apply(p -> {
            stored(p, 0, "full_attention", 16, 1, 2);
            stored(p, 1, "sliding_window", 16, 1, 2, 3);
        });
        assertEquals(2, index.blocks(EP));
        assertEquals(3, sink.groups.skippedBlocks(EP));
        assertEquals(2, sink.groups.groups(EP));
        // The full group evicts block 1 while the sliding-window copy stays cached: no phantom hit on 1 remains.
        apply(p -> removed(p, 0, 1));
        assertEquals(1, index.blocks(EP));
        // The sliding-window group's removals carry only group_idx: recognised, counted, not applied.
        apply(p -> removed(p, 1, 2, 3));
        assertEquals(1, index.blocks(EP));
        assertEquals(5, sink.groups.skippedBlocks(EP));
        // Mamba is not a prefix cache either; an engine without group fields is indexed as before.
        apply(p -> stored(p, 2, "mamba", 16, 9));
        assertEquals(1, index.blocks(EP));
        sink.target(EP + 1, 0, KeyMode.ENGINE);
        apply(p -> stored(p, -1, null, 16, 7, 8));
        assertEquals(2, index.blocks(EP + 1));
        assertEquals(0, sink.groups.skippedBlocks(EP + 1));
        assertEquals(0, sink.groups.groups(EP + 1));
    }

    @Test
    void groupsHashedFinerThanTheRuleAreWarnedOnceWithTheSizeToSet() throws IOException {
        List<String> warnings = new ArrayList<>();
        KvCacheGroups g = new KvCacheGroups(warnings::add);
        g.expect(EP, 32, "127.0.0.1:8000 (rule kv)");
        assertTrue(g.admit(EP, 0, io.kvgate.ingest.codec.SpecKind.FULL_ATTENTION, 32, 2));
        assertFalse(g.granularityMismatched(EP), "one group alone hashes at its own block size");
        assertFalse(g.admit(EP, 1, io.kvgate.ingest.codec.SpecKind.SLIDING_WINDOW, 16, 4));
        assertFalse(g.admit(EP, 1, io.kvgate.ingest.codec.SpecKind.SLIDING_WINDOW, 16, 4));
        assertEquals(16, g.hashUnit(EP));
        assertTrue(g.granularityMismatched(EP));
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("GCD 16") && warnings.get(0).contains("set the rule's kv_key_mode to learned"), warnings.get(0));
        // The rule switches to learned keys (a reload): not checked, no further warning.
        g.expect(EP, 0, "127.0.0.1:8000 (rule kv)");
        assertTrue(g.admit(EP, 0, io.kvgate.ingest.codec.SpecKind.FULL_ATTENTION, 32, 1));
        assertFalse(g.granularityMismatched(EP));
        assertEquals(1, warnings.size());
    }

    private interface Events {
        void write(MessageBufferPacker p) throws IOException;
    }

    private void apply(Events events) throws IOException {
        MessageBufferPacker body = MessagePack.newDefaultBufferPacker();
        MessageBufferPacker counter = MessagePack.newDefaultBufferPacker();
        events.write(body);
        // count the events written (each begins with an array header)
        byte[] payload = body.toByteArray();
        int n = countEvents(payload);
        counter.packArrayHeader(3).packDouble(0).packArrayHeader(n);
        counter.writePayload(payload);
        counter.packInt(0);
        byte[] f = counter.toByteArray();
        assertEquals(n, decoder.decode(f, 0, f.length));
    }

    private static int countEvents(byte[] payload) throws IOException {
        var u = MessagePack.newDefaultUnpacker(payload);
        int n = 0;
        while (u.hasNext()) {
            u.skipValue();
            n++;
        }
        return n;
    }

    /** vLLM's positional BlockStored: hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra_keys, group_idx, kind. */
    private static void stored(MessageBufferPacker p, int group, String kind, int blockSize, long... keys) throws IOException {
        p.packArrayHeader(group < 0 ? 7 : 11);
        p.packString("BlockStored");
        p.packArrayHeader(keys.length);
        for (long k : keys) {
            p.packLong(k);
        }
        p.packNil();
        p.packArrayHeader(keys.length * blockSize);
        for (int i = 0; i < keys.length * blockSize; i++) {
            p.packInt(i);
        }
        p.packInt(blockSize).packNil().packString("GPU");
        if (group >= 0) {
            p.packNil().packNil().packInt(group).packString(kind);
        }
    }

    private static void removed(MessageBufferPacker p, int group, long... keys) throws IOException {
        p.packArrayHeader(4).packString("BlockRemoved").packArrayHeader(keys.length);
        for (long k : keys) {
            p.packLong(k);
        }
        p.packString("GPU").packInt(group);
    }
}
