package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.Holders;
import io.kvgate.index.block.LearnedKeyMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What a drained {@code /kv_cache_events} body does to the index, without sockets: learned keys from the events'
 * tokens, removals through the engine-hash map, tier moves, and the clears of gaps, restarts and malformed bodies.
 */
class HttpKvPollerTest {
    private static final int EP = 3;
    private final BlockIndex index = new BlockIndex(1 << 14, 8);
    private final ManualClock clock = new ManualClock();
    private final IndexEventSink sink = new IndexEventSink(index, Fmix64ChainedTokenHasher.INSTANCE, new LearnedKeyMap(1 << 10));
    private final HttpKvPoller poller = new HttpKvPoller(index, clock, IngestConfig.defaults(), sink, HostResolver.SYSTEM,
        Runnable::run, HttpKvPoller.DEFAULT_REQUEST_TIMEOUT_NS);

    @AfterEach
    void close() {
        poller.close();
        index.close();
    }

    private void drain(String json) {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        poller.apply(poller.endpoint(EP), b, 0, b.length);
    }

    private static String token(int t) {
        return "{\"type\": \"unique_token\", \"token_id\": " + t + ", \"token_extra_id\": 0}";
    }

    /** A stored event of 2-token blocks: hashes[i] holds tokens[2i], tokens[2i+1]. */
    private static String stored(long id, int rank, String parent, long[] hashes, int[] tokens, int level) {
        StringBuilder sb = new StringBuilder("{\"event_id\": " + id + ", \"data\": {\"type\": \"stored\", \"parent_hash\": "
            + parent + ", \"blocks\": [");
        for (int i = 0; i < hashes.length; i++) {
            sb.append(i == 0 ? "" : ", ").append("{\"type\": \"stored_block\", \"block_hash\": ")
                .append(Long.toUnsignedString(hashes[i])).append(", \"tokens\": [").append(token(tokens[2 * i]))
                .append(", ").append(token(tokens[2 * i + 1])).append("], \"cache_level\": ").append(level)
                .append(", \"priority\": 35}");
        }
        return sb.append("]}, \"window_size\": 4096, \"attention_dp_rank\": ").append(rank).append("}").toString();
    }

    private static String removed(long id, int rank, long... hashes) {
        StringBuilder sb = new StringBuilder("{\"event_id\": " + id + ", \"data\": {\"type\": \"removed\", \"block_hashes\": [");
        for (int i = 0; i < hashes.length; i++) {
            sb.append(i == 0 ? "" : ", ").append(Long.toUnsignedString(hashes[i]));
        }
        return sb.append("]}, \"window_size\": 4096, \"attention_dp_rank\": ").append(rank).append("}").toString();
    }

    /** The gateway's own keys of a token sequence in 2-token blocks (what the router computes for a prompt). */
    private static long[] ownKeys(int... tokens) {
        Fmix64ChainedTokenHasher h = Fmix64ChainedTokenHasher.INSTANCE;
        long[] keys = new long[tokens.length / 2];
        long parent = h.rootKey();
        for (int i = 0; i < keys.length; i++) {
            keys[i] = parent = h.blockKey(parent, tokens, 2 * i, 2);
        }
        return keys;
    }

    private SubscriberStatus status(int rank) {
        return poller.status().stream().filter(s -> s.rank() == rank).findFirst().orElseThrow();
    }

