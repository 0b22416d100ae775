package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.Holders;
import io.kvgate.index.block.LearnedKeyMap;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.Medium;
import java.io.IOException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Issue #36 item 10 (review V4, S13): SGLang's CPU_TIER1 / CPU_TIER2 mediums (sglang#18205) land in the CPU and DISK
 * tiers, and vLLM's {@code locality: REMOTE} storage blocks (vllm#48281) are not credited to the endpoint that
 * published them, in the positional and in the map-shaped event.
 */
class MediumAndLocalityTest {
    private static final int EP = 3;
    private final BlockIndex index = new BlockIndex(1 << 12, 8);
    private final IndexEventSink sink = new IndexEventSink(index, Fmix64ChainedTokenHasher.INSTANCE, new LearnedKeyMap(1 << 10));
    private final KvEventDecoder decoder = new KvEventDecoder(sink);

    @AfterEach
    void close() {
        index.close();
    }

    @Test
    void sglangHostAndStorageTiersAreTheCpuAndDiskTiers() {
        assertEquals(Holders.TIER_CPU, IndexEventSink.tierOf(Medium.CPU_TIER1), "L2 host memory");
        assertEquals(Holders.TIER_DISK, IndexEventSink.tierOf(Medium.CPU_TIER2), "L3 storage");
        assertEquals(Holders.TIER_CPU, IndexEventSink.tierOf(Medium.CPU_PINNED));
        assertEquals(Holders.TIER_GPU, IndexEventSink.tierOf(Medium.GPU));
        assertEquals("CPU_TIER1", Medium.name(Medium.CPU_TIER1));
        assertEquals("CPU_TIER2", Medium.name(Medium.CPU_TIER2));
    }

    @Test
    void remoteStorageIsNotCreditedToThePublisherLocalAndUnspecifiedAre() throws IOException {
        sink.target(EP, 0, KeyMode.ENGINE);
        apply(p -> {
            positionalStored(p, "STORAGE", "REMOTE", 1, 2);
            positionalStored(p, "STORAGE", "LOCAL", 3);
            positionalStored(p, "STORAGE", null, 4);
            mapStored(p, "STORAGE", "REMOTE", 5);
            mapStored(p, "STORAGE", "LOCAL", 6);
        });
        assertEquals(3, index.blocks(EP), "LOCAL, unspecified and LOCAL (map) blocks only");
        assertEquals(3, sink.remoteBlocks);
        // A REMOTE removal names blocks that were never indexed: nothing to apply, nothing unknown.
        long unknownBefore = index.unknownRemovals();
        apply(p -> positionalRemoved(p, "STORAGE", "REMOTE", 1, 2));
        assertEquals(3, index.blocks(EP));
        assertEquals(unknownBefore, index.unknownRemovals());
        apply(p -> positionalRemoved(p, "STORAGE", "LOCAL", 3));
        assertEquals(2, index.blocks(EP));
    }

    @Test
    void sglangTierMediumsIndexThroughTheDecoder() throws IOException {
        sink.target(EP, 0, KeyMode.ENGINE);
        apply(p -> {
            positionalStored(p, "CPU_TIER1", null, 11);
            positionalStored(p, "CPU_TIER2", null, 12);
        });
        assertEquals(2, index.blocks(EP));
        // A removal from the host tier leaves the storage-tier block.
        apply(p -> positionalRemoved(p, "CPU_TIER1", null, 11));
        assertEquals(1, index.blocks(EP));
    }

    private interface Writer {
        void write(MessageBufferPacker p) throws IOException;
    }

    private void apply(Writer events) throws IOException {
        MessageBufferPacker body = MessagePack.newDefaultBufferPacker();
        events.write(body);
        byte[] payload = body.toByteArray();
        var u = MessagePack.newDefaultUnpacker(payload);
        int n = 0;
        while (u.hasNext()) {
            u.skipValue();
            n++;
        }
        MessageBufferPacker frame = MessagePack.newDefaultBufferPacker();
        frame.packArrayHeader(3).packDouble(0).packArrayHeader(n);
        frame.writePayload(payload);
        frame.packInt(0);
        byte[] f = frame.toByteArray();
        assertEquals(n, decoder.decode(f, 0, f.length));
    }

    /**
     * vLLM's positional BlockStored: hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra_keys,
     * group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window, then locality when given.
     */
    private static void positionalStored(MessageBufferPacker p, String medium, String locality, long... keys)
        throws IOException {
        p.packArrayHeader(locality == null ? 7 : 13);
        p.packString("BlockStored");
        p.packArrayHeader(keys.length);
        for (long k : keys) {
            p.packLong(k);
        }
        p.packNil();
        p.packArrayHeader(keys.length * 4);
        for (int i = 0; i < keys.length * 4; i++) {
            p.packInt(i);
        }
        p.packInt(4).packNil().packString(medium);
        if (locality != null) {
            p.packNil().packNil().packNil().packNil().packNil().packString(locality);
        }
    }

    private static void mapStored(MessageBufferPacker p, String medium, String locality, long key) throws IOException {
        p.packMapHeader(6);
        p.packString("type").packString("BlockStored");
        p.packString("block_hashes").packArrayHeader(1).packLong(key);
        p.packString("token_ids").packArrayHeader(4).packInt(1).packInt(2).packInt(3).packInt(4);
        p.packString("block_size").packInt(4);
        p.packString("locality").packString(locality);
        p.packString("medium").packString(medium);
    }

    /** BlockRemoved: hashes, medium, group_idx, then locality when given. */
    private static void positionalRemoved(MessageBufferPacker p, String medium, String locality, long... keys)
        throws IOException {
        p.packArrayHeader(locality == null ? 3 : 5).packString("BlockRemoved").packArrayHeader(keys.length);
        for (long k : keys) {
            p.packLong(k);
        }
        p.packString(medium);
        if (locality != null) {
            p.packNil().packString(locality);
        }
    }
}
