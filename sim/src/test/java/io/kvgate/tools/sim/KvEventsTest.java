package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.EventForm;
import io.kvgate.ingest.zmq.ZmqConnect;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.MapValue;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** Cache hits in usage and KV events on the wire, decoded here with msgpack-core. */
@Timeout(60)
@Tag("system")
class KvEventsTest {

    /** Waits for ZeroMQ delivery on a loaded machine; no timeout is under test here. */
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(30);

    record Message(String topic, long seq, Value payload) {}

    static Message receive(ZMQ.Socket sub) throws IOException {
        byte[] topic = sub.recv();
        assertNotNull(topic, "no KV event within the receive timeout");
        assertTrue(sub.hasReceiveMore());
        byte[] seq = sub.recv();
        assertEquals(8, seq.length);
        assertTrue(sub.hasReceiveMore());
        byte[] payload = sub.recv();
        assertTrue(!sub.hasReceiveMore(), "exactly 3 frames");
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
            return new Message(new String(topic), ByteBuffer.wrap(seq).getLong(), u.unpackValue());
        }
    }

    static ZMQ.Socket subscriber(ZContext zmq, String endpoint, boolean bind) {
        ZMQ.Socket sub = zmq.createSocket(SocketType.SUB);
        sub.setReceiveTimeOut(10_000);
        sub.subscribe(new byte[0]);
        if (bind) {
            sub.bind(endpoint);
        } else {
            ZmqConnect.connect(sub, endpoint);
        }
        return sub;
    }

    /**
     * The shared slow-joiner handshake: throwaway requests (pinned to {@code rank}) until one of their batches
     * reaches {@code sub}, then every batch up to the last one published; what the test receives next is its own.
     */
    static void warmUp(EngineSimulator sim, ZMQ.Socket sub, int rank) {
        sub.setReceiveTimeOut(100);
        int[] sent = {0};
        ZmqHandshake.await("simulator rank " + rank + " publishing to the test's SUB", HANDSHAKE_TIMEOUT,
            () -> {
                String body = "{\"model\":\"m\",\"prompt\":" + handshakePrompt(sent[0]++) + ",\"max_tokens\":1}";
                HttpResponse<String> r = rank == 0 ? post(sim, "/v1/completions", body)
                    : post(sim, "/v1/completions", body, "x-data-parallel-rank", String.valueOf(rank));
                assertEquals(200, r.statusCode(), r.body());
                return sim.lastEventSeq(rank);
            },
            () -> {
                byte[] topic = sub.recv();
                if (topic == null) {
                    return -1;
                }
                long seq = ByteBuffer.wrap(sub.recv()).getLong();
                sub.recv();
                return seq;
            },
            () -> "simulator counters " + sim.stats().toJson().get("counters"));
        sub.setReceiveTimeOut(10_000);
    }

    static void warmUp(EngineSimulator sim, ZMQ.Socket sub) {
        warmUp(sim, sub, 0);
    }

    /** One block of token ids no test prompt uses (tests use {@link #warmPrompt} from 90,000 up). */
    static String handshakePrompt(int i) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 16; t++) {
            sb.append(t == 0 ? "" : ",").append(1_000_000 + i * 16 + t);
        }
        return sb.append(']').toString();
    }

    static String warmPrompt(int i) {
        StringBuilder sb = new StringBuilder("[");
        for (int t = 0; t < 16; t++) {
            sb.append(t == 0 ? "" : ",").append(90_000 + i * 16 + t);
        }
        return sb.append(']').toString();
    }

    @Test
    void vllmArrayEventsMatchTheHashContractAndHitsShowInUsage() throws Exception {
        int port = TestPorts.free();
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).kvEvents("tcp://127.0.0.1:" + port).kvEventsMode("bind")
            .cacheBlocks(1000);
        try (EngineSimulator sim = EngineSimulator.start(c); ZContext zmq = new ZContext()) {
            ZMQ.Socket sub = subscriber(zmq, "tcp://127.0.0.1:" + port, false);
            warmUp(sim, sub);
            int[] prompt = new int[40];
            for (int i = 0; i < prompt.length; i++) {
                prompt[i] = 1000 + i;
            }
            String body = "{\"model\":\"m\",\"prompt\":" + java.util.Arrays.toString(prompt).replace(" ", "")
                + ",\"max_tokens\":1}";
            JsonNode first = json(post(sim, "/v1/completions", body));
            assertEquals(0, first.at("/usage/prompt_tokens_details/cached_tokens").asInt());
            Message m = receive(sub);
            assertEquals("kv", m.topic());
            ArrayValue payload = m.payload().asArrayValue();
            assertEquals(3, payload.size());
            assertTrue(payload.get(0).isFloatValue(), "ts float64");
            assertEquals(0, payload.get(2).asIntegerValue().asInt(), "dp rank");
            ArrayValue events = payload.get(1).asArrayValue();
            assertEquals(1, events.size(), "vLLM announces the run of new blocks in one event");
            ArrayValue stored = events.get(0).asArrayValue();
            assertEquals("BlockStored", stored.get(0).asStringValue().asString());
            long[] expected = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(prompt, 16, null);
            assertEquals(2, expected.length);
            ArrayValue hashes = stored.get(1).asArrayValue();
            for (int i = 0; i < 2; i++) {
                // vLLM keys travel as unsigned integers: same 64-bit pattern
                assertEquals(expected[i], hashes.get(i).asIntegerValue().asBigInteger().longValue());
                assertTrue(hashes.get(i).asIntegerValue().asBigInteger().signum() >= 0);
            }
            assertTrue(stored.get(2).isNilValue(), "first block: no parent");
            assertEquals(32, stored.get(3).asArrayValue().size());
            assertEquals(1000, stored.get(3).asArrayValue().get(0).asIntegerValue().asInt());
            assertEquals(16, stored.get(4).asIntegerValue().asInt());
            assertEquals("GPU", stored.get(6).asStringValue().asString());

            JsonNode second = json(post(sim, "/v1/completions", body));
            assertEquals(32, second.at("/usage/prompt_tokens_details/cached_tokens").asInt());
            assertEquals(40, second.at("/usage/prompt_tokens").asInt());
            JsonNode recent = json(get(sim, "/sim/stats")).get("recent");
            JsonNode last = recent.get(recent.size() - 1);
            assertEquals(32, last.get("cached_tokens").asInt());
            assertEquals(1, sim.stats().get("cache_hit_requests"));

            // a longer prompt sharing the prefix: one new block, parent = last cached key
            int[] longer = java.util.Arrays.copyOf(prompt, 48);
            for (int i = 40; i < 48; i++) {
                longer[i] = 5000 + i;
            }
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + java.util.Arrays.toString(longer)
                .replace(" ", "") + ",\"max_tokens\":1}");
            Message m2 = receive(sub);
            assertEquals(m.seq() + 1, m2.seq(), "seq +1 per batch");
            ArrayValue stored2 = m2.payload().asArrayValue().get(1).asArrayValue().get(0).asArrayValue();
            assertEquals(expected[1], stored2.get(2).asIntegerValue().asBigInteger().longValue());
            long[] longerKeys = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(longer, 16, null);
            assertEquals(longerKeys[2], stored2.get(1).asArrayValue().get(0).asIntegerValue().asBigInteger().longValue());
        }
    }

    @Test
    void evictionPublishesBlockRemovedAndMapForm() throws Exception {
        int port = TestPorts.free();
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).kvEvents("tcp://127.0.0.1:" + port).kvEventsMode("bind")
            .cacheBlocks(3).eventForm(EventForm.MAP);
        try (EngineSimulator sim = EngineSimulator.start(c); ZContext zmq = new ZContext()) {
            ZMQ.Socket sub = subscriber(zmq, "tcp://127.0.0.1:" + port, false);
            warmUp(sim, sub);
            // fill the 3-block cache with known single-block prompts, then ask for 2 new blocks
            for (int i = 200; i < 203; i++) {
                post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + warmPrompt(i) + ",\"max_tokens\":1}");
                receive(sub);
            }
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + warmPrompt(500).replace("]", ","
                + warmPrompt(501).substring(1)) + ",\"max_tokens\":1}");
            Message m = receive(sub);
            ArrayValue events = m.payload().asArrayValue().get(1).asArrayValue();
            MapValue removed = events.get(0).asMapValue();
            assertEquals("BlockRemoved", removed.map().get(ValueFactory.newString("type")).asStringValue().asString());
            ArrayValue removedKeys = removed.map().get(ValueFactory.newString("block_hashes")).asArrayValue();
            assertEquals(2, removedKeys.size());
            long[] oldest = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(
                java.util.stream.IntStream.range(0, 16).map(t -> 90_000 + 200 * 16 + t).toArray(), 16, null);
            assertEquals(oldest[0], removedKeys.get(0).asIntegerValue().asBigInteger().longValue(), "LRU first");
            MapValue stored = events.get(1).asMapValue();
            assertEquals("BlockStored", stored.map().get(ValueFactory.newString("type")).asStringValue().asString());
            assertEquals(2, stored.map().get(ValueFactory.newString("block_hashes")).asArrayValue().size());
            assertEquals(16, stored.map().get(ValueFactory.newString("block_size")).asIntegerValue().asInt());
            assertTrue(sim.stats().get("blocks_evicted") >= 1);
            assertEquals(3, sim.cachedBlocks(0));
        }
    }

    @Test
    void sglangOneEventPerPageSignedKeysClearedOnRestartAndReplay() throws Exception {
        int port = TestPorts.free(2);
        int replayPort = port + 1;
        // concrete host + auto mode: the engine CONNECTS and the subscriber binds (engine-contracts §2.1)
        SimulatorConfig c = SimHttp.fast(Dialect.SGLANG).blockSize(4).kvEvents("tcp://127.0.0.1:" + port)
            .kvReplay("tcp://127.0.0.1:" + replayPort);
        try (ZContext zmq = new ZContext()) {
            ZMQ.Socket sub = subscriber(zmq, "tcp://127.0.0.1:" + port, true);
            try (EngineSimulator sim = EngineSimulator.start(c)) {
                warmUp(sim, sub);
                int[] prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
                post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":[1,2,3,4,5,6,7,8,9],\"max_tokens\":1}");
                Message m = receive(sub);
                ArrayValue events = m.payload().asArrayValue().get(1).asArrayValue();
                assertEquals(2, events.size(), "one BlockStored per page");
                long[] expected = BlockKeyer.forAlgo("sha256_sglang", "").blockKeys(prompt, 4, null);
                for (int i = 0; i < 2; i++) {
                    ArrayValue e = events.get(i).asArrayValue();
                    assertEquals(expected[i], e.get(1).asArrayValue().get(0).asIntegerValue().asLong());
                    assertEquals(4, e.get(3).asArrayValue().size());
                }
                assertEquals(expected[0], events.get(1).asArrayValue().get(2).asIntegerValue().asLong());

                // replay from seq 0: AllBlocksCleared at startup is batch 0
                ZMQ.Socket dealer = zmq.createSocket(SocketType.DEALER);
                dealer.setReceiveTimeOut(10_000);
                ZmqConnect.connect(dealer, "tcp://127.0.0.1:" + replayPort);
                dealer.sendMore(new byte[0]);
                dealer.send(KvEventPublisher.seqBytes(0));
                List<Long> seqs = new ArrayList<>();
                Value firstPayload = null;
                for (int i = 0; i < 1000; i++) {
                    byte[] delimiter = dealer.recv();
                    assertNotNull(delimiter, () -> "no replay answer: " + sim.stats().toJson().get("counters"));
                    assertEquals(0, delimiter.length, "empty delimiter");
                    long seq = ByteBuffer.wrap(dealer.recv()).getLong();
                    byte[] payload = dealer.recv();
                    if (seq == -1) {
                        assertEquals(0, payload.length);
                        break;
                    }
                    if (firstPayload == null) {
                        firstPayload = MessagePack.newDefaultUnpacker(payload).unpackValue();
                    }
                    seqs.add(seq);
                }
                assertEquals(0L, seqs.get(0));
                assertEquals(m.seq(), seqs.get(seqs.size() - 1));
                assertEquals("AllBlocksCleared", firstPayload.asArrayValue().get(1).asArrayValue().get(0)
                    .asArrayValue().get(0).asStringValue().asString());

                // restart: seq starts over at 0 with AllBlocksCleared, cache empty
                assertEquals(200, post(sim, "/sim/restart", "{}").statusCode());
                Message cleared = receive(sub);
                assertEquals(0, cleared.seq());
                assertEquals(0, sim.cachedBlocks(0));
                JsonNode again = json(post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":[1,2,3,4,5,6,7,8,9],\"max_tokens\":1}"));
                assertEquals(0, again.at("/usage/prompt_tokens_details/cached_tokens").asInt());
            }
        }
    }

    @Test
    void resetPrefixCachePublishesAllBlocksClearedWithTheNextSeq() throws Exception {
        int port = TestPorts.free();
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).kvEvents("tcp://127.0.0.1:" + port).kvEventsMode("bind");
        try (EngineSimulator sim = EngineSimulator.start(c); ZContext zmq = new ZContext()) {
            ZMQ.Socket sub = subscriber(zmq, "tcp://127.0.0.1:" + port, false);
            warmUp(sim, sub);
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + warmPrompt(300) + ",\"max_tokens\":1}");
            Message stored = receive(sub);
            assertEquals(200, post(sim, "/reset_prefix_cache", "").statusCode());
            Message cleared = receive(sub);
            assertEquals(stored.seq() + 1, cleared.seq(), "same process: seq continues");
            assertEquals("AllBlocksCleared", cleared.payload().asArrayValue().get(1).asArrayValue().get(0).asArrayValue()
                .get(0).asStringValue().asString());
            assertEquals(0, sim.cachedBlocks(0));
            assertEquals(404, post(sim, "/flush_cache", "").statusCode(), "SGLang's route, not vLLM's");
        }
    }

    @Test
    void dpRanksPublishOnPortPlusRank() throws Exception {
        int port = TestPorts.free(2); // rank r publishes on port + r
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).dpRanks(2).kvEvents("tcp://127.0.0.1:" + port)
            .kvEventsMode("bind");
        try (EngineSimulator sim = EngineSimulator.start(c); ZContext zmq = new ZContext()) {
            ZMQ.Socket sub1 = subscriber(zmq, "tcp://127.0.0.1:" + (port + 1), false);
            warmUp(sim, sub1, 1);
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + warmPrompt(0) + ",\"max_tokens\":1}",
                "x-data-parallel-rank", "1");
            Message got = receive(sub1);
            assertEquals(sim.lastEventSeq(1), got.seq(), "the batch of the request pinned to rank 1");
            assertEquals(1, got.payload().asArrayValue().get(2).asIntegerValue().asInt(), "dp rank in the payload");
            assertEquals(400, post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":\"x\"}",
                "x-data-parallel-rank", "2").statusCode());
            assertTrue(sim.cachedBlocks(1) > 0, "pinned requests were cached on rank 1");
            assertEquals(0, sim.cachedBlocks(0), "and nothing on rank 0");
        }
    }
}
