package io.kvgate.dataplane.tenant;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.kvgate.control.config.TenancyConfig.RateLimitStore;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;

/**
 * The shared store's logic against a fake Redis whose answers the test gives (or withholds), on a manual loop and
 * clock: what a store answer fills in, each on_failure decision for errors, a lost connection and the timer, late
 * grants given back, NOSCRIPT, tenants without limits, a reload that changes the store.
 */
class RedisLimitStoreTest {
    @org.junit.jupiter.api.io.TempDir
    java.nio.file.Path dir;
    private static final long MS = 1_000_000L;
    private static final Limits LIMITS = new Limits(60, 1000, 4, 0);

    private final ManualClock clock = new ManualClock(0);
    private final ManualLoop loop = new ManualLoop();
    private final List<FakeRedis> opened = new ArrayList<>();
    private final Tenants tenants = new Tenants(clock, spec -> {
        FakeRedis f = new FakeRedis();
        opened.add(f);
        return f;
    });

    /** A loop whose tasks run when the test says: executes at once (one thread), timers when the clock passes them. */
    static final class ManualLoop implements Loop {
        long now;
        final List<long[]> dueAt = new ArrayList<>();
        final List<Runnable> timers = new ArrayList<>();

        @Override
        public void execute(Runnable task) {
            task.run();
        }

        @Override
        public Runnable schedule(Runnable task, long delayNs) {
            long[] due = {now + delayNs};
            dueAt.add(due);
            timers.add(task);
            return () -> due[0] = Long.MAX_VALUE;
        }

        void advance(long ns) {
            now += ns;
            for (int i = 0; i < timers.size(); i++) {
                if (dueAt.get(i)[0] <= now) {
                    dueAt.get(i)[0] = Long.MAX_VALUE;
                    timers.get(i).run();
                }
            }
        }

        int pending() {
            return (int) dueAt.stream().filter(d -> d[0] != Long.MAX_VALUE).count();
        }
    }

    /** Redis as the test says: each EVALSHA waits for the test to complete it. */
    static final class FakeRedis implements RedisScripts {
        boolean connected = true;
        boolean closed;
        final List<String> shas = new ArrayList<>();
        final List<String[]> keys = new ArrayList<>();
        final List<String[]> args = new ArrayList<>();
        final List<CompletableFuture<List<Object>>> answers = new ArrayList<>();
        final List<String> loaded = new ArrayList<>();
        /** The reply every later EVALSHA gets at once, or null: each waits for {@link #answer}. */
        List<Object> replyAtOnce;
        /** The error every later EVALSHA fails with at once, or null. */
        Throwable failAtOnce;

        @Override
        public CompletionStage<List<Object>> evalsha(String sha, String[] k, String[] a) {
            shas.add(sha);
            keys.add(k);
            args.add(a);
            CompletableFuture<List<Object>> f = new CompletableFuture<>();
            if (replyAtOnce != null) {
                f.complete(replyAtOnce);
            } else if (failAtOnce != null) {
                f.completeExceptionally(failAtOnce);
            }
            answers.add(f);
            return f;
        }

        @Override
        public CompletionStage<String> scriptLoad(String script) {
            loaded.add(script);
            return CompletableFuture.completedFuture(RedisLimitStore.sha1(script));
        }

        @Override
        public boolean connected() {
            return connected;
        }

        @Override
        public void close() {
            closed = true;
        }

        void answer(int i, long... v) {
            List<Object> l = new ArrayList<>();
            for (long x : v) {
                l.add(x);
            }
            answers.get(i).complete(l);
        }
    }

    private static Tenant tenant(Limits l) {
        return new Tenant("acme", java.util.Set.of(), null, false, l, null, false);
    }

    private static TenancyConfig tenancy(String onFailure) {
        return new TenancyConfig(List.of(), new RateLimitStore("redis://127.0.0.1:6379", onFailure, 50), null, 2);
    }

