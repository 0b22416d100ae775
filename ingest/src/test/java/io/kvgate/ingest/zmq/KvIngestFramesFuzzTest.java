package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.TestEngine.batch;
import static io.kvgate.ingest.zmq.TestEngine.cleared;
import static io.kvgate.ingest.zmq.TestEngine.removed;
import static io.kvgate.ingest.zmq.TestEngine.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.random.RandomGenerator;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.ingest.codec.BlockRemovedEvent;
import io.kvgate.ingest.codec.BlockStoredEvent;
import io.kvgate.ingest.codec.KvEventDecoder;
import io.kvgate.ingest.codec.KvEventHandler;
import io.kvgate.testkit.fuzz.ByteMutations;
import io.kvgate.testkit.fuzz.FuzzCorpus;
import io.kvgate.testkit.fuzz.PropertyRunner;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue #43 fuzzing of ingest's own part of the ZMTP path, frames to index (the live path without sockets, as
 * {@link KvIngestBadFrameCostTest} drives it): sequences of (seq, payload) messages with forged sequence numbers
 * (in order, repeated, restarted, jumped) and payloads that are valid batches or their mutants. After every message:
 * nothing escaped, a malformed payload left its rank empty (it is treated like a gap, the dropped part may have
 * held removals), and the rank's block count is what lookups of every key ever sent find.
 */
class KvIngestFramesFuzzTest {
    static final int ENDPOINT = 2;
    static final List<byte[]> VALID = List.of(
        batch(stored(1, 2, 3)), batch(stored(3, 1, new int[] {7}, 4), removed(1)), batch(removed(2, 3, 4, 99)),
        batch(cleared(), stored(5, 6)), batch(stored(7), stored(8), removed(7, 8), stored(9)), batch());
    static final List<byte[]> EVENT_BYTES = FuzzCorpus.tokens("\u0001", "\u0002", "\u0009", "BlockRemoved",
        "BlockStored", "AllBlocksCleared", "CPU");

    /** One message: how its seq relates to the last one, and its payload. */
    record Message(int seqMove, byte[] payload) {
        @Override
        public String toString() {
            return "seq" + (seqMove == 0 ? "+1" : seqMove == 1 ? "=" : seqMove == 2 ? ":=0" : "+5") + " "
                + HexFormat.of().formatHex(payload);
        }
    }

    static final List<byte[]> PAYLOAD_SEEDS = payloadSeeds();

    private static List<byte[]> payloadSeeds() {
        List<byte[]> seeds = new ArrayList<>(VALID);
        seeds.addAll(FuzzCorpus.bytes(FuzzCorpus.load("/fuzz/kvevents.corpus")));
        return List.copyOf(seeds);
    }

    /** 1 to 12 messages; a seq mostly follows on (6 in 9), else repeats, restarts or jumps (1 in 9 each). */
    static List<Message> messages(RandomGenerator random) {
        int count = 1 + random.nextInt(12);
        List<Message> messages = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int draw = random.nextInt(9);
            int seqMove = draw < 6 ? 0 : draw - 5;
            // Half valid batches as they are, half mutants of them and of the corpus.
            byte[] payload = random.nextBoolean()
                ? VALID.get(random.nextInt(VALID.size()))
                : ByteMutations.mutant(random, PAYLOAD_SEEDS, EVENT_BYTES, 3, 1024);
            messages.add(new Message(seqMove, payload));
        }
        return messages;
    }

    @Test
    void everyMessageLeavesTheRankConsistent() {
        PropertyRunner.check("everyMessageLeavesTheRankConsistent", 4351, 60, KvIngestFramesFuzzTest::messages,
            KvIngestFramesFuzzTest::assertConsistent);
    }

    /** A fixed count: each try runs up to 12 messages through the ingest and the index, ~50x a decoder try. */
    @Test
    @Tag("fuzz")
    @Timeout(value = 60, unit = TimeUnit.MINUTES)
    void fuzzEveryMessageLeavesTheRankConsistent() {
        PropertyRunner.fuzz("fuzzEveryMessageLeavesTheRankConsistent", 3000, KvIngestFramesFuzzTest::messages,
            KvIngestFramesFuzzTest::assertConsistent);
    }

    /** One index and one ingest for all tries (an ingest preallocates its frame buffers); each try forgets the rank. */
    private static BlockIndex index;
    private static KvEventIngest ingest;

    @BeforeAll
    static void openIndex() {
        index = new BlockIndex(1 << 12, 4);
        ingest = new KvEventIngest(index, new ManualClock());
    }

    @AfterAll
    static void closeIndex() {
        index.close();
    }

    static void assertConsistent(List<Message> messages) {
        index.removeEndpoint(ENDPOINT);
        {
            RankSubscriber s = new RankSubscriber(new KvEventSource(ENDPOINT, "tcp://127.0.0.1:1", 1, null, false, "",
                KeyMode.ENGINE, "r", List.of(), null), 0);
            BlockIndexReader reader = index.newReader();
            Set<Long> sent = new HashSet<>();
            KeyCollector keys = new KeyCollector(sent);
            KvEventDecoder collect = new KvEventDecoder(keys, 1024, 4096); // a payload of <= 1 KiB holds fewer
            long seq = 0;
            for (int i = 0; i < messages.size(); i++) {
                Message m = messages.get(i);
                seq = switch (m.seqMove()) {
                    case 0 -> i == 0 ? 0 : seq + 1;
                    case 1 -> seq;
                    case 2 -> 0;
                    default -> seq + 5;
                };
                collect.decode(m.payload(), 0, m.payload().length);
                long decodeErrors = s.status().decodeErrors();
                ingest.injectLive(s, seq, m.payload());
                String where = "after message " + i + " of " + messages;
                if (s.status().decodeErrors() > decodeErrors) {
                    assertEquals(0, index.blocks(ENDPOINT), "a malformed payload must leave its rank empty, " + where);
                }
                long found = sent.stream().filter(k -> reader.holds(ENDPOINT, k)).count();
                assertEquals(found, index.blocks(ENDPOINT), "block count vs lookups, " + where);
            }
        }
    }

    /** Every key a payload stores (what the index may hold afterwards). */
    private record KeyCollector(Set<Long> keys) implements KvEventHandler {
        @Override
        public void onBlockStored(BlockStoredEvent e) {
            for (int i = 0; i < e.blockCount(); i++) {
                keys.add(e.blockKeys()[i]);
            }
        }

        @Override
        public void onBlockRemoved(BlockRemovedEvent e) {
        }

        @Override
        public void onAllBlocksCleared() {
        }
    }
}
