package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.TestEngine.batch;
import static io.kvgate.ingest.zmq.TestEngine.cleared;
import static io.kvgate.ingest.zmq.TestEngine.removed;
import static io.kvgate.ingest.zmq.TestEngine.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Real JeroMQ PUB/ROUTER on 127.0.0.1 against the real ingest, pumped from the test thread with bounded loops. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("system")
class KvEventIngestSystemTest {
    /** Waits for the network (ZeroMQ delivery on a loaded machine), never for a timeout under test. */
    private static final Duration HANDSHAKE_TIMEOUT = Duration.ofSeconds(20);
    private static final Duration PUMP_TIMEOUT = Duration.ofSeconds(20);
    private final BlockIndex index = new BlockIndex(1 << 14, 16);
    private final BlockIndexReader reader = index.newReader();
    private KvEventIngest ingest;
    private final java.util.List<TestEngine> engines = new java.util.ArrayList<>();

    @AfterEach
    void tearDown() {
        if (ingest != null) {
            ingest.close();
        }
        engines.forEach(TestEngine::close);
        index.close();
    }

    private TestEngine engine(String pubUri, boolean pubConnects, String replayUri, boolean fiveFrame) {
        TestEngine e = new TestEngine(pubUri, pubConnects, replayUri, "kv", fiveFrame);
        engines.add(e);
        return e;
    }