    @Test
    void theStoresAnswerFillsTheReservationAndItsSettlementGoesToTheStore() {
        TenancyConfig t = tenancy("local");
        Reservation[] got = new Reservation[1];
        tenants.reserve(tenant(LIMITS), t, 300, false, loop, r -> got[0] = r);
        FakeRedis redis = opened.get(0);
        assertNull(got[0], "waits for the store");
        assertEquals(RedisLimitStore.RESERVE_SHA, redis.shas.get(0));
        assertArrayEquals(new String[] {"kvgate:rl:{acme}:requests_per_minute", "kvgate:rl:{acme}:tokens_per_minute",
            "kvgate:rl:{acme}:tokens_per_day", "kvgate:rl:{acme}:max_concurrent"}, redis.keys.get(0), "by tenant and limit");
        String[] a = redis.args.get(0);
        assertEquals(List.of("60", "1000", "0", "4", "300"), List.of(a).subList(0, 5), "the fleet-wide limits, not a share");
        redis.answer(0, 1, 0, 0, 0, 0, 0, 59, 60_000, 700, 59_900, 12345, 678);
        Reservation r = got[0];
        assertTrue(r.granted());
        assertEquals(60, r.limitRequests());
        assertEquals(59, r.remainingRequests());
        assertEquals(60_000 * MS, r.resetRequestsNs());
        assertEquals(700, r.remainingTokens());
        assertEquals(0, loop.pending(), "the timer is cancelled");
        tenants.settle(r, 120);
        assertEquals(RedisLimitStore.SETTLE_SHA, redis.shas.get(1));
        assertEquals(List.of("300", "120", "12345", "678", a[5], "1", "0", "1"), List.of(redis.args.get(1)));
        tenants.settle(r, 120);
        assertEquals(2, redis.shas.size(), "settled once");
    }

    @Test
    void aDenialNamesTheLimitAndIsCounted() {
        Reservation[] got = new Reservation[1];
        tenants.reserve(tenant(LIMITS), tenancy("local"), 300, false, loop, r -> got[0] = r);
        opened.get(0).answer(0, 0, 3, 1000, 900, 300, 2_500, 10, 30_000, 100, 59_000, 1, 1);
        Reservation r = got[0];
        assertFalse(r.granted());
        assertEquals(LimitKind.TOKENS_PER_MINUTE, r.deniedBy());
        assertEquals(3, r.retryAfterSeconds(), "2.5 s rounded up");
        assertTrue(r.message().contains("tokens_per_minute: limit 1000, used 900, requested 300"), r.message());
        assertNull(r.storeUnavailable());
        tenants.settle(r, -1);
        assertEquals(1, opened.get(0).shas.size(), "a denial holds nothing");
    }

    @Test
    void theTimerDecidesWhenTheStoreIsSilentAndALateGrantIsGivenBack() {
        for (String mode : List.of("local", "deny", "allow")) {
            Reservation[] got = new Reservation[1];
            TenancyConfig t = new TenancyConfig(List.of(), new RateLimitStore("redis://127.0.0.1:" + (6000 + mode.length()), mode, 50), null, 2);
            tenants.reserve(tenant(LIMITS), t, 300, false, loop, r -> got[0] = r);
            FakeRedis redis = opened.getLast();
            loop.advance(49 * MS);
            assertNull(got[0], mode + ": not before timeout_ms");
            loop.advance(1 * MS);
            Reservation r = got[0];
            assertNotNull(r, mode + ": decided at timeout_ms");
            assertEquals(1, tenants.storeFailures().get(mode, true), mode + " counted");
            switch (mode) {
                case "local" -> {
                    assertTrue(r.granted());
                    assertEquals(30, r.limitRequests(), "this replica's share (60 / 2 replicas)");
                    assertNotNull(r.usage, "held in this replica's counters");
                }
                case "deny" -> {
                    assertFalse(r.granted());
                    assertTrue(r.storeUnavailable().contains("did not answer within 50 ms and rate_limit_store.on_failure is deny"),
                        r.storeUnavailable());
                    assertNull(r.deniedBy());
                }
                default -> {
                    assertTrue(r.granted());
                    assertFalse(r.hasRequestLimit(), "nothing checked, no headers");
                }
            }
            // The store answers after all: its grant is released, and the request's decision stands.
            redis.answer(0, 1, 0, 0, 0, 0, 0, 59, 60_000, 700, 59_900, 42, 7);
            assertEquals(2, redis.shas.size(), mode + ": the late grant is given back");
            assertEquals(RedisLimitStore.SETTLE_SHA, redis.shas.get(1));
            assertEquals("-1", redis.args.get(1)[1]);
            assertEquals("42", redis.args.get(1)[2]);
            assertSame(r, got[0]);
            tenants.settle(r, 100);
            assertEquals(2, redis.shas.size(), mode + ": a reservation the store did not decide never settles there");
        }
    }

