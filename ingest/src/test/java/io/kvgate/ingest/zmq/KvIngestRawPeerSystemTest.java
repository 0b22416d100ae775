package io.kvgate.ingest.zmq;

import static io.kvgate.ingest.zmq.TestEngine.batch;
import static io.kvgate.ingest.zmq.TestEngine.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexReader;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZMQ;

/**
 * KV ingest against raw ZMTP peers that break JeroMQ (review B-1, B-2, B-4), on loopback with the real clock. Each
 * test keeps a second subscription fed by a real JeroMQ publisher and asserts that its events still arrive after the
 * attack: the ingest's ZeroMQ context is shared, so one wedged I/O thread would stop them all.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class KvIngestRawPeerSystemTest {
    /** The review's frame header: flags 0x02 (long frame), then a 64-bit size with the top bit set. */
    private static final long NEGATIVE_SIZE = 0x80000000F1C7A00FL;

    private final BlockIndex index = new BlockIndex(1 << 14, 16);
    private final BlockIndexReader reader = index.newReader();
    private KvEventIngest ingest;
    private final List<AutoCloseable> closeables = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        if (ingest != null) {
            // On a daemon thread with a bound: closing a context whose I/O thread is wedged (the defect these tests
            // look for) never returns, and must fail the test instead of hanging the test JVM.
            java.util.concurrent.atomic.AtomicBoolean stopped = new java.util.concurrent.atomic.AtomicBoolean();
            Thread stopper = new Thread(() -> stopped.set(ingest.stop(10_000)), "test-ingest-stop");
            stopper.setDaemon(true);
            stopper.start();
            stopper.join(15_000);
            assertTrue(stopped.get(), "the ingest stopped and closed its ZeroMQ context");
        }
        for (int i = closeables.size() - 1; i >= 0; i--) {
            closeables.get(i).close();
        }
        index.close();
    }

    private IngestConfig fastRetry() {
        return IngestConfig.defaults().withRetry(TimeUnit.MILLISECONDS.toNanos(50), TimeUnit.MILLISECONDS.toNanos(200));
    }

    private void pumpUntil(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(2);
            if (cond.getAsBoolean()) {
                return;
            }
        }
        fail("not reached: " + what + " " + state());
    }

    private String state() {
        return "status=" + ingest.status() + " refused=" + ingest.refusedFrames() + " ended=" + ingest.sessionsEnded()
            + " io errors=" + ingest.ioThreadErrors() + " last=" + ingest.lastAgentError();
    }

    private SubscriberStatus status(int endpointId) {
        for (SubscriberStatus s : ingest.status()) {
            if (s.endpointId() == endpointId && s.rank() == 0) {
                return s;
            }
        }
        throw new AssertionError("no subscriber " + endpointId + " in " + ingest.status());
    }

    private TestEngine engine(String pubUri, boolean pubConnects) {
        TestEngine e = new TestEngine(pubUri, pubConnects, null, "kv", false);
        closeables.add(e);
        return e;
    }

    /** The slow-joiner handshake with a marker block (see KvIngestHostileSystemTest.subscribedPublisher). */
    private void handshake(TestEngine e, int endpointId, long marker) {
        ZmqHandshake.await("publisher -> endpoint " + endpointId, Duration.ofSeconds(30),
            () -> e.publish(batch(stored(marker)), false),
            () -> {
                ingest.doWork(1);
                return reader.holds(endpointId, marker) ? status(endpointId).lastSeq() : -1;
            },
            this::state);
    }

    /** Publishes {@code key} and waits until the ingest has applied it: the real publisher's events still arrive. */
    private void stillFilling(TestEngine e, int endpointId, long key) {
        e.publish(batch(stored(key)), false);
        pumpUntil("block " + key + " of endpoint " + endpointId + " indexed", () -> reader.holds(endpointId, key));
    }

    private static KvEventSource connectSource(int id, int port) {
        return new KvEventSource(id, "tcp://127.0.0.1:" + port, 1, null, false, "kv", KeyMode.ENGINE, "r1", List.of(),
            null);
    }

    private static KvEventSource bindSource(int id, int port, List<String> allow) {
        return new KvEventSource(id, "tcp://127.0.0.1:" + port, 1, null, true, "kv", KeyMode.ENGINE, "r1", allow, null);
    }

    /** ZMTP 3.0 greeting (NULL mechanism, as server or not) + READY with the given socket type. */
    static byte[] zmtpGreetingAndReady(String socketType, boolean asServer) {
        ByteBuffer b = ByteBuffer.allocate(128);
        b.put((byte) 0xFF).put(new byte[8]).put((byte) 0x7F).put((byte) 3).put((byte) 0);
        byte[] mech = new byte[20];
        System.arraycopy("NULL".getBytes(StandardCharsets.US_ASCII), 0, mech, 0, 4);
        b.put(mech).put((byte) (asServer ? 1 : 0)).put(new byte[31]);
        byte[] name = "Socket-Type".getBytes(StandardCharsets.US_ASCII);
        byte[] value = socketType.getBytes(StandardCharsets.US_ASCII);
        int body = 1 + 5 + 1 + name.length + 4 + value.length;
        b.put((byte) 0x04).put((byte) body).put((byte) 5).put("READY".getBytes(StandardCharsets.US_ASCII));
        b.put((byte) name.length).put(name).putInt(value.length).put(value);
        b.flip();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    /** A long-frame header (flags 0x02, 8-byte size): only the header is ever sent. */
    static byte[] longFrameHeader(long size) {
        return ByteBuffer.allocate(9).put((byte) 0x02).putLong(size).array();
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = new byte[a.length + b.length];
        System.arraycopy(a, 0, out, 0, a.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Reads until the gateway closes the connection, pumping the ingest meanwhile; false if it stayed open. */
    private boolean closedByGateway(Socket raw) throws IOException {
        raw.setSoTimeout(20);
        InputStream in = raw.getInputStream();
        byte[] sink = new byte[4096];
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(1);
            try {
                if (in.read(sink) < 0) {
                    return true;
                }
            } catch (SocketTimeoutException e) {
                // still open: keep pumping
            } catch (IOException e) {
                return true; // reset by the gateway
            }
        }
        return false;
    }

    @Test
    void negativeFrameSizeFromTheEngineInConnectModeIsRefusedAndTheOtherSubscriptionKeepsFilling() throws Exception {
        int rawPort = TestPorts.free(1);
        int goodPort = TestPorts.free(1);
        ServerSocket fakeEngine = new ServerSocket(rawPort, 8, InetAddress.getLoopbackAddress());
        closeables.add(fakeEngine);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, fastRetry());
        ingest.addEndpoint(connectSource(2, goodPort));
        TestEngine good = engine("tcp://127.0.0.1:" + goodPort, false);
        handshake(good, 2, 20);

        ingest.addEndpoint(connectSource(1, rawPort));
        ingest.doWork(1);
        fakeEngine.setSoTimeout(100);
        Socket raw = acceptPumping(fakeEngine);
        raw.getOutputStream().write(concat(zmtpGreetingAndReady("PUB", false), longFrameHeader(NEGATIVE_SIZE)));
        raw.getOutputStream().flush();
        pumpUntil("the frame is refused", () -> ingest.refusedFrames() > 0);

        stillFilling(good, 2, 21);
        stillFilling(good, 2, 22);
        // The engine's stream is out of step: the connection is dropped and the subscription reopened.
        assertTrue(closedByGateway(raw), "the gateway drops the engine connection that sent the frame");
        raw.close();
        Socket again = acceptPumping(fakeEngine);
        again.close();
        assertTrue(status(1).errors().getOrDefault("protocol", 0L) >= 1, status(1).toString());
        assertTrue(status(1).lastError().contains("-238575601"), status(1).lastError());
        assertEquals(0, ingest.ioThreadErrors(), "JeroMQ's I/O thread never saw an exception: " + state());
        stillFilling(good, 2, 23);
    }

    private Socket acceptPumping(ServerSocket server) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(1);
            try {
                Socket s = server.accept();
                closeables.add(s);
                return s;
            } catch (SocketTimeoutException e) {
                // the subscriber has not connected yet
            }
        }
        throw new AssertionError("the subscriber never connected: " + state());
    }

    @Test
    void negativeFrameSizeFromAPeerTheAllowListRefusesOnABoundSocketIsDroppedAndIngestGoesOn() throws Exception {
        int boundPort = TestPorts.free(1);
        int goodPort = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, fastRetry());
        ingest.addEndpoint(bindSource(3, boundPort, List.of("10.9.9.9")));
        ingest.addEndpoint(connectSource(2, goodPort));
        TestEngine good = engine("tcp://127.0.0.1:" + goodPort, false);
        handshake(good, 2, 20);
        pumpUntil("bound", () -> status(3).state().equals("connecting"));

        for (int round = 0; round < 3; round++) {
            try (Socket raw = new Socket(InetAddress.getLoopbackAddress(), boundPort)) {
                raw.getOutputStream().write(concat(zmtpGreetingAndReady("PUB", false), longFrameHeader(NEGATIVE_SIZE)));
                raw.getOutputStream().flush();
                assertTrue(closedByGateway(raw), "the peer is dropped");
            }
            stillFilling(good, 2, 30 + round);
        }
        assertTrue(ingest.refusedFrames() >= 1, state());
        assertEquals("connecting", status(3).state(), "the bound socket stays open for its allowed peers");
        assertEquals(0, ingest.ioThreadErrors(), state());
    }

    @Test
    void oversizeFrameEndsTheEngineConnectionThenTheSubscriptionReopensAndEventsResume() {
        int port = TestPorts.free(1);
        int goodPort = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, fastRetry().withFrames(64 << 10, 64L << 20));
        ingest.addEndpoint(connectSource(4, port));
        ingest.addEndpoint(connectSource(2, goodPort));
        TestEngine e = engine("tcp://127.0.0.1:" + port, false);
        TestEngine good = engine("tcp://127.0.0.1:" + goodPort, false);
        handshake(e, 4, 40);
        handshake(good, 2, 20);
        e.publish(batch(stored(41, 42)), false);
        pumpUntil("blocks 41, 42 indexed", () -> reader.holds(4, 42));
        assertEquals("up", status(4).state());

        // One batch over max_frame_bytes: JeroMQ ends the session for good (EMSGSIZE is a protocol error).
        e.publish(new byte[(64 << 10) + 1], false);
        pumpUntil("the feed is declared lost and the rank cleared", () -> !reader.holds(4, 42));
        assertTrue(ingest.sessionsEnded() >= 1, state());
        assertFalse(reader.holds(4, 41), "the rank's blocks are cleared while its feed is down");
        assertTrue(status(4).errors().getOrDefault("protocol", 0L) >= 1, status(4).toString());
        assertTrue(reader.holds(2, 20), "the other endpoint is untouched");

        // Reopened with the retry backoff: the same publisher's next batches are indexed again.
        handshake(e, 4, 43);
        e.publish(batch(stored(44)), false);
        pumpUntil("block 44 indexed after the reopening", () -> reader.holds(4, 44));
        assertEquals("up", status(4).state(), status(4).toString());
        assertTrue(status(4).connected());
        stillFilling(good, 2, 21);
    }

    private static long directBytes() {
        for (BufferPoolMXBean b : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (b.getName().equals("direct")) {
                return b.getMemoryUsed();
            }
        }
        throw new AssertionError("no direct buffer pool");
    }

    @Test
    void silentPeersOnABoundSocketCostLittleDirectMemoryAndAreCappedPerSocket() throws Exception {
        int boundPort = TestPorts.free(1);
        int goodPort = TestPorts.free(1);
        int peers = 32;
        // The old 4 MiB SO_RCVBUF, on purpose: a bound socket must not reserve it per peer whatever it is set to.
        IngestConfig config = fastRetry().withSocketReceiveBuffer(4 << 20).withMaxPeersPerBindSocket(4);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, config);
        ingest.addEndpoint(bindSource(5, boundPort, List.of()));
        ingest.addEndpoint(connectSource(2, goodPort));
        TestEngine good = engine("tcp://127.0.0.1:" + goodPort, false);
        handshake(good, 2, 20);
        pumpUntil("bound", () -> status(5).state().equals("connecting"));

        long before = directBytes();
        List<Socket> silent = new ArrayList<>();
        for (int i = 0; i < peers; i++) {
            Socket raw = new Socket(InetAddress.getLoopbackAddress(), boundPort);
            closeables.add(raw);
            silent.add(raw);
            raw.getOutputStream().write(zmtpGreetingAndReady("PUB", false));
            raw.getOutputStream().flush();
            ingest.doWork(1);
        }
        pumpUntil("every peer answered by ZAP", () -> ingest.zapAllowed() + ingest.zapDenied() >= peers);
        long grown = directBytes() - before;
        System.out.printf("direct memory after %d silent handshaked peers on a bound socket: +%d bytes (%d per peer)%n",
            peers, grown, grown / peers);
        assertTrue(grown < peers * (256L << 10), "direct memory grew by " + grown + " bytes for " + peers + " peers");
        // Peers accepted while earlier ones wait for ZAP count too (the cap is on live connections): when all 32
        // are accepted before the first ZAP request is answered, none is admitted. Never more than 4.
        assertTrue(ingest.zapAllowed() <= 4, "at most max_peers_per_bind_socket peers are admitted: " + state());
        assertTrue(status(5).lastError().contains("max_peers_per_bind_socket"), status(5).lastError());
        stillFilling(good, 2, 21);
        for (Socket s : silent) {
            s.close();
        }
        // The flood locks nobody out for long: once its connections are gone, the next peer is admitted. The
        // closes reach the ingest asynchronously, so a peer may still be refused while they drain; retry (bounded).
        long allowedBefore = ingest.zapAllowed();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (ingest.zapAllowed() == allowedBefore) {
            assertTrue(System.nanoTime() - deadline < 0, "no peer admitted after the flood closed: " + state());
            long answered = ingest.zapAllowed() + ingest.zapDenied();
            Socket next = new Socket(InetAddress.getLoopbackAddress(), boundPort);
            closeables.add(next);
            next.getOutputStream().write(zmtpGreetingAndReady("PUB", false));
            next.getOutputStream().flush();
            pumpUntil("the next peer answered by ZAP", () -> ingest.zapAllowed() + ingest.zapDenied() > answered);
        }
    }

    @Test
    void connectingSubscriptionDirectMemoryFollowsTheConfiguredBudget() {
        int port = TestPorts.free(1);
        int subscriptions = 8;
        IngestConfig config = fastRetry();
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, config);
        TestEngine e = engine("tcp://127.0.0.1:" + port, false);
        ingest.doWork(1);
        long before = directBytes();
        for (int id = 0; id < subscriptions; id++) {
            ingest.addEndpoint(connectSource(6 + id, port));
        }
        for (int id = 0; id < subscriptions; id++) {
            handshake(e, 6 + id, 100 + id);
        }
        long grown = directBytes() - before;
        // Both ends are in this JVM: the publisher's side of each connection costs JeroMQ's minimum buffers.
        long publisherSide = subscriptions * IngestConfig.directBytesPerConnection(0);
        long perSubscription = (grown - publisherSide) / subscriptions;
        System.out.printf("direct memory per connecting subscription (SO_RCVBUF %d): %d bytes; budget %d%n",
            config.socketReceiveBufferBytes(), perSubscription, config.directBytesPerSubscription());
        assertTrue(perSubscription <= config.directBytesPerSubscription(),
            perSubscription + " bytes per subscription exceed the stated budget " + config.directBytesPerSubscription());
        assertTrue(config.directBytesPerSubscription() < 1L << 20, "the default budget is well under 1 MiB");
    }

    @Test
    void aDeadZeroMqThreadIsReplacedAndSubscriptionsReopenOnANewContext() throws IOException {
        int goodPort = TestPorts.free(1);
        int breakerPort = TestPorts.free(1);
        ingest = new KvEventIngest(index, NanoClock.SYSTEM, fastRetry());
        ingest.addEndpoint(connectSource(2, goodPort));
        TestEngine good = engine("tcp://127.0.0.1:" + goodPort, false);
        handshake(good, 2, 20);

        // An Error escaping JeroMQ's loop kills the context's only I/O thread (as a direct-memory OutOfMemoryError
        // would): a socket of the ingest's context whose allocator throws one on the first frame it decodes.
        ZMQ.Socket breaker = ingest.zmqContext().createSocket(SocketType.PULL);
        breaker.setLinger(0);
        breaker.setMsgAllocator(size -> {
            throw new OutOfMemoryError("test: the I/O thread dies here");
        });
        breaker.bind("tcp://127.0.0.1:" + breakerPort);
        // The peer is a raw socket writing a ZMTP greeting and READY, not a JeroMQ PUSH: a JeroMQ client left a
        // freshly connected channel unserved about once in 32 runs (its greeting never sent, the server's
        // 10-byte signature unread: seen with ss on a hung run), so the allocator was never reached.
        try (Socket push = new Socket(InetAddress.getLoopbackAddress(), breakerPort)) {
            push.getOutputStream().write(zmtpGreetingAndReady("PUSH", false));
            push.getOutputStream().flush();
            pumpUntil("the context is rebuilt", () -> ingest.contextRebuilds() > 0);
        }
        assertTrue(ingest.ioThreadErrors() >= 1, state());
        assertFalse(reader.holds(2, 20), "the rank fed by the dead context is cleared");
        assertTrue(status(2).lastError().contains("ZeroMQ thread died"), status(2).lastError());
        handshake(good, 2, 22);
        stillFilling(good, 2, 23);
        assertEquals("up", status(2).state());
    }
}
