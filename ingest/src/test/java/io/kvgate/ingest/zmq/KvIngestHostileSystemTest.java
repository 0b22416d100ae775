package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.TestEngine.batch;
import static io.kvgate.ingest.zmq.TestEngine.cleared;
import static io.kvgate.ingest.zmq.TestEngine.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The ingest under failure and hostile input, over real loopback sockets (review H6, H7, M15, L12): subscriptions
 * that cannot be opened are retried on an injected clock while the others keep filling the index; frame-size bounds
 * hold against a raw peer; bind-mode peers are filtered by the ZAP allow-list; forged sequences are counted and the
 * index stays consistent; shutdown never leaves the ingest writing. Pumped from the test thread with bounded loops.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
@Tag("system")
class KvIngestHostileSystemTest {
    private static final long MS = 1_000_000L;
    private final BlockIndex index = new BlockIndex(1 << 14, 16);
    private final BlockIndexReader reader = index.newReader();
    private final ManualClock clock = new ManualClock();
    private KvEventIngest ingest;
    private final java.util.List<TestEngine> engines = new java.util.ArrayList<>();
    private final java.util.List<AutoCloseable> closeables = new java.util.ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        if (ingest != null) {
            assertTrue(ingest.stop(10_000));
        }
        engines.forEach(TestEngine::close);
        for (AutoCloseable c : closeables) {
            c.close();
        }
        index.close();
    }

    private TestEngine engine(String pubUri, boolean pubConnects) {
        TestEngine e = new TestEngine(pubUri, pubConnects, null, "kv", false);
        engines.add(e);
        return e;
    }

    private void pumpUntil(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(2);
            if (cond.getAsBoolean()) {
                return;
            }
        }
        fail("not reached: " + what + " status=" + ingest.status() + " zap allowed/denied=" + ingest.zapAllowed()
            + "/" + ingest.zapDenied() + " io errors=" + ingest.ioThreadErrors() + " last=" + ingest.lastAgentError());
    }

    private SubscriberStatus status(int endpointId) {
        for (SubscriberStatus s : ingest.status()) {
            if (s.endpointId() == endpointId && s.rank() == 0) {
                return s;
            }
        }
        throw new AssertionError("no subscriber " + endpointId + " in " + ingest.status());
    }

    /**
     * A publisher whose batches reach the ingest: the shared slow-joiner handshake ({@link ZmqHandshake}) with a
     * marker block as the throwaway batch, so the index holds the marker afterwards. A JeroMQ connect that stalls
     * (see {@link ZmqConnect}) is retried by the bounded ZMTP handshake timer on both sides, never by the test.
     */
    private TestEngine subscribedPublisher(String pubUri, boolean pubConnects, int endpointId, long marker) {
        TestEngine e = engine(pubUri, pubConnects);
        ZmqHandshake.await("publisher " + pubUri + " -> endpoint " + endpointId, Duration.ofSeconds(20),
            () -> e.publish(batch(stored(marker)), false),
            () -> {
                ingest.doWork(1);
                // Landed = this publisher's marker is indexed (another publisher may share the bound socket, so the
                // rank's last seq alone does not say whose batch arrived); then drained to its last seq.
                return reader.holds(endpointId, marker) ? status(endpointId).lastSeq() : -1;
            },
            () -> ingest.status() + " zap allowed/denied=" + ingest.zapAllowed() + "/" + ingest.zapDenied()
                + " io errors=" + ingest.ioThreadErrors() + " last=" + ingest.lastAgentError());
        assertTrue(reader.holds(endpointId, marker), "marker " + marker + " indexed");
        return e;
    }

    /**
     * Live messages the endpoint's subscription has taken off its socket: each is applied, dropped as a duplicate or
     * counted as undecodable (duplicates are counted per ingest; these tests run one endpoint at a time there).
     */
    private long messagesTaken(int endpointId) {
        SubscriberStatus s = status(endpointId);
        return s.batches() + s.decodeErrors() + ingest.duplicates();
    }

    private void awaitSeq(TestEngine e, int endpointId) {
        long last = e.sent.size() - 1L;
        pumpUntil("seq " + last + " applied", () -> status(endpointId).lastSeq() == last);
    }

    private static KvEventSource connectSource(int id, String uri) {
        return new KvEventSource(id, uri, 1, null, false, "kv", KeyMode.ENGINE, "r1", List.of(), null);
    }

    private static KvEventSource bindSource(int id, String uri, List<String> allow) {
        return new KvEventSource(id, uri, 1, null, true, "kv", KeyMode.ENGINE, "r1", allow, null);
    }

    @Test
    void unresolvableHostBesideAGoodOneRetriesWithBackoffAndSubscribesOnceItResolves() {
        int good = TestPorts.free(1);
        int later = TestPorts.free(1);
        java.util.concurrent.atomic.AtomicReference<String> lateIp = new java.util.concurrent.atomic.AtomicReference<>();
        HostResolver resolver = host -> {
            if (host.equals("kv-later.test") && lateIp.get() != null) {
                return lateIp.get();
            }
            throw new UnknownHostException("no such host (test resolver)");
        };
        ingest = new KvEventIngest(index, clock, IngestConfig.defaults(), resolver, Runnable::run);
        ingest.addEndpoint(connectSource(1, "tcp://127.0.0.1:" + good));
        ingest.addEndpoint(connectSource(2, "tcp://kv-later.test:" + later));
        TestEngine g = subscribedPublisher("tcp://127.0.0.1:" + good, false, 1, 10);
        g.publish(batch(stored(11, 12, 13)), false);
        awaitSeq(g, 1);
        assertTrue(reader.holds(1, 13), "the good endpoint fills while the other one cannot resolve");
        SubscriberStatus bad = status(2);
        assertEquals("retrying", bad.state());
        assertFalse(bad.up());
        assertTrue(bad.lastError().startsWith("resolve: "), bad.lastError());
        assertTrue(bad.lastError().contains("kv-later.test"), bad.lastError());
        assertEquals(Map.of("resolve", 1L), bad.errors());

        // Backoff on the injected clock: 100 ms, then 200 ms (doubling), nothing in between.
        clock.advanceNs(99 * MS);
        ingest.doWork(1);
        assertEquals(1L, status(2).errors().get("resolve"));
        clock.advanceNs(1 * MS);
        ingest.doWork(1);
        assertEquals(2L, status(2).errors().get("resolve"));
        clock.advanceNs(199 * MS);
        ingest.doWork(1);
        assertEquals(2L, status(2).errors().get("resolve"));

        lateIp.set("127.0.0.1");
        clock.advanceNs(1 * MS);
        ingest.doWork(1);
        assertTrue(List.of("connecting", "up").contains(status(2).state()), status(2).toString());
        TestEngine l = subscribedPublisher("tcp://127.0.0.1:" + later, false, 2, 20);
        l.publish(batch(stored(21, 22)), false);
        awaitSeq(l, 2);
        assertTrue(reader.holds(2, 22), "subscribed once the name resolved");
        assertEquals("up", status(2).state());
        assertTrue(reader.holds(1, 13), "the good endpoint was never disturbed");
        assertEquals(0, ingest.agentErrors());
    }

    @Test
    void bindPortInUseIsRetriedUntilThePortIsFree() throws Exception {
        int port = TestPorts.free(1);
        ServerSocket squatter = new ServerSocket();
        squatter.setReuseAddress(false);
        squatter.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), port));
        ingest = new KvEventIngest(index, clock);
        ingest.addEndpoint(bindSource(4, "tcp://127.0.0.1:" + port, List.of()));
        ingest.doWork(1);
        SubscriberStatus s = status(4);
        assertEquals("retrying", s.state());
        assertTrue(s.lastError().startsWith("bind: bind tcp://127.0.0.1:" + port), s.lastError());
        assertEquals(Map.of("bind", 1L), s.errors());

        squatter.close();
        clock.advanceNs(100 * MS);
        ingest.doWork(1);
        assertEquals("connecting", status(4).state(), status(4).toString());
        TestEngine e = subscribedPublisher("tcp://127.0.0.1:" + port, true, 4, 40);
        e.publish(batch(stored(41)), false);
        awaitSeq(e, 4);
        assertTrue(reader.holds(4, 41));
        assertEquals("up", status(4).state());
    }

    private static long directBytes() {
        for (BufferPoolMXBean b : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (b.getName().equals("direct")) {
                return b.getMemoryUsed();
            }
        }
        throw new AssertionError("no direct buffer pool");
    }

    /** ZMTP 3.0 greeting (NULL mechanism) + READY(Socket-Type=PUB) + a frame header declaring {@code size} bytes. */
    private static byte[] zmtpHostilePub(long size) {
        ByteBuffer b = ByteBuffer.allocate(64 + 64 + 9);
        b.put((byte) 0xFF).put(new byte[8]).put((byte) 0x7F).put((byte) 3).put((byte) 0);
        byte[] mech = new byte[20];
        System.arraycopy("NULL".getBytes(StandardCharsets.US_ASCII), 0, mech, 0, 4);
        b.put(mech).put((byte) 0).put(new byte[31]);
        byte[] name = "Socket-Type".getBytes(StandardCharsets.US_ASCII);
        byte[] value = "PUB".getBytes(StandardCharsets.US_ASCII);
        int body = 1 + 5 + 1 + name.length + 4 + value.length;
        b.put((byte) 0x04).put((byte) body).put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII));
        b.put((byte) name.length).put(name).putInt(value.length).put(value);
        b.put((byte) 0x02).putLong(size); // a long message frame: only its 9-byte header is ever sent
        b.flip();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    @Test
    void rawPeerDeclaringA2GbFrameIsCutOffWithoutReservingMemoryAndIngestContinues() throws Exception {
        int port = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(bindSource(5, "tcp://127.0.0.1:" + port, List.of()));
        pumpUntil("bound", () -> status(5).state().equals("connecting"));
        long before = directBytes();
        for (int round = 0; round < 3; round++) {
            try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), port)) {
                raw.setSoTimeout(50);
                OutputStream out = raw.getOutputStream();
                out.write(zmtpHostilePub(2_000_000_000L));
                out.flush();
                InputStream in = raw.getInputStream();
                byte[] sink = new byte[4096];
                boolean closedByGateway = false;
                for (int i = 0; i < 2_000 && !closedByGateway; i++) {
                    ingest.doWork(1);
                    try {
                        closedByGateway = in.read(sink) < 0;
                    } catch (SocketTimeoutException e) {
                        // still open: keep pumping
                    } catch (java.io.IOException e) {
                        closedByGateway = true; // reset by the gateway
                    }
                }
                assertTrue(closedByGateway, "the gateway drops a peer that declares a frame above max_frame_bytes");
            }
        }
        long grown = directBytes() - before;
        assertTrue(grown < 32L << 20, "direct memory grew by " + grown + " bytes after three 2 GB frame headers");

        TestEngine e = subscribedPublisher("tcp://127.0.0.1:" + port, true, 5, 50);
        e.publish(batch(stored(51, 52)), false);
        awaitSeq(e, 5);
        assertTrue(reader.holds(5, 52), "ingest continues on the same bound socket");
    }

    @Test
    void bindModeAllowListRefusesOtherPeersThroughZap() {
        int port = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(bindSource(6, "tcp://127.0.0.1:" + port, List.of("10.9.9.0/24")));
        pumpUntil("bound", () -> status(6).state().equals("connecting"));
        TestEngine e = engine("tcp://127.0.0.1:" + port, true);
        pumpUntil("refused by ZAP", () -> ingest.zapDenied() > 0);
        for (int i = 0; i < 200; i++) {
            e.publish(batch(stored(61)), false);
            ingest.doWork(1);
        }
        assertFalse(reader.holds(6, 61), "a refused peer cannot inject events");
        assertEquals(-1, status(6).lastSeq());
        assertTrue(status(6).errors().get("denied") >= 1);
        assertTrue(status(6).lastError().contains("127.0.0.1"), status(6).lastError());
        assertEquals(0, ingest.zapAllowed());

        // Allow-list naming loopback: a peer from there is admitted.
        e.close();
        engines.remove(e);
        ingest.addEndpoint(bindSource(6, "tcp://127.0.0.1:" + port, List.of("127.0.0.0/8")));
        pumpUntil("re-bound", () -> status(6).state().equals("connecting"));
        TestEngine admitted = subscribedPublisher("tcp://127.0.0.1:" + port, true, 6, 60);
        assertTrue(ingest.zapAllowed() > 0);
        admitted.publish(batch(stored(62)), false);
        awaitSeq(admitted, 6);
        assertTrue(reader.holds(6, 62));
    }

    @Test
    void forgedSeqJumpsAndInterleavedPublishersAreCountedAndTheIndexStaysConsistent() {
        int port = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(bindSource(7, "tcp://127.0.0.1:" + port, List.of()));
        pumpUntil("bound", () -> status(7).state().equals("connecting"));
        TestEngine a = subscribedPublisher("tcp://127.0.0.1:" + port, true, 7, 9_001);
        TestEngine b = subscribedPublisher("tcp://127.0.0.1:" + port, true, 7, 9_002);
        // Both handshakes have drained (every throwaway message landed or was dropped by the PUB before the
        // subscription): from here the ingest takes exactly what is published, each message counted once.
        long takenBefore = messagesTaken(7);
        int published = 0;
        // Two publishers on one bound socket, each with its own seq; plus a forger jumping seq forward.
        for (int i = 0; i < 50; i++) {
            a.publish(batch(stored(1_000 + i)), false);
            b.publish(batch(stored(2_000 + i)), false);
            published += 2;
            if (i % 10 == 0) {
                b.sendLive(1_000_000L + i, batch(stored(3_000 + i)));
                published++;
            }
            ingest.doWork(0);
        }
        // Every message taken, b's included: none of b's can land after a's clear below (ZeroMQ fair-queues peers).
        long expected = takenBefore + published;
        pumpUntil("all " + published + " messages taken", () -> messagesTaken(7) == expected);
        SubscriberStatus s = status(7);
        assertTrue(s.restarts() + s.gaps() > 0, "seq jumps and interleaving are seen: " + s);
        assertTrue(s.clears() > 0, s.toString());
        // Consistency: the per-endpoint count equals what lookups see.
        long held = (reader.holds(7, 9_001) ? 1 : 0) + (reader.holds(7, 9_002) ? 1 : 0);
        for (long k : new long[] {1_000, 2_000, 3_000}) {
            for (int i = 0; i < 50; i++) {
                held += reader.holds(7, k + i) ? 1 : 0;
            }
        }
        assertEquals(held, index.blocks(7), "counted blocks equal the blocks lookups find");

        // One clean publisher again: a clear then fresh stores leave exactly those stores (no phantom).
        b.close();
        engines.remove(b);
        a.publish(batch(cleared(), stored(4_000, 4_001)), false);
        awaitSeq(a, 7);
        assertEquals(2, index.blocks(7));
        assertTrue(reader.holds(7, 4_001));
        assertFalse(reader.holds(7, 1_000));
    }

    @Test
    void bindModeWithCurveAdmitsOnlyPeersThatKnowTheServerKey() {
        org.zeromq.ZMQ.Curve.KeyPair server = org.zeromq.ZMQ.Curve.generateKeyPair();
        org.zeromq.ZMQ.Curve.KeyPair client = org.zeromq.ZMQ.Curve.generateKeyPair();
        int port = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM);
        ingest.addEndpoint(new KvEventSource(9, "tcp://127.0.0.1:" + port, 1, null, true, "kv", KeyMode.ENGINE, "r1",
            List.of(), new KvEventSource.Curve(server.publicKey, server.publicKey, server.secretKey)));
        pumpUntil("bound", () -> status(9).state().equals("connecting"));
        try (org.zeromq.ZContext pctx = new org.zeromq.ZContext(1)) {
            // A plain (NULL mechanism) publisher cannot complete the handshake: nothing it sends is indexed.
            org.zeromq.ZMQ.Socket plain = pctx.createSocket(org.zeromq.SocketType.PUB);
            plain.setLinger(0);
            plain.connect("tcp://127.0.0.1:" + port);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (System.nanoTime() - deadline < 0) {
                plain.sendMore("kv");
                plain.sendMore(TestEngine.be(0));
                plain.send(batch(stored(91)));
                ingest.doWork(1);
            }
            assertFalse(reader.holds(9, 91), "a peer without the server key delivers nothing");
            plain.close();
            // A CURVE client with the server's public key is admitted (through the ZAP handler) and delivers.
            org.zeromq.ZMQ.Socket pub = pctx.createSocket(org.zeromq.SocketType.PUB);
            pub.setLinger(0);
            pub.setCurveServerKey(org.zeromq.ZMQ.Curve.z85Decode(server.publicKey));
            pub.setCurvePublicKey(org.zeromq.ZMQ.Curve.z85Decode(client.publicKey));
            pub.setCurveSecretKey(org.zeromq.ZMQ.Curve.z85Decode(client.secretKey));
            ZmqConnect.connect(pub, "tcp://127.0.0.1:" + port); // bounded handshake: see ZmqConnect
            boolean delivered = false;
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            long seq = 0;
            while (!delivered && System.nanoTime() - deadline < 0) {
                pub.sendMore("kv");
                pub.sendMore(TestEngine.be(seq++));
                pub.send(batch(stored(92)));
                ingest.doWork(1);
                delivered = reader.holds(9, 92);
            }
            pub.close();
            assertTrue(delivered, "the CURVE publisher's events are indexed: " + ingest.status());
            assertTrue(ingest.zapAllowed() > 0, "CURVE peers pass through the ZAP handler too");
        }
    }

    @Test
    void stopWaitsForTheIngestThreadAndReportsOneThatDoesNotStop() throws Exception {
        CountDownLatch resolving = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        HostResolver stuck = host -> {
            resolving.countDown();
            try {
                release.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return "127.0.0.1";
        };
        // Direct executor: the resolver runs ON the ingest thread, so the thread is stuck inside a duty cycle.
        KvEventIngest stuckIngest = new KvEventIngest(index, clock, IngestConfig.defaults(), stuck, Runnable::run);
        stuckIngest.addEndpoint(connectSource(8, "tcp://slow.test:" + TestPorts.free(1)));
        stuckIngest.start();
        assertTrue(resolving.await(10, TimeUnit.SECONDS));
        assertFalse(stuckIngest.stop(100), "a thread still inside a duty cycle is reported, not abandoned");
        assertFalse(stuckIngest.stopped());
        release.countDown();
        assertTrue(stuckIngest.stop(10_000));
        assertTrue(stuckIngest.stopped(), "after stop() returns true the index may be closed (review L12)");
    }
}