    @Test
    void anErrorOrNoConnectionDecidesAtOnce() {
        Reservation[] got = new Reservation[1];
        TenancyConfig t = tenancy("deny");
        tenants.reserve(tenant(LIMITS), t, 300, false, loop, r -> got[0] = r);
        opened.get(0).answers.get(0).completeExceptionally(new RuntimeException("Connection refused"));
        assertNotNull(got[0]);
        assertTrue(got[0].storeUnavailable().contains("is unavailable"), got[0].storeUnavailable());
        assertEquals(1, tenants.storeFailures().get("deny", false));
        assertEquals(0, loop.pending());

        opened.get(0).connected = false;
        got[0] = null;
        tenants.reserve(tenant(LIMITS), t, 300, false, loop, r -> got[0] = r);
        assertNotNull(got[0], "decided without waiting");
        assertEquals(1, opened.get(0).shas.size(), "nothing sent while disconnected");
        assertEquals(2, tenants.storeFailures().get("deny", false));
    }

    @Test
    void noScriptLoadsTheScriptAgain() {
        Reservation[] got = new Reservation[1];
        tenants.reserve(tenant(LIMITS), tenancy("deny"), 300, false, loop, r -> got[0] = r);
        FakeRedis redis = opened.get(0);
        redis.answers.get(0).completeExceptionally(new RuntimeException("NOSCRIPT No matching script. Please use EVAL."));
        assertEquals(List.of(RedisLimitStore.RESERVE), redis.loaded);
        assertEquals(2, redis.shas.size(), "run again after the load");
        redis.answer(1, 1, 0, 0, 0, 0, 0, 59, 60_000, 700, 59_900, 1, 1);
        assertTrue(got[0].granted());
        assertEquals(0, tenants.storeFailures().get("deny", false));
    }

    @Test
    void aTenantWithoutLimitsAsksNoStore() {
        Reservation[] got = {new Reservation("x", 0, false)};
        tenants.reserve(tenant(Limits.NONE), tenancy("deny"), 300, false, loop, r -> got[0] = r);
        assertNull(got[0]);
        assertTrue(opened.isEmpty() || opened.get(0).shas.isEmpty());
    }

    @Test
    void withoutAStoreTheLocalShareDecidesAtOnce() {
        Reservation[] got = new Reservation[1];
        tenants.reserve(tenant(LIMITS), new TenancyConfig(List.of(), null, null, 2), 300, false, loop, r -> got[0] = r);
        assertTrue(got[0].granted());
        assertEquals(30, got[0].limitRequests());
        assertTrue(opened.isEmpty());
    }

    @Test
    void aReloadThatChangesTheStoreClosesTheOldOne() {
        tenants.open(tenancy("deny"));
        tenants.open(tenancy("deny"));
        assertEquals(1, opened.size(), "the same store is kept");
        tenants.open(tenancy("allow"));
        assertEquals(2, opened.size());
        assertTrue(opened.get(0).closed);
        tenants.close();
        assertTrue(opened.get(1).closed);
    }

    @Test
    void underASharedStoreAnAnswerBeforeTheLimitsCheckCarriesTheLastStateTheStoreGave() {
        TenancyConfig t = tenancy("local");
        Tenant acme = tenant(LIMITS);
        assertNull(tenants.current(acme, t), "nothing known yet on this replica: no headers rather than invented ones");
        tenants.reserve(acme, t, 300, false, loop, r -> { });
        opened.get(0).answer(0, 1, 0, 0, 0, 0, 0, 59, 60_000, 700, 50_000, 1, 1);
        clock.advance(10_000, java.util.concurrent.TimeUnit.MILLISECONDS);
        Reservation c = tenants.current(acme, t);
        assertFalse(c.granted(), "reserves nothing");
        assertEquals(60, c.limitRequests(), "the fleet-wide limit, as the store's answers say");
        assertEquals(59, c.remainingRequests());
        assertEquals(50_000 * MS, c.resetRequestsNs(), "the reset less the 10 s since the store answered");
        assertEquals(1000, c.limitTokens());
        assertEquals(700, c.remainingTokens());
        assertEquals(40_000 * MS, c.resetTokensNs());
        assertEquals(1, opened.get(0).shas.size(), "no round trip for the headers");
        clock.advance(45_000, java.util.concurrent.TimeUnit.MILLISECONDS); // past the tokens' reset, not the requests'
        c = tenants.current(acme, t);
        assertEquals(1000, c.remainingTokens(), "a window whose reset passed is empty");
        assertEquals(0, c.resetTokensNs());
        assertEquals(59, c.remainingRequests());
        assertEquals(5_000 * MS, c.resetRequestsNs());
        assertNull(tenants.current(tenant(new Limits(120, 1000, 4, 0)), t), "limits changed by a reload: the state is stale");
    }