    /** Pumps the ingest and the engines' replay sockets from the test thread until {@code cond} holds (bounded). */
    private void pumpUntil(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + PUMP_TIMEOUT.toNanos();
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(2);
            for (TestEngine e : engines) {
                e.pumpReplay();
            }
            if (cond.getAsBoolean()) {
                return;
            }
        }
        fail("not reached within " + PUMP_TIMEOUT.toSeconds() + " s: " + what + " status=" + ingest.status());
    }

    private SubscriberStatus status(int endpointId, int rank) {
        for (SubscriberStatus s : ingest.status()) {
            if (s.endpointId() == endpointId && s.rank() == rank) {
                return s;
            }
        }
        throw new AssertionError("no subscriber " + endpointId + "/" + rank);
    }

    /** PUB/SUB drops until the subscription has propagated: the shared slow-joiner handshake, pumped from here. */
    private void handshake(TestEngine e, int endpointId, int rank) {
        ZmqHandshake.await("engine " + endpointId + " rank " + rank + " subscribed", HANDSHAKE_TIMEOUT,
            () -> e.publish(batch(), false),
            () -> {
                ingest.doWork(1);
                e.pumpReplay();
                return status(endpointId, rank).lastSeq();
            },
            () -> "status=" + ingest.status() + "\nengine PUB " + e.pub.getLastEndpoint() + "\n"
                + TestPorts.socketsOn(Integer.parseInt(e.pub.getLastEndpoint().replaceAll(".*:", ""))));
    }

    private void awaitSeq(TestEngine e, int endpointId, int rank) {
        long last = e.sent.size() - 1L;
        pumpUntil("seq " + last + " applied", () -> status(endpointId, rank).lastSeq() == last);
    }

    @Test
    void twoRanksLoopbackIndexEqualsWhatWasPublished() {
        int port = TestPorts.free(2);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(3, "tcp://127.0.0.1:" + port, 2, null, false, "kv", KeyMode.ENGINE));
        TestEngine r0 = engine("tcp://127.0.0.1:" + port, false, null, false);
        TestEngine r1 = engine("tcp://127.0.0.1:" + (port + 1), false, null, false);
        pumpUntil("connected", () -> status(3, 0).connected() && status(3, 1).connected());
        handshake(r0, 3, 0);
        handshake(r1, 3, 1);

        Map<Long, int[]> model = new HashMap<>(); // key -> refs per rank
        for (long k = 1; k <= 50; k += 5) {
            r0.publish(batch(stored(k, k + 1, k + 2, k + 3, k + 4)), false);
            for (long x = k; x < k + 5; x++) {
                model.computeIfAbsent(x, q -> new int[2])[0]++;
            }
        }
        r0.publish(batch(removed(40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50)), false);
        for (long x = 40; x <= 50; x++) {
            model.get(x)[0]--;
        }
        for (int copy = 0; copy < 2; copy++) {
            for (long k = 30; k <= 60; k++) {
                r1.publish(batch(stored(k)), false);
                model.computeIfAbsent(k, q -> new int[2])[1]++;
            }
        }
        r1.publish(batch(removed(55, 56, 57, 58, 59, 60), removed(60)), false);
        for (long x = 55; x <= 60; x++) {
            model.get(x)[1]--;
        }
        model.get(60L)[1]--;
        awaitSeq(r0, 3, 0);
        awaitSeq(r1, 3, 1);

        long distinct = 0;
        for (long k = 0; k <= 70; k++) {
            int[] refs = model.get(k);
            boolean held = refs != null && (refs[0] > 0 || refs[1] > 0);
            distinct += held ? 1 : 0;
            assertEquals(held, reader.holds(3, k), "key " + k);
        }
        assertEquals(distinct, index.blocks(3));
        assertEquals(0, status(3, 0).gaps());
        assertEquals(0, status(3, 1).decodeErrors());
        assertTrue(status(3, 1).blockOps() >= 62 + 7);

        // per-rank clear: AllBlocksCleared on rank 0 keeps rank 1's blocks
        r0.publish(batch(cleared()), false);
        awaitSeq(r0, 3, 0);
        for (long k = 0; k <= 70; k++) {
            int[] refs = model.get(k);
            assertEquals(refs != null && refs[1] > 0, reader.holds(3, k), "after clear, key " + k);
        }
        assertEquals(1, status(3, 0).clears());
    }

    @Test
    void socketReceiveBufferIsSetOnTheSubAndReplaySocketsOrLeftToTheKernel() {
        int port = TestPorts.free(2);
        KvEventSource src = new KvEventSource(1, "tcp://127.0.0.1:" + port, 1, "tcp://127.0.0.1:" + (port + 1), false,
            "kv", KeyMode.ENGINE);
        try (org.zeromq.ZContext ctx = new org.zeromq.ZContext(1)) {
            int kernelDefault = ctx.createSocket(org.zeromq.SocketType.SUB).getReceiveBufferSize();
            RankSubscriber s = new RankSubscriber(src, 0);
            s.open(ctx, IngestConfig.defaults().withSocketReceiveBuffer(3 << 20), src.kvEventsUri(), src.replayUri());
            assertEquals(3 << 20, s.sub.getReceiveBufferSize());
            assertEquals(3 << 20, s.dealer.getReceiveBufferSize());
            s.close();
            RankSubscriber k = new RankSubscriber(src, 0);
            k.open(ctx, IngestConfig.defaults().withSocketReceiveBuffer(0), src.kvEventsUri(), src.replayUri());
            assertEquals(kernelDefault, k.sub.getReceiveBufferSize(), "0: SO_RCVBUF not set (kernel autotuning)");
            assertEquals(kernelDefault, k.dealer.getReceiveBufferSize());
            k.close();
        }
    }

    /**
     * An engine that leaves as its endpoint is removed (or its subscriber reopened after a failure): the SUB being
     * torn down sees the peer disconnect. With a socket monitor, JeroMQ wrote that DISCONNECTED event to the
     * monitor's PAIR with a blocking send from its I/O thread after the reading end was closed, and the I/O thread
     * never returned: the other endpoints' sockets went silent, new subscribers stayed {@code connecting}, the
     * context's close hung (about one round in 25 on a loaded machine; the I/O thread's stack in
     * {@code SocketBase.send} from {@code StreamEngine.error}). Connection events are now counted by an event hook.
     */
    @Test
    void endpointsLeavingAsTheirEnginesStopNeverStallIngestForTheOthers() {
        String stableUri = "tcp://127.0.0.1:" + TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(3, stableUri, 1, null, false, "kv", KeyMode.ENGINE));
        TestEngine stable = engine(stableUri, false, null, false);
        handshake(stable, 3, 0);
        for (int round = 0; round < 60; round++) {
            String uri = "tcp://127.0.0.1:" + TestPorts.free(1);
            TestEngine leaving = new TestEngine(uri, false, null, "kv", false); // its own context: closes on its own
            try {
                ingest.addEndpoint(new KvEventSource(4, uri, 1, null, false, "kv", KeyMode.ENGINE));
                int r = round;
                pumpUntil("round " + r + ": the new engine's subscriber is up", () -> status(4, 0).connected()
                    && "up".equals(status(4, 0).state()));
                ingest.removeEndpoint(4);
                ingest.doWork(0); // the subscriber closes...
            } finally {
                leaving.close(); // ...while its engine goes away
            }
        }
        stable.publish(batch(stored(77)), false);
        awaitSeq(stable, 3, 0);
        assertTrue(reader.holds(3, 77), "the endpoint that stayed is still ingested");
    }

    @ParameterizedTest(name = "fiveFrameReplay={0}")
    @ValueSource(booleans = {false, true})
    void gapIsFilledByReplay(boolean fiveFrame) {
        int port = TestPorts.free(2);
        String live = "tcp://127.0.0.1:" + port;
        String replay = "tcp://127.0.0.1:" + (port + 1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(1, live, 1, replay, false, "kv", KeyMode.ENGINE));
        TestEngine e = engine(live, false, replay, fiveFrame);
        handshake(e, 1, 0);
        SubscriberStatus before = status(1, 0);

        e.publish(batch(stored(100)), false);
        e.publish(batch(stored(101), removed(100)), true); // lost on the wire
        e.publish(batch(stored(102)), false);
        e.publish(batch(stored(103)), false);
        awaitSeq(e, 1, 0);

        assertFalse(reader.holds(1, 100), "the lost batch's removal was replayed");
        assertTrue(reader.holds(1, 101));
        assertTrue(reader.holds(1, 102));
        assertTrue(reader.holds(1, 103));
        SubscriberStatus after = status(1, 0);
        assertEquals(1, after.gaps() - before.gaps());
        assertTrue(after.replays() - before.replays() >= 1);
        assertEquals(before.clears(), after.clears(), "a filled gap clears nothing");
        assertEquals(0, after.replayFailures());
        // live batches queued during the replay were recognised as duplicates, and the stream continues
        e.publish(batch(stored(104)), false);
        awaitSeq(e, 1, 0);
        assertTrue(reader.holds(1, 104));
        assertEquals(0, status(1, 0).restarts());
    }

    @Test
    void gapWithoutReplayClearsTheRank() {
        int port = TestPorts.free(1);
        String live = "tcp://127.0.0.1:" + port;
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(2, live, 1, null, false, "", KeyMode.ENGINE));
        TestEngine e = engine(live, false, null, false);
        handshake(e, 2, 0);
        e.publish(batch(stored(100)), false);
        e.publish(batch(removed(100)), true);
        e.publish(batch(stored(102)), false);
        awaitSeq(e, 2, 0);
        assertFalse(reader.holds(2, 100), "cleared: the lost batch might have removed it (it did)");
        assertTrue(reader.holds(2, 102));
        assertEquals(1, status(2, 0).gaps());
        assertEquals(1, status(2, 0).clears());
    }

    @Test
    void replayBufferThatMovedOnClearsAndKeepsWhatItHas() {
        int port = TestPorts.free(2);
        String live = "tcp://127.0.0.1:" + port;
        String replay = "tcp://127.0.0.1:" + (port + 1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(4, live, 1, replay, false, "kv", KeyMode.ENGINE));
        TestEngine e = engine(live, false, replay, false);
        handshake(e, 4, 0);
        e.publish(batch(stored(100)), false);
        long lost = e.publish(batch(removed(100)), true);
        e.publish(batch(stored(102)), true);
        e.bufferStartSeq = lost + 1; // the engine's buffer no longer holds the lost batch
        e.publish(batch(stored(103)), false);
        awaitSeq(e, 4, 0);
        pumpUntil("replay done", () -> status(4, 0).replays() >= 1 && status(4, 0).lastSeq() == e.sent.size() - 1);
        assertFalse(reader.holds(4, 100));
        assertTrue(reader.holds(4, 102), "replayed from what the buffer still had");
        assertTrue(reader.holds(4, 103));
        assertEquals(1, status(4, 0).replayFailures());
        assertTrue(status(4, 0).clears() >= 1);
    }

    @Test
    void seqGoingBackwardsIsARestartThatClears() {
        int port = TestPorts.free(1);
        String live = "tcp://127.0.0.1:" + port;
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(5, live, 1, null, false, "kv", KeyMode.ENGINE));
        TestEngine e = engine(live, false, null, false);
        handshake(e, 5, 0);
        e.publish(batch(stored(100), stored(101)), false);
        awaitSeq(e, 5, 0);
        assertTrue(reader.holds(5, 100));
        e.restart();
        e.publish(batch(stored(200)), false);
        pumpUntil("restart seen", () -> status(5, 0).restarts() == 1);
        assertFalse(reader.holds(5, 100));
        assertTrue(reader.holds(5, 200));
        assertEquals(1, index.blocks(5));
    }

    @Test
    void gatewayBindsForEnginesThatConnectAndEngineStartingLaterIsNotAnError() {
        int port = TestPorts.free(1);
        String uri = "tcp://127.0.0.1:" + port;
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(6, uri, 1, null, true, "kv", KeyMode.ENGINE));
        for (int i = 0; i < 20; i++) {
            ingest.doWork(1);
        }
        assertFalse(status(6, 0).connected(), "no engine yet");
        assertEquals(0, status(6, 0).decodeErrors());
        TestEngine e = engine(uri, true, null, false);
        pumpUntil("engine connected to the gateway", () -> status(6, 0).connected());
        handshake(e, 6, 0);
        e.publish(batch(stored(7, 8)), false);
        awaitSeq(e, 6, 0);
        assertTrue(reader.holds(6, 8));
    }

    @Test
    void malformedPayloadsAndShortMessagesAreCountedNotFatal() {
        int port = TestPorts.free(1);
        String live = "tcp://127.0.0.1:" + port;
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(7, live, 1, null, false, "kv", KeyMode.ENGINE));
        TestEngine e = engine(live, false, null, false);
        handshake(e, 7, 0);
        e.publish(batch(stored(1)), false);
        e.publish(new byte[] {(byte) 0x93, (byte) 0xc1, 1, 2}, false); // 0xc1 is never valid
        e.pub.sendMore(e.topic);
        e.pub.send(new byte[] {1, 2, 3}); // 2 frames: skipped
        e.publish(batch(stored(2)), false);
        awaitSeq(e, 7, 0);
        assertEquals(2, status(7, 0).decodeErrors());
        assertFalse(reader.holds(7, 1), "a malformed batch clears the rank");
        assertTrue(reader.holds(7, 2));
        assertEquals(1, ingest.shortMessages());
    }

    @Test
    void learnedKeyModeIndexesOwnHashesAndMapsRemovals() {
        int port = TestPorts.free(1);
        String live = "tcp://127.0.0.1:" + port;
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(8, live, 1, null, false, "kv", KeyMode.LEARNED));
        TestEngine e = engine(live, false, null, false);
        handshake(e, 8, 0);
        // engine keys are random-looking (unreproducible); tokens 1..6 at block size 2
        e.publish(batch(stored(Long.MIN_VALUE, 2, new int[] {1, 2, 3, 4}, -11L, 22L)), false);
        e.publish(batch(stored(22L, 2, new int[] {5, 6}, 33L)), false);
        e.publish(batch(stored(999L, 2, new int[] {7, 8}, 44L)), false); // parent never seen: skipped
        awaitSeq(e, 8, 0);
        Fmix64ChainedTokenHasher h = Fmix64ChainedTokenHasher.INSTANCE;
        int[] t = {1, 2, 3, 4, 5, 6};
        long k0 = h.blockKey(h.rootKey(), t, 0, 2);
        long k1 = h.blockKey(k0, t, 2, 2);
        long k2 = h.blockKey(k1, t, 4, 2);
        assertTrue(reader.holds(8, k0));
        assertTrue(reader.holds(8, k1));
        assertTrue(reader.holds(8, k2));
        assertFalse(reader.holds(8, 22L), "engine keys are not indexed in learned mode");
        assertEquals(3, index.blocks(8));
        assertEquals(1, ingest.learnedUnknownParents());
        e.publish(batch(removed(33L)), false);
        awaitSeq(e, 8, 0);
        assertFalse(reader.holds(8, k2));
        int[] out = new int[1];
        reader.longestPrefix(new long[] {k0, k1, k2}, 3, new int[] {8}, 1, out, null);
        assertEquals(2, out[0]);
    }

    @Test
    void replayTimeoutClearsAndBacksOff() {
        ManualClock clock = new ManualClock();
        int port = TestPorts.free(2);
        String live = "tcp://127.0.0.1:" + port;
        String replay = "tcp://127.0.0.1:" + (port + 1); // nothing listens: the replay never answers
        ingest = new KvEventIngest(index, clock);
        ingest.addEndpoint(new KvEventSource(9, live, 1, replay, false, "kv", KeyMode.ENGINE));
        TestEngine e = engine(live, false, null, false);
        // Seq 0 is never sent, so whichever batch reaches the subscriber first is mid-stream (seq >= 1) and starts a
        // replay that nothing answers. (Were seq 0 the first to land, after a subscription that joined before the
        // first publish, it would be applied in order and no replay would ever start.)
        e.publish(batch(), true);
        ingest.doWork(1); // applies addEndpoint: the subscriber exists from here on
        long deadline = System.nanoTime() + HANDSHAKE_TIMEOUT.toNanos();
        while (status(9, 0).replays() == 0) {
            if (System.nanoTime() - deadline > 0) {
                fail("no batch reached the subscriber within " + HANDSHAKE_TIMEOUT.toSeconds() + " s: " + ingest.status());
            }
            e.publish(batch(stored(50)), false);
            ingest.doWork(1);
        }
        assertEquals(1, status(9, 0).replays());
        clock.advance(2, TimeUnit.SECONDS);
        ingest.doWork(1);
        assertEquals(1, status(9, 0).replayFailures());
        // backoff: the next batches are applied without another replay
        e.publish(batch(stored(51)), false);
        pumpUntil("applied after backoff", () -> reader.holds(9, 51));
        assertEquals(1, status(9, 0).replays());
        removeEndpointForgetsItsBlocks(9, 51);
    }

    private void removeEndpointForgetsItsBlocks(int endpointId, long key) {
        ingest.removeEndpoint(endpointId);
        pumpUntil("endpoint removed", () -> ingest.status().isEmpty());
        assertFalse(reader.holds(endpointId, key));
        assertEquals(0, index.blocks(endpointId));
    }
}