    @Test
    void storedBlocksAreKeyedByTheirTokensAndRemovedThroughTheEngineHash() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 2, "r"));
        long[] own = ownKeys(1, 2, 3, 4, 5, 6);
        long big = -1L; // 2^64 - 1 on the wire
        drain("[" + stored(0, 0, "null", new long[] {big, 7}, new int[] {1, 2, 3, 4}, 0) + ", "
            + stored(1, 0, Long.toUnsignedString(7), new long[] {8}, new int[] {5, 6}, 0) + ", "
            + stored(0, 1, "null", new long[] {big}, new int[] {1, 2}, 1) + "]");
        BlockIndexReader r = index.newReader();
        for (long k : own) {
            assertTrue(r.holds(EP, k));
        }
        assertEquals(Holders.TIER_GPU, r.tier(EP, own[0]), "rank 0 holds it on GPU, rank 1 in host memory");
        assertEquals(3, status(0).blockOps());
        assertEquals(2, status(0).events());
        assertEquals(1, status(1).blockOps());
        assertEquals(1, status(0).lastSeq());

        drain("[" + removed(2, 0, 8, 7) + "]");
        assertFalse(r.holds(EP, own[2]));
        assertFalse(r.holds(EP, own[1]));
        assertTrue(r.holds(EP, own[0]));
        assertEquals(0, status(0).gaps());
        assertEquals(0, status(0).clears());
    }

    @Test
    void anOffloadMovesTheBlockToTheCpuTier() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        long own = ownKeys(1, 2)[0];
        drain("[" + stored(0, 0, "null", new long[] {11}, new int[] {1, 2}, 0) + ", {\"event_id\": 1, \"data\": "
            + "{\"type\": \"updated\", \"block_hash\": 11, \"cache_level\": {\"type\": \"event_diff\", \"new_value\": 1,"
            + " \"old_value\": 0}, \"priority\": {\"type\": \"event_diff\", \"new_value\": 35, \"old_value\": 35}},"
            + " \"window_size\": 4096}]");
        assertEquals(Holders.TIER_CPU, index.newReader().tier(EP, own));
        drain("[" + removed(2, 0, 11) + "]");
        assertFalse(index.newReader().holds(EP, own));
    }

    @Test
    void anEventIdJumpClearsTheRankLikeAGapAndABackwardsIdLikeARestart() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 2, "r"));
        long[] a = ownKeys(1, 2);
        long[] b = ownKeys(3, 4);
        drain("[" + stored(0, 0, "null", new long[] {21}, new int[] {1, 2}, 0) + ", "
            + stored(0, 1, "null", new long[] {31}, new int[] {1, 2}, 0) + "]");
        // Rank 0's events 1..4 were lost (the engine's buffer overflowed): its inventory is unknown.
        drain("[" + stored(5, 0, "null", new long[] {22}, new int[] {3, 4}, 0) + "]");
        assertEquals(1, status(0).gaps());
        assertEquals(1, status(0).clears());
        BlockIndexReader r = index.newReader();
        assertFalse(index.blocks(EP) == 0);
        assertTrue(r.holds(EP, b[0]), "the event after the gap is applied");
        assertTrue(r.holds(EP, a[0]), "rank 1 still holds its copy: only rank 0 was cleared");
        assertEquals(0, status(1).clears());
        // A new engine process: ids start again at 0 and it announces its pools.
        drain("[{\"event_id\": 0, \"data\": {\"type\": \"created\", \"num_blocks_per_cache_level\": [128, 0]},"
            + " \"window_size\": 4096}]");
        assertEquals(1, status(0).restarts());
        assertFalse(r.holds(EP, b[0]));
        assertEquals(3, status(0).clears(), "the backwards id and the created event each clear");
    }

    /**
     * TensorRT-LLM's {@code /kv_cache_events} as a buffer that every POST empties ({@code openai_server.py}
     * {@code get_kv_cache_events}), shared by every consumer: kvgate's drains are applied, another consumer's (its
     * {@code KvCacheAwareRouter}, a second kvgate replica) are lost to kvgate.
     */
    private final class DrainOnReadEngine {
        private final StringBuilder pending = new StringBuilder();
        private long nextId;
        private int nextToken = 1;

        void storeBlocks(int count) {
            for (int i = 0; i < count; i++) {
                pending.append(pending.isEmpty() ? "" : ", ").append(stored(nextId, 0, "null",
                    new long[] {1000 + nextId}, new int[] {nextToken, nextToken + 1}, 0));
                nextId++;
                nextToken += 2;
            }
        }

        void kvgateDrains() {
            drain("[" + pending + "]");
            pending.setLength(0);
        }

        void otherConsumerDrains() {
            pending.setLength(0);
        }
    }

    @Test
    void anotherConsumerDrainingTheEndpointIsDetectedOncePerEpisode() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        DrainOnReadEngine engine = new DrainOnReadEngine();
        // Two consumers polling in turn: every kvgate poll after the first starts past what the other one took.
        for (int poll = 0; poll < HttpKvPoller.OTHER_DRAINER_MIN_JUMPS; poll++) {
            engine.storeBlocks(2);
            engine.kvgateDrains();
            engine.storeBlocks(2);
            engine.otherConsumerDrains();
            assertFalse(status(0).otherDrainer(), "not yet: " + status(0).gaps() + " jumps after poll " + poll);
        }
        engine.storeBlocks(2);
        engine.kvgateDrains();
        assertEquals(HttpKvPoller.OTHER_DRAINER_MIN_JUMPS, status(0).gaps());
        assertTrue(status(0).otherDrainer());
        assertEquals(1, status(0).otherDrainerEpisodes());
        // It goes on: the same episode, counted (and logged) once.
        for (int poll = 0; poll < 20; poll++) {
            engine.storeBlocks(1);
            engine.otherConsumerDrains();
            engine.storeBlocks(1);
            engine.kvgateDrains();
        }
        assertTrue(status(0).otherDrainer());
        assertEquals(1, status(0).otherDrainerEpisodes());
        // The other consumer stops: a window of clean polls ends the episode; a later one is a new episode.
        for (int poll = 0; poll < HttpKvPoller.OTHER_DRAINER_WINDOW; poll++) {
            engine.storeBlocks(1);
            engine.kvgateDrains();
        }
        assertFalse(status(0).otherDrainer());
        for (int poll = 0; poll < HttpKvPoller.OTHER_DRAINER_WINDOW; poll++) {
            engine.storeBlocks(1);
            engine.otherConsumerDrains();
            engine.storeBlocks(1);
            engine.kvgateDrains();
        }
        assertTrue(status(0).otherDrainer());
        assertEquals(2, status(0).otherDrainerEpisodes());
    }

    @Test
    void aSingleConsumerWithOccasionalRealGapsAndEmptyPollsIsNotAnotherDrainer() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        DrainOnReadEngine engine = new DrainOnReadEngine();
        for (int poll = 0; poll < 200; poll++) {
            engine.storeBlocks(3);
            if (poll % 4 == 3) {
                engine.otherConsumerDrains(); // the engine's buffer overflowed: these events are lost once
                engine.storeBlocks(1);
            }
            engine.kvgateDrains();
            engine.kvgateDrains(); // an idle poll returns [] and is not judged
        }
        assertEquals(50, status(0).gaps(), "every lost batch is still a gap that clears");
        assertFalse(status(0).otherDrainer());
        assertEquals(0, status(0).otherDrainerEpisodes());
    }

    @Test
    void aMalformedBodyClearsEveryRankAndRestartsIdTracking() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 2, "r"));
        drain("[" + stored(0, 0, "null", new long[] {21}, new int[] {1, 2}, 0) + ", "
            + stored(0, 1, "null", new long[] {31}, new int[] {3, 4}, 0) + "]");
        assertEquals(2, index.blocks(EP));
        drain("[" + stored(1, 0, "null", new long[] {22}, new int[] {5, 6}, 0) + ", {\"event_id\": 2, \"data\"");
        assertEquals(0, index.blocks(EP), "the lost tail may have held removals");
        assertEquals(1, status(0).decodeErrors());
        assertEquals(1, status(1).decodeErrors());
        assertTrue(status(0).lastError().startsWith("malformed /kv_cache_events body (1 events applied"), status(0).lastError());
        // Ids are judged afresh: the next body is no gap.
        drain("[" + stored(9, 0, "null", new long[] {21}, new int[] {1, 2}, 0) + "]");
        assertEquals(0, status(0).gaps());
        assertEquals(1, index.blocks(EP));
    }

    /**
     * One event with an unusable value (here a stored event whose hash is not hex) among good ones, and an event type
     * this gateway does not know: each costs itself alone. Before #36 the first failed the whole drained body, which
     * cleared both ranks; the second made the next event of its rank look like a gap.
     */
    @Test
    void aBadValueOrAnUnknownTypeCostsOneEventAndClearsNothing() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 2, "r"));
        drain("[" + stored(0, 0, "null", new long[] {21}, new int[] {1, 2}, 0) + ", "
            + stored(0, 1, "null", new long[] {31}, new int[] {3, 4}, 0) + "]");
        String badHash = stored(1, 0, "null", new long[] {22}, new int[] {5, 6}, 0).replace("\"block_hash\": 22", "\"block_hash\": \"xyz\"");
        drain("[" + badHash + ", {\"event_id\": 2, \"data\": {\"type\": \"evicted_to_mars\"}, \"window_size\": 4096},"
            + stored(3, 0, "null", new long[] {23}, new int[] {7, 8}, 0) + "]");
        BlockIndexReader r = index.newReader();
        assertTrue(r.holds(EP, ownKeys(1, 2)[0]));
        assertTrue(r.holds(EP, ownKeys(3, 4)[0]));
        assertFalse(r.holds(EP, ownKeys(5, 6)[0]), "the bad event alone is skipped");
        assertTrue(r.holds(EP, ownKeys(7, 8)[0]), "the event after it is applied, and is no gap");
        assertEquals(0, status(0).clears());
        assertEquals(0, status(1).clears());
        assertEquals(0, status(0).gaps());
        assertEquals(0, status(0).decodeErrors());
        assertEquals(3, status(0).lastSeq());
        assertTrue(status(0).lastError().startsWith("1 event(s) with an unusable value skipped"), status(0).lastError());
    }

    @Test
    void anEventOfARankOutsideDpRanksIsSkippedAndCounted() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        drain("[" + stored(0, 3, "null", new long[] {21}, new int[] {1, 2}, 0) + "]");
        assertEquals(0, index.blocks(EP));
        assertEquals(1, status(0).decodeErrors());
        assertTrue(status(0).lastError().contains("attention_dp_rank 3 but dp_ranks is 1"), status(0).lastError());
    }

    @Test
    void aStoredBlockWhoseParentWasNeverSeenIsNotIndexed() {
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        drain("[" + stored(0, 0, "12345", new long[] {21}, new int[] {1, 2}, 0) + "]");
        assertEquals(0, index.blocks(EP), "its own key cannot be chained: a cold block, never a wrong one");
        assertEquals(1, sink.learnedUnknownParents);
    }
}
