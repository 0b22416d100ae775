package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.ingest.codec.Medium;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.EventForm;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code --kv-flood}: its payloads, decoded by the gateway's own {@link KvEventDecoder}, are the blocks of its
 * prompts — BlockStored events of {@code --kv-batch} blocks with chained parents, the prompt's token ids and block
 * size, keys equal to what the gateway's {@link BlockHasher} computes for those tokens — then one BlockRemoved of
 * every block, tail first.
 */
class KvFloodTest {
    private record Stored(long[] keys, boolean hasParent, long parent, int[] tokens, int blockSize, int medium) {}

    private static final class Collector implements KvEventHandler {
        final List<Stored> stored = new ArrayList<>();
        final List<long[]> removed = new ArrayList<>();

        @Override
        public void onBlockStored(BlockStoredEvent e) {
            stored.add(new Stored(Arrays.copyOf(e.blockKeys(), e.blockCount()), e.hasParent(), e.parentKey(),
                Arrays.copyOf(e.tokens(), e.tokenInts()), e.blockSize(), e.medium()));
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
            removed.add(Arrays.copyOf(e.blockKeys(), e.blockCount()));
        }

        @Override
        public void onAllBlocksCleared() {
            throw new AssertionError("the flood never clears");
        }
    }

    @Test
    void floodBatchesDecodeToThePromptsBlocksWithEngineKeys() {
        for (String algo : new String[] {"sha256_cbor", "xxhash_cbor"}) {
            for (EventForm form : EventForm.values()) {
                for (int perEvent : new int[] {16, 32, 48, 64}) {
                    SimulatorConfig c = new SimulatorConfig().dialect(Dialect.VLLM).hashAlgo(algo).eventForm(form)
                        .kvEvents("tcp://127.0.0.1:1").kvFlood(1_000, perEvent, 0).seed(7);
                    c.validate();
                    checkBatches(c, perEvent, HashAlgo.parse(algo), "algo " + algo + " form " + form + " batch "
                        + perEvent);
                }
            }
        }
    }

    private static void checkBatches(SimulatorConfig c, int perEvent, HashAlgo algo, String what) {
        KvFlood.Batches b = KvFlood.batches(c, 1);
        int blocks = b.blocksPerPrompt();
        assertEquals(0, blocks % perEvent, what);
        assertTrue(blocks >= KvFlood.PROMPT_BLOCKS && blocks < KvFlood.PROMPT_BLOCKS + perEvent, what);
        assertEquals(KvFlood.PROMPTS, b.stored().length);
        BlockHasher hasher = new BlockHasher(new BlockHashSpec(algo, 16, "0", null));
        long[] gatewayKeys = new long[blocks];
        for (int p = 0; p < KvFlood.PROMPTS; p += 21) {
            Collector got = new Collector();
            KvEventDecoder decoder = new KvEventDecoder(got);
            assertEquals(blocks / perEvent, decoder.decode(b.stored()[p], 0, b.stored()[p].length), what);
            assertEquals(1, decoder.lastDpRank(), what);
            assertEquals(1, decoder.decode(b.removed()[p], 0, b.removed()[p].length), what);
            long[] keys = b.keys()[p];
            int[] tokens = b.tokens()[p];
            assertEquals(blocks, hasher.hash(tokens, tokens.length, null, gatewayKeys), what);
            assertArrayEquals(gatewayKeys, keys, what + ": the engine's keys are the gateway's keys");
            assertEquals(blocks / perEvent, got.stored.size(), what);
            for (int e = 0; e < got.stored.size(); e++) {
                Stored s = got.stored.get(e);
                int from = e * perEvent;
                assertArrayEquals(Arrays.copyOfRange(keys, from, from + perEvent), s.keys(), what + " event " + e);
                assertEquals(e > 0, s.hasParent(), what);
                if (e > 0) {
                    assertEquals(keys[from - 1], s.parent(), what + ": parents chain");
                }
                assertArrayEquals(Arrays.copyOfRange(tokens, from * 16, (from + perEvent) * 16), s.tokens(), what);
                assertEquals(16, s.blockSize(), what);
                assertEquals(Medium.GPU, s.medium(), what);
            }
            assertEquals(1, got.removed.size(), what);
            long[] tailFirst = new long[blocks];
            for (int i = 0; i < blocks; i++) {
                tailFirst[i] = keys[blocks - 1 - i];
            }
            assertArrayEquals(tailFirst, got.removed.get(0), what);
        }
        // Deterministic for a configuration (the e2e benchmark rebuilds the same bytes in process), distinct per rank.
        assertArrayEquals(b.stored()[5], KvFlood.batches(c, 1).stored()[5]);
        assertFalse(Arrays.equals(b.keys()[5], KvFlood.batches(c, 0).keys()[5]));
    }

    @Test
    void floodFlagsAreValidatedNamingFlagValueAndRule() {
        SimulatorConfig parsed = SimulatorConfig.parse(new String[] {"--dialect", "vllm", "--kv-events",
            "tcp://127.0.0.1:5557", "--kv-flood", "1000000", "--kv-batch", "64", "--kv-flood-seconds", "10"});
        parsed.validate();
        assertEquals(1_000_000, parsed.kvFloodRate);
        assertEquals(64, parsed.kvFloodBatch);
        assertEquals(10, parsed.kvFloodSeconds);
        assertRefused("kv-flood=1000: needs --kv-events", new SimulatorConfig().kvFlood(1_000, 32, 0));
        assertRefused("kv-flood=1000: vllm only", new SimulatorConfig().dialect(Dialect.SGLANG)
            .kvEvents("tcp://127.0.0.1:1").kvFlood(1_000, 32, 0));
        assertRefused("kv-batch=0: must be in 1..1024", new SimulatorConfig().kvEvents("tcp://127.0.0.1:1")
            .kvFlood(1_000, 0, 0));
        assertRefused("kv-flood=-1: must be in 0..100000000", new SimulatorConfig().kvFlood(-1, 32, 0));
        assertRefused("kv-flood-seconds=-5: must be in 0..86400", new SimulatorConfig().kvFlood(0, 32, -5));
        assertThrows(IllegalArgumentException.class,
            () -> SimulatorConfig.parse(new String[] {"--kv-flood", "fast"}));
    }

    private static void assertRefused(String expected, SimulatorConfig c) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, c::validate);
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }
}
