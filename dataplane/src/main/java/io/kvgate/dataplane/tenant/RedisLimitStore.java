package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.kvgate.control.config.TenancyConfig.RateLimitStore;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The tenants' counters in Redis, shared by every replica ({@code rate_limit_store}): each reservation is one
 * {@code EVALSHA} of {@code reserve.lua}, which checks all of the tenant's windows (requests and tokens per minute,
 * tokens per day, requests in flight) and holds the request atomically, answering what the headers say; each
 * settlement one {@code EVALSHA} of {@code settle.lua}, after the answer (off the request's latency). Scripts are run
 * by their SHA-1 and loaded again when Redis answers {@code NOSCRIPT} (a restarted or flushed server).
 *
 * <p><b>Never blocking, never hanging.</b> The command goes out from the request's event loop without waiting; its
 * answer, completed on the client's own thread, is handed back to that loop ({@link Loop#execute}). The loop's own
 * timer bounds the wait at {@code timeout_ms} whatever the client does (a stopped server holds the connection open and
 * answers nothing). When the store fails (an error, refused or lost connection, or the timer) {@code on_failure}
 * decides, counted in {@link StoreFailures}: {@code local} holds the request in this replica's share
 * ({@link LocalLimitStore}), {@code deny} refuses it (503), {@code allow} admits it unchecked. A grant that arrives
 * after the timer decided is given back at once (its settlement releases it), so a slow store never leaks holds.
 *
 * <p>Keys: {@code kvgate:rl:{TENANT}:LIMIT} (the tenant's name from configuration, never a key; the braces keep one
 * tenant's keys in one cluster slot). Thread-safe: one instance per configured store, shared by every loop; per
 * reservation state lives in its {@link Attempt}, touched only on its loop.
 */
final class RedisLimitStore implements LimitStore {
    /** How long a request's in-flight slot ({@code max_concurrent}) lasts if its replica dies before settling it. */
    static final long LEASE_MS = 15 * 60_000L;
    static final String RESERVE = script("reserve.lua");
    static final String SETTLE = script("settle.lua");
    static final String PEEK = script("peek.lua");
    static final String RESERVE_SHA = sha1(RESERVE);
    static final String SETTLE_SHA = sha1(SETTLE);
    static final String PEEK_SHA = sha1(PEEK);
    private static final long MS = 1_000_000L;

    final RateLimitStore spec;
    private final RedisScripts redis;
    private final LocalLimitStore local;
    private final StoreFailures failures;
    private final long timeoutNs;
    /** Reservation ids: unique per store instance, so two replicas (or a restarted one) never share one. */
    private final String idPrefix = Long.toHexString(ThreadLocalRandom.current().nextLong()) + ":";
    private final AtomicLong ids = new AtomicLong();

    RedisLimitStore(RateLimitStore spec, RedisScripts redis, LocalLimitStore local, StoreFailures failures) {
        this.spec = spec;
        this.redis = redis;
        this.local = local;
        this.failures = failures;
        this.timeoutNs = spec.timeoutMs() * MS;
    }

    static String[] keys(String tenant) {
        String p = "kvgate:rl:{" + tenant + "}:";
        return new String[] {p + "requests_per_minute", p + "tokens_per_minute", p + "tokens_per_day", p + "max_concurrent"};
    }

    @Override
    public void reserve(Reservation r, Limits limits, TenancyConfig tenancy, Loop loop, Consumer<Reservation> then) {
        r.store = this;
        r.fleetLimits = limits;
        r.id = idPrefix + ids.incrementAndGet();
        Attempt a = new Attempt(r, limits, tenancy, loop, then);
        if (!redis.connected()) {
            a.fail(false); // no connection (refused, down, reconnecting): decided now, nothing to wait for
            return;
        }
        a.cancelTimer = loop.schedule(a::timedOut, timeoutNs);
        String[] args = {
            Long.toString(limits.requestsPerMinute()), Long.toString(limits.tokensPerMinute()),
            Long.toString(limits.tokensPerDay()), Long.toString(limits.maxConcurrent()), Long.toString(r.tokens), r.id,
            Long.toString(LEASE_MS)};
        run(RESERVE, RESERVE_SHA, keys(r.tenant), args).whenComplete((res, err) -> loop.execute(() -> a.answered(res, err)));
    }

    @Override
    public void settle(Reservation r, long usedTokens) {
        send(r, usedTokens, false);
    }

    private void send(Reservation r, long usedTokens, boolean late) {
        Limits l = r.fleetLimits;
        String[] args = {Long.toString(r.tokens), Long.toString(usedTokens), Long.toString(r.minuteEpoch),
            Long.toString(r.dayEpoch), r.id, l.tokensPerMinute() > 0 ? "1" : "0", l.tokensPerDay() > 0 ? "1" : "0",
            l.maxConcurrent() > 0 ? "1" : "0"};
        run(SETTLE, SETTLE_SHA, keys(r.tenant), args).whenComplete((res, err) -> {
            if (err != null) {
                failures.count("lost", false);
            } else if (late) {
                failures.count("released", true);
            }
        });
    }

    /**
     * The tenant's usage in the store now, read only ({@code peek.lua}): requests and tokens in the last minute, tokens
     * in the last day, requests in flight, over every replica. For {@code ctl tenants}: one round trip, off the
     * request path; the caller bounds the wait.
     */
    CompletionStage<long[]> peek(String tenant) {
        return run(PEEK, PEEK_SHA, keys(tenant), new String[0]).thenApply(v -> new long[] {
            (Long) v.get(0), (Long) v.get(1), (Long) v.get(2), (Long) v.get(3)});
    }

    /** {@code EVALSHA}, loading the script first when the server does not know it ({@code NOSCRIPT}). */
    private CompletionStage<List<Object>> run(String script, String sha, String[] keys, String[] args) {
        CompletionStage<List<Object>> first;
        try {
            first = redis.evalsha(sha, keys, args);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        return first.handle((res, err) -> {
            if (err == null) {
                return CompletableFuture.completedFuture(res);
            }
            if (!noScript(err)) {
                return CompletableFuture.<List<Object>>failedFuture(err);
            }
            return redis.scriptLoad(script).thenCompose(s -> redis.evalsha(sha, keys, args));
        }).thenCompose(f -> f);
    }

    static boolean noScript(Throwable err) {
        for (Throwable t = err; t != null; t = t.getCause()) {
            if (t.getMessage() != null && t.getMessage().startsWith("NOSCRIPT")) {
                return true;
            }
        }
        return false;
    }

    /** One reservation waiting for the store: decided once, by the store's answer or by the loop's timer. */
    private final class Attempt {
        final Reservation r;
        final Limits limits;
        final TenancyConfig tenancy;
        final Loop loop;
        final Consumer<Reservation> then;
        Runnable cancelTimer;
        boolean decided;

        Attempt(Reservation r, Limits limits, TenancyConfig tenancy, Loop loop, Consumer<Reservation> then) {
            this.r = r;
            this.limits = limits;
            this.tenancy = tenancy;
            this.loop = loop;
            this.then = then;
        }

        void answered(List<Object> res, Throwable err) {
            if (decided) {
                if (err == null && res != null && ((Long) res.get(0)) == 1L) {
                    // Granted after the timer decided: the request is not using it, give it back.
                    Reservation late = new Reservation(r.tenant, r.tokens, r.estimated);
                    late.id = r.id;
                    late.fleetLimits = limits;
                    late.minuteEpoch = (Long) res.get(10);
                    late.dayEpoch = (Long) res.get(11);
                    send(late, -1, true);
                }
                return;
            }
            decided = true;
            cancelTimer.run();
            if (err != null) {
                fail(false);
                return;
            }
            apply(res);
            then.accept(r);
        }

        void timedOut() {
            if (decided) {
                return;
            }
            decided = true;
            fail(true);
        }

        void fail(boolean timeout) {
            decided = true;
            String decision = spec.onFailure();
            failures.count(decision, timeout);
            switch (decision) {
                case "local" -> local.reserve(r, limits, tenancy); // settles there too (r.store)
                case "deny" -> r.storeUnavailable = "The rate-limit store (" + spec.url() + ") "
                    + (timeout ? "did not answer within " + spec.timeoutMs() + " ms" : "is unavailable")
                    + " and rate_limit_store.on_failure is deny: the limits of tenant '" + r.tenant
                    + "' cannot be checked, so the request was not admitted. Retry shortly.";
                default -> {
                    r.granted = true;
                    r.unchecked = true;
                }
            }
            then.accept(r);
        }

        void apply(List<Object> v) {
            r.granted = (Long) v.get(0) == 1L;
            int kind = ((Long) v.get(1)).intValue();
            long wait = (Long) v.get(5);
            if (!r.granted) {
                LimitKind denied = LimitKind.values()[kind - 1];
                r.deniedBy = denied;
                r.retryAfterNs = wait < 0 ? 0 : wait * MS;
                r.message = TenantUsage.denial(r, denied, (Long) v.get(2), (Long) v.get(3), (Long) v.get(4), wait < 0);
            }
            if (limits.requestsPerMinute() > 0) {
                r.limitRequests = limits.requestsPerMinute();
                r.remainingRequests = (Long) v.get(6);
                r.resetRequestsNs = (Long) v.get(7) * MS;
            }
            if (limits.tokensPerMinute() > 0) {
                r.limitTokens = limits.tokensPerMinute();
                r.remainingTokens = (Long) v.get(8);
                r.resetTokensNs = (Long) v.get(9) * MS;
            }
            r.minuteEpoch = (Long) v.get(10);
            r.dayEpoch = (Long) v.get(11);
        }
    }

    void close() {
        redis.close();
    }

    private static String script(String name) {
        try (InputStream in = RedisLimitStore.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is missing from the jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String sha1(String s) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-1").digest(s.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-1 is part of every JDK", e);
        }
    }
}