    @Test
    void decisionsNotTheStoresLeaveTheLastKnownStateAlone() {
        TenancyConfig t = tenancy("allow");
        Tenant acme = tenant(LIMITS);
        tenants.reserve(acme, t, 300, false, loop, r -> { });
        loop.advance(50 * MS); // the timer decides: allow, unchecked
        assertNull(tenants.current(acme, t), "an unchecked admission says nothing of the windows");
        opened.get(0).connected = false;
        tenants.reserve(acme, tenancy("local"), 300, false, loop, r -> { });
        assertNull(tenants.current(acme, t), "nor does this replica's share");
    }

    private GatewayConfig storeConfig() throws Exception {
        return GatewayConfig.parse("""
            rate_limit_store: {url: "redis://127.0.0.1:6379", timeout_ms: 50}
            tenants:
              - {name: acme, api_key_sha256: [%s], limits: {requests_per_minute: 60, tokens_per_minute: 1000}}
              - {name: free, api_key_sha256: [%s]}
            rules:
              - {name: chat, models: [m], endpoints: [{url: "http://127.0.0.1:1"}]}
            """.formatted(TenancyConfig.sha256Hex("k1"), TenancyConfig.sha256Hex("k2")), dir);
    }

    @Test
    void ctlTenantsShowsTheSharedStoresUsageBesideThisReplicas() throws Exception {
        GatewayConfig c = storeConfig();
        tenants.open(c.tenancy());
        FakeRedis redis = opened.get(0);
        redis.replyAtOnce = List.of(7L, 2100L, 9000L, 3L);
        List<java.util.Map<String, Object>> rows = tenants.usage(c);
        assertEquals(List.of(RedisLimitStore.PEEK_SHA), redis.shas, "one read per limited tenant, none for the other");
        assertArrayEquals(RedisLimitStore.keys("acme"), redis.keys.get(0));
        java.util.Map<String, Object> acme = row(rows, "acme");
        assertEquals(java.util.Map.of("store", "redis://127.0.0.1:6379", "requests_last_minute", 7L, "tokens_last_minute", 2100L,
            "tokens_last_day", 9000L, "in_flight", 3L), acme.get("shared"));
        assertEquals(0L, ((java.util.Map<?, ?>) acme.get("used")).get("requests_last_minute"), "this replica's own, apart");
        assertNull(row(rows, "free").get("shared"), "a tenant without limits has nothing in the store");
    }

    private static java.util.Map<String, Object> row(List<java.util.Map<String, Object>> rows, String tenant) {
        return rows.stream().filter(r -> tenant.equals(r.get("tenant"))).findFirst().orElseThrow();
    }

    @Test
    void ctlTenantsSaysWhyTheSharedUsageIsMissing() throws Exception {
        GatewayConfig c = storeConfig();
        tenants.open(c.tenancy());
        FakeRedis redis = opened.get(0);
        tenants.usageWaitMs = 1; // the fake never answers: the bound decides
        assertEquals("the store did not answer within 1 ms", ((java.util.Map<?, ?>) row(tenants.usage(c), "acme").get("shared")).get("error"));
        FakeRedis failing = new FakeRedis();
        failing.failAtOnce = new IllegalStateException("connection refused");
        Tenants other = new Tenants(clock, spec -> failing);
        other.open(c.tenancy());
        assertEquals("the store failed: connection refused", ((java.util.Map<?, ?>) row(other.usage(c), "acme").get("shared")).get("error"));
    }
}
