package io.kvgate.ingest.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvgate.control.clock.ManualClock;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.Fmix64ChainedTokenHasher;
import io.kvgate.index.block.LearnedKeyMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The HTTP drain poller against a loopback server, every schedule on an injected clock: the poll interval, the
 * kept-alive connection, chunked and Content-Length bodies, and each failure (refused, non-200, timeout, a body
 * over {@code ingest.max_frame_bytes}) clearing the endpoint and retrying with backoff.
 */
@Tag("system")
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class HttpKvPollerSystemTest {
    private static final int EP = 1;
    private static final long POLL_NS = 50_000_000L;
    private static final long RETRY_NS = 100_000_000L;

    private final BlockIndex index = new BlockIndex(1 << 12, 4);
    private final ManualClock clock = new ManualClock();
    private final IngestConfig config = IngestConfig.defaults().withFrames(4096, 4096).withRetry(RETRY_NS, 8 * RETRY_NS);
    private final HttpKvPoller poller = new HttpKvPoller(index, clock, config,
        new IndexEventSink(index, Fmix64ChainedTokenHasher.INSTANCE, new LearnedKeyMap(1 << 10)), HostResolver.SYSTEM,
        Runnable::run, HttpKvPoller.DEFAULT_REQUEST_TIMEOUT_NS);

    private HttpServer server;
    /** Bodies (or "status:NNN", "chunked:...", "hang") answered in order; an empty drain once they run out. */
    private final Deque<String> answers = new ArrayDeque<>();
    private final AtomicInteger requests = new AtomicInteger();
    private final Set<String> clientPorts = ConcurrentHashMap.newKeySet();
    private final CountDownLatch release = new CountDownLatch(1);

    @BeforeEach
    void start() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
        server.createContext("/kv_cache_events", this::handle);
        server.setExecutor(java.util.concurrent.Executors.newFixedThreadPool(2));
        server.start();
    }

    @AfterEach
    void stop() {
        release.countDown();
        poller.close();
        server.stop(0);
        ((java.util.concurrent.ExecutorService) server.getExecutor()).shutdownNow();
        index.close();
    }

    private void handle(HttpExchange x) throws IOException {
        requests.incrementAndGet();
        clientPorts.add(String.valueOf(x.getRemoteAddress().getPort()));
        if (!"POST".equals(x.getRequestMethod())) {
            x.sendResponseHeaders(405, -1);
            return;
        }
        String a;
        synchronized (answers) {
            a = answers.isEmpty() ? "[]" : answers.poll();
        }
        if (a.equals("hang")) {
            try {
                release.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            x.close();
            return;
        }
        int status = 200;
        boolean chunked = false;
        if (a.startsWith("status:")) {
            status = Integer.parseInt(a.substring(7, 10));
            a = "{\"detail\": \"nope\"}";
        } else if (a.startsWith("chunked:")) {
            chunked = true;
            a = a.substring(8);
        }
        byte[] b = a.getBytes(StandardCharsets.UTF_8);
        x.getResponseHeaders().set("Content-Type", "application/json");
        x.sendResponseHeaders(status, chunked ? 0 : b.length);
        try (OutputStream out = x.getResponseBody()) {
            if (chunked) {
                for (int i = 0; i < b.length; i += 7) { // several chunks
                    out.write(b, i, Math.min(7, b.length - i));
                    out.flush();
                }
            } else {
                out.write(b);
            }
        }
    }

    private void answer(String... bodies) {
        synchronized (answers) {
            answers.addAll(java.util.List.of(bodies));
        }
    }

    private String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/kv_cache_events";
    }

    /** Steps the poller until {@code cond} holds (real time only waits for loopback I/O; schedules use the clock). */
    private void until(BooleanSupplier cond, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for: " + what + "; status " + poller.status());
            }
            poller.doWork();
            Thread.sleep(1);
        }
    }

    private SubscriberStatus status() {
        return poller.status().get(0);
    }

    private static String stored(long id, long hash, int t1, int t2) {
        return "{\"event_id\": " + id + ", \"data\": {\"type\": \"stored\", \"parent_hash\": null, \"blocks\": [{\"type\":"
            + " \"stored_block\", \"block_hash\": " + hash + ", \"tokens\": [{\"type\": \"unique_token\", \"token_id\": "
            + t1 + ", \"token_extra_id\": 0}, {\"type\": \"unique_token\", \"token_id\": " + t2
            + ", \"token_extra_id\": 0}], \"cache_level\": 0, \"priority\": 35}]}, \"window_size\": 4096}";
    }

    /** Steps without advancing the clock for a while: nothing that is not yet due may happen. */
    private void idle() throws InterruptedException {
        for (int i = 0; i < 30; i++) {
            poller.doWork();
            Thread.sleep(1);
        }
    }

    @Test
    void pollsEveryKvPollMsOnTheClockOverOneKeptAliveConnection() throws Exception {
        answer("[" + stored(0, 5, 1, 2) + "]", "chunked:[" + stored(1, 6, 3, 4) + "]");
        poller.add(new HttpKvEventSource(EP, url(), POLL_NS, 1, "r"));
        until(() -> index.blocks(EP) == 1, "first drain applied");
        assertEquals("up", status().state());
        idle();
        assertEquals(1, requests.get(), "no second poll before kv_poll_ms passed on the clock");
        clock.advanceNs(POLL_NS);
        until(() -> index.blocks(EP) == 2, "chunked drain applied");
        assertEquals(2, requests.get());
        clock.advanceNs(POLL_NS);
        until(() -> requests.get() == 3, "third poll");
        until(() -> status().batches() == 2 && poller.endpoint(EP).nextPollNs > clock.nanoTime(), "empty drain done");
        assertEquals(1, clientPorts.size(), "one kept-alive connection: " + clientPorts);
        assertEquals(0, status().clears());
        assertEquals(1, status().lastSeq());
    }

    @Test
    void aNon200ClearsTheEndpointAndRetriesWithBackoff() throws Exception {
        answer("[" + stored(0, 5, 1, 2) + "]", "status:500");
        poller.add(new HttpKvEventSource(EP, url(), POLL_NS, 1, "r"));
        until(() -> index.blocks(EP) == 1, "first drain");
        clock.advanceNs(POLL_NS);
        until(() -> "retrying".equals(status().state()), "the 500 fails the poll");
        assertEquals(0, index.blocks(EP), "events the failed poll may have drained are lost: cleared");
        assertEquals(1L, status().errors().get("http"));
        assertTrue(status().lastError().startsWith("http: HTTP 500: {\"detail\": \"nope\"}"), status().lastError());
        assertEquals(0, status().lastSeq());
        clock.advanceNs(RETRY_NS - 1);
        idle();
        assertEquals(2, requests.get(), "the retry waits for its backoff");
        answer("[" + stored(7, 5, 1, 2) + "]");
        clock.advanceNs(1);
        until(() -> "up".equals(status().state()) && index.blocks(EP) == 1, "retried");
        assertEquals(0, status().gaps(), "id tracking restarted after the clear: 7 after 0 is no gap");
        assertEquals(1, status().reconnects());
    }

    @Test
    void aGapBetweenDrainsClearsTheEndpoint() throws Exception {
        answer("[" + stored(0, 5, 1, 2) + "]", "[" + stored(4, 6, 3, 4) + "]");
        poller.add(new HttpKvEventSource(EP, url(), POLL_NS, 1, "r"));
        until(() -> index.blocks(EP) == 1, "first drain");
        clock.advanceNs(POLL_NS);
        until(() -> status().gaps() == 1, "the jump from 0 to 4");
        assertEquals(1, index.blocks(EP), "only the block after the gap");
        assertEquals(1, status().clears());
    }

    @Test
    void aPollWithoutAnAnswerTimesOutOnTheClock() throws Exception {
        answer("[" + stored(0, 5, 1, 2) + "]", "hang");
        poller.add(new HttpKvEventSource(EP, url(), POLL_NS, 1, "r"));
        until(() -> index.blocks(EP) == 1, "first drain");
        clock.advanceNs(POLL_NS);
        until(() -> requests.get() == 2, "the hanging poll reached the server");
        idle();
        assertEquals("up", status().state(), "still waiting: the clock has not reached the deadline");
        clock.advanceNs(HttpKvPoller.DEFAULT_REQUEST_TIMEOUT_NS);
        until(() -> "retrying".equals(status().state()), "timeout");
        assertEquals(1L, status().errors().get("timeout"));
        assertEquals(0, index.blocks(EP));
    }

    @Test
    void aBodyOverMaxFrameBytesIsRefused() throws Exception {
        StringBuilder big = new StringBuilder("[");
        for (int i = 0; big.length() < 5000; i++) {
            big.append(i == 0 ? "" : ", ").append(stored(i, 100 + i, i, i + 1));
        }
        answer(big.append("]").toString(), "chunked:" + big);
        poller.add(new HttpKvEventSource(EP, url(), POLL_NS, 1, "r"));
        until(() -> "retrying".equals(status().state()), "Content-Length over the bound");
        assertEquals(1L, status().errors().get("too_large"));
        assertTrue(status().lastError().contains("Content-Length"), status().lastError());
        clock.advanceNs(RETRY_NS);
        until(() -> status().errors().get("too_large") == 2L, "chunked body over the bound");
        assertEquals(0, index.blocks(EP));
    }

    @Test
    void aRefusedConnectionIsAConnectError() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        poller.add(new HttpKvEventSource(EP, "http://127.0.0.1:" + port + "/kv_cache_events", POLL_NS, 2, "r"));
        until(() -> "retrying".equals(status().state()), "refused");
        for (SubscriberStatus s : poller.status()) {
            assertEquals(1L, s.errors().get("connect"), s.toString());
            assertTrue(!s.up());
        }
        clock.advanceNs(RETRY_NS);
        until(() -> status().errors().get("connect") == 2L, "retried after the backoff");
        idle();
        assertEquals(2L, status().errors().get("connect"), "the second backoff is twice as long");
    }
}
