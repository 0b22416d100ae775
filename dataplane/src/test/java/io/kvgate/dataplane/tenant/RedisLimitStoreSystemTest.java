package io.kvgate.dataplane.tenant;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.kvgate.control.config.TenancyConfig.RateLimitStore;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.netty.channel.DefaultEventLoop;
import java.io.IOException;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared store against a real {@code redis-server} (Debian's, started here on a free loopback port without
 * persistence, stopped by its PID): two replicas' stores (two {@link Tenants}, two connections) enforce one limit
 * through the Lua scripts; Redis killed mid-run under each {@code on_failure} mode decides every request (none hangs:
 * each answer is awaited with a bound, the test has a hard timeout) and counts the decision; Redis stopped (SIGSTOP)
 * is decided by the gateway's timer; Redis back is used again (its script cache empty: NOSCRIPT reloads them).
 */
@Tag("system")
class RedisLimitStoreSystemTest {
    private static final Duration ANSWER = Duration.ofSeconds(20); // a bound on a loaded host, not a measurement

    @TempDir
    Path dir;

    private final DefaultEventLoop eventLoop = new DefaultEventLoop();
    private final Loop loop = Loop.of(eventLoop);
    private Process redis;
    private final List<Tenants> opened = new java.util.ArrayList<>();

