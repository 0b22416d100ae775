package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.testkit.TestPorts;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The idle ingest thread polls with a long timeout ({@link KvEventIngest#IDLE_POLL_MS}) only when nothing in its duty
 * cycle is due on a clock, and whatever can give it work wakes that poll at once. Each wake-up test blocks in a poll
 * of a minute and must return within {@link #WOKEN_WITHIN_S}: without the wake-up it would sit out the minute.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("system")
class KvEventIngestWakeTest {
    private static final long LONG_POLL_MS = 60_000;
    /** Bounds a wake-up on a loaded machine; far below the poll it interrupts. */
    private static final long WOKEN_WITHIN_S = 20;
    private final BlockIndex index = new BlockIndex(1 << 12, 16);
    private KvEventIngest ingest = new KvEventIngest(index, NanoClock.SYSTEM);
    private TestEngine engine;

    @AfterEach
    void tearDown() {
        ingest.close();
        if (engine != null) {
            engine.close();
        }
        index.close();
    }

    private static KvEventSource source(int id, String uri) {
        return new KvEventSource(id, uri, 1, null, false, "kv", KeyMode.ENGINE);
    }

    private SubscriberStatus status(int endpointId) {
        return ingest.status().stream().filter(s -> s.endpointId() == endpointId).findFirst()
            .orElseThrow(() -> new AssertionError("no subscriber for endpoint " + endpointId + ": " + ingest.status()));
    }

    private void pumpUntil(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() - deadline < 0) {
            ingest.doWork(2);
            ingest.doWork(0); // a cycle that opened a subscription leaves the poller to rebuild in the next
            if (cond.getAsBoolean()) {
                return;
            }
        }
        fail("not reached within 20 s: " + what + " status=" + ingest.status());
    }

    /** Runs one duty cycle with a minute-long poll on another thread; returns once it has returned (bounded). */
    private void longPollReturnsWhen(Runnable trigger) throws Exception {
        CompletableFuture<Integer> cycle = CompletableFuture.supplyAsync(() -> ingest.doWork(LONG_POLL_MS));
        trigger.run();
        int work = cycle.get(WOKEN_WITHIN_S, TimeUnit.SECONDS); // a TimeoutException here: the poll was not woken
        assertTrue(work > 0, "the woken cycle did the work it was woken for");
    }

    @Test
    void addingAnEndpointWakesALongPoll() throws Exception {
        ingest.doWork(0); // the poller exists, nothing to do
        assertEquals(0, ingest.doWork(0));
        longPollReturnsWhen(() -> ingest.addEndpoint(source(1, "tcp://127.0.0.1:" + TestPorts.free())));
        ingest.doWork(0); // the woken cycle may have returned before applying the change: the next one applies it
        assertEquals(0, ingest.pendingChanges());
        assertEquals(1, ingest.status().size());
    }

    @Test
    void removingAnEndpointWakesALongPoll() throws Exception {
        ingest.addEndpoint(source(2, "tcp://127.0.0.1:" + TestPorts.free()));
        pumpUntil("subscribed", () -> ingest.status().size() == 1 && ingest.pendingChanges() == 0);
        while (ingest.doWork(0) > 0) {
            // drain the wake-ups the commands left
        }
        longPollReturnsWhen(() -> ingest.removeEndpoint(2));
        ingest.doWork(0);
        assertEquals(0, ingest.pendingChanges());
        assertTrue(ingest.status().isEmpty(), ingest.status().toString());
    }

    @Test
    void aPeerConnectingWakesALongPollAndShowsAsConnected() throws Exception {
        int port = TestPorts.free();
        String uri = "tcp://127.0.0.1:" + port;
        ingest.addEndpoint(source(3, uri));
        pumpUntil("subscription open", () -> ingest.status().size() == 1 && ingest.pendingChanges() == 0);
        while (ingest.doWork(0) > 0) {
            // drain the wake-ups the command left
        }
        assertFalse(status(3).connected(), "nothing listens on " + uri + " yet");
        // The SUB retries its connect; the PUB bound now is found on a retry, and the connect event wakes the poll.
        longPollReturnsWhen(() -> engine = new TestEngine(uri, false, null, "kv", false));
        assertTrue(status(3).connected(), ingest.status().toString());
    }

    @Test
    void waitsLongOnlyAfterIdleCyclesAndWhenNothingIsDueOnAClock() throws IOException {
        // No subscription: nothing due, once the first cycle has built the poller.
        assertEquals(KvEventIngest.ACTIVE_POLL_MS, ingest.pollTimeoutMs(1000));
        ingest.doWork(0);
        assertEquals(KvEventIngest.ACTIVE_POLL_MS, ingest.pollTimeoutMs(KvEventIngest.IDLE_CYCLES_BEFORE_BACKOFF - 1));
        assertEquals(KvEventIngest.IDLE_POLL_MS, ingest.pollTimeoutMs(KvEventIngest.IDLE_CYCLES_BEFORE_BACKOFF));
        // A change not yet applied is due.
        ingest.addEndpoint(source(4, "tcp://127.0.0.1:" + TestPorts.free()));
        assertEquals(KvEventIngest.ACTIVE_POLL_MS, ingest.pollTimeoutMs(1000));
        // Open (connecting to nothing: JeroMQ retries on its own thread, the connect event wakes the agent): not due.
        pumpUntil("subscription open", () -> ingest.pendingChanges() == 0 && ingest.status().size() == 1);
        assertEquals(KvEventIngest.IDLE_POLL_MS, ingest.pollTimeoutMs(1000), ingest.status()::toString);
        // A subscription that cannot be opened (it binds a port another socket holds) waits for its retry: due.
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            ingest.addEndpoint(new KvEventSource(5, "tcp://127.0.0.1:" + taken.getLocalPort(), 1, null, true, "kv",
                KeyMode.ENGINE));
            pumpUntil("retrying", () -> ingest.status().stream().anyMatch(
                s -> s.endpointId() == 5 && "retrying".equals(s.state())));
            assertEquals(KvEventIngest.ACTIVE_POLL_MS, ingest.pollTimeoutMs(1000));
        }
        ingest.removeEndpoint(5);
        pumpUntil("endpoint 5 removed", () -> ingest.status().size() == 1 && ingest.pendingChanges() == 0);
        assertEquals(KvEventIngest.IDLE_POLL_MS, ingest.pollTimeoutMs(1000));
        // A TensorRT-LLM endpoint is polled over HTTP on a clock: due.
        ingest.addHttpEndpoint(new HttpKvEventSource(6, "http://127.0.0.1:1/kv_cache_events", 50_000_000L, 1, "r"));
        pumpUntil("http endpoint applied", () -> ingest.pendingChanges() == 0);
        assertEquals(KvEventIngest.ACTIVE_POLL_MS, ingest.pollTimeoutMs(1000));
    }
}