    @AfterEach
    void stop() throws Exception {
        opened.forEach(Tenants::close);
        stopRedis();
        eventLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    private void startRedis(int port) throws Exception {
        Path log = dir.resolve("redis-" + port + ".log");
        redis = new ProcessBuilder("redis-server", "--port", Integer.toString(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", dir.toString())
            .redirectErrorStream(true).redirectOutput(log.toFile()).start();
        Await.until(Duration.ofSeconds(20), "redis-server listening on " + port, () -> {
            try (Socket s = new Socket("127.0.0.1", port)) {
                return s.isConnected();
            } catch (IOException e) {
                return false;
            }
        }, () -> {
            try {
                return Files.readString(log);
            } catch (IOException e) {
                return e.toString();
            }
        });
    }

    private void stopRedis() throws InterruptedException {
        if (redis != null) {
            redis.destroyForcibly(); // SIGKILL to the PID this test started
            redis.waitFor(10, TimeUnit.SECONDS);
            redis = null;
        }
    }

    private void signal(String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(redis.pid())).start();
        assertEquals(0, p.waitFor(), "kill -" + sig);
    }

    /** A replica's tenancy state, its store connected as the gateway does at start (not on a request's loop). */
    private Tenants replica(TenancyConfig tc) {
        Tenants t = new Tenants(NanoClock.SYSTEM);
        opened.add(t);
        t.open(tc);
        return t;
    }

    /**
     * Waits until Redis decides (the first connection, scripts loaded): before that, on a loaded host, on_failure may
     * decide within timeout_ms, which is the documented start-up behaviour, not what these tests look at.
     */
    private void awaitStore(Tenants t, TenancyConfig tc) throws InterruptedException {
        Tenant probe = tenant("probe", new Limits(1L << 40, 0, 0, 0));
        Await.until(Duration.ofSeconds(60), "Redis decides", () -> {
            try {
                return reserve(t, probe, tc, 1).store instanceof RedisLimitStore;
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
    }

    private static long failures(Tenants t, String decision) {
        return t.storeFailures().get(decision, true) + t.storeFailures().get(decision, false);
    }

    private static Tenant tenant(String name, Limits l) {
        return new Tenant(name, java.util.Set.of(), null, false, l, null, false);
    }

    private static TenancyConfig tenancy(int port, String onFailure, long timeoutMs) {
        return new TenancyConfig(List.of(), new RateLimitStore("redis://127.0.0.1:" + port, onFailure, timeoutMs), null, 2);
    }

    /** One reservation, asked on the loop as the front door does; its answer awaited with a bound (a hang fails). */
    private Reservation reserve(Tenants t, Tenant tenant, TenancyConfig tc, long tokens) throws Exception {
        CompletableFuture<Reservation> f = new CompletableFuture<>();
        loop.execute(() -> t.reserve(tenant, tc, tokens, false, loop, f::complete));
        return f.get(ANSWER.toMillis(), TimeUnit.MILLISECONDS);
    }

    private void settle(Tenants t, Reservation r, long used) throws Exception {
        CompletableFuture<Void> f = new CompletableFuture<>();
        loop.execute(() -> {
            t.settle(r, used);
            f.complete(null);
        });
        f.get(ANSWER.toMillis(), TimeUnit.MILLISECONDS);
    }

    private static long[] peek(Tenants t, TenancyConfig tc, String tenant) throws Exception {
        return ((RedisLimitStore) t.store(tc)).peek(tenant).toCompletableFuture().get(ANSWER.toMillis(), TimeUnit.MILLISECONDS);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void twoReplicasSharingOneRedisEnforceOneLimit() throws Exception {
        int port = TestPorts.free();
        startRedis(port);
        TenancyConfig tc = tenancy(port, "deny", 5_000); // deny: a store failure would show as a refusal, not a grant
        Tenants a = replica(tc);
        Tenants b = replica(tc);
        awaitStore(a, tc);
        awaitStore(b, tc);
        long deniedBefore = failures(a, "deny") + failures(b, "deny");
        Tenant acme = tenant("acme", new Limits(0, 1000, 0, 0));
        int granted = 0;
        for (int i = 0; i < 16; i++) {
            Tenants replica = i % 2 == 0 ? a : b;
            Reservation r = reserve(replica, acme, tc, 100);
            assertNull(r.storeUnavailable(), "the store decided");
            if (r.granted()) {
                granted++;
                assertEquals(1000, r.limitTokens(), "the whole limit, not a replica's share");
                // Its tokens went into the newest 100 ms bucket: the window is empty when that bucket leaves, a minute on.
                assertTrue(r.resetTokensNs() > 59_800_000_000L && r.resetTokensNs() <= 60_000_000_000L, "reset " + r.resetTokensNs());
                settle(replica, r, 100); // usage as reserved
            } else {
                assertEquals(LimitKind.TOKENS_PER_MINUTE, r.deniedBy(), r.message());
                assertTrue(r.message().contains("tokens_per_minute: limit 1000"), r.message());
                assertTrue(r.retryAfterSeconds() >= 1 && r.retryAfterSeconds() <= 60, "retry " + r.retryAfterSeconds());
            }
        }
        assertEquals(10, granted, "1000 tokens per minute, 100 each, whichever replica asked");
        assertArrayEquals(new long[] {0, 1000, 0, 0}, peek(b, tc, "acme"),
            "what ctl tenants shows (peek.lua): both replicas' tokens, read by either, nothing written");
        // max_concurrent 3 across both replicas: the fourth is refused on either until one ends.
        Tenant conc = tenant("conc", new Limits(0, 0, 3, 0));
        Reservation c1 = reserve(a, conc, tc, 1);
        assertTrue(c1.granted());
        assertTrue(reserve(b, conc, tc, 1).granted());
        assertTrue(reserve(a, conc, tc, 1).granted());
        assertEquals(3, peek(a, tc, "conc")[3], "in flight over both replicas");
        Reservation over = reserve(b, conc, tc, 1);
        assertFalse(over.granted());
        assertEquals(LimitKind.MAX_CONCURRENT, over.deniedBy());
        settle(a, c1, 1);
        Await.until(ANSWER, "the ended request's slot free on the other replica", () -> {
            try {
                return reserve(b, conc, tc, 1).granted();
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        // A settlement below the reservation frees the difference for either replica.
        Tenant small = tenant("small", new Limits(0, 500, 0, 0));
        Reservation big = reserve(a, small, tc, 400);
        assertTrue(big.granted());
        assertEquals(100, big.remainingTokens());
        assertFalse(reserve(b, small, tc, 200).granted(), "400 + 200 > 500");
        settle(a, big, 250);
        Await.until(ANSWER, "the settlement reached Redis", () -> {
            try {
                return reserve(b, small, tc, 200).granted(); // 250 + 200 <= 500
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        });
        assertEquals(deniedBefore, failures(a, "deny") + failures(b, "deny"), "no store failure once connected");
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void redisKilledMidRunEachOnFailureDecidesAndRedisBackIsUsedAgain() throws Exception {
        for (String mode : List.of("local", "deny", "allow")) {
            int port = TestPorts.free();
            startRedis(port);
            // A generous timer: a killed server's closed connection decides at once; the timer's path is the SIGSTOP test's.
            TenancyConfig tc = tenancy(port, mode, 2_000);
            Tenants t = replica(tc);
            awaitStore(t, tc);
            Tenant acme = tenant("acme-" + mode, new Limits(1000, 0, 0, 0));

            long before = failures(t, mode);
            stopRedis(); // killed mid-run
            for (int i = 0; i < 20; i++) {
                Reservation r = reserve(t, acme, tc, 10); // bounded: a hung request fails here
                switch (mode) {
                    case "local" -> {
                        assertTrue(r.granted(), mode);
                        assertInstanceOf(LocalLimitStore.class, r.store);
                        assertEquals(500, r.limitRequests(), "this replica's share: 1000 / 2 replicas");
                    }
                    case "deny" -> {
                        assertFalse(r.granted(), mode);
                        assertNotNull(r.storeUnavailable(), mode);
                    }
                    default -> {
                        assertTrue(r.granted(), mode);
                        assertFalse(r.hasRequestLimit(), "unchecked");
                    }
                }
                settle(t, r, 10);
            }
            assertEquals(20, failures(t, mode) - before, mode + ": every decision counted");

            startRedis(port); // back, with an empty script cache
            Await.until(Duration.ofSeconds(30), mode + ": Redis decides again", () -> {
                try {
                    return reserve(t, acme, tc, 10).store instanceof RedisLimitStore;
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            });
            stopRedis();
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void aStoppedRedisIsDecidedByTheGatewaysTimer() throws Exception {
        int port = TestPorts.free();
        startRedis(port);
        TenancyConfig tc = tenancy(port, "deny", 300);
        Tenants t = replica(tc);
        awaitStore(t, tc);
        Tenant acme = tenant("acme", new Limits(1000, 0, 0, 0));
        long timeouts = t.storeFailures().get("deny", true);
        long released = t.storeFailures().get("released", true);
        signal("STOP"); // the connection stays open, nothing answers
        try {
            Reservation r = reserve(t, acme, tc, 10);
            assertFalse(r.granted());
            assertTrue(r.storeUnavailable().contains("did not answer within 300 ms"), r.storeUnavailable());
            assertEquals(timeouts + 1, t.storeFailures().get("deny", true));
        } finally {
            signal("CONT");
        }
        // The grant Redis gives once it runs again is released (the request was already refused).
        Await.until(ANSWER, "the late grant given back", () -> t.storeFailures().get("released", true) == released + 1);
        awaitStore(t, tc);
    }
}
