package io.kvgate.dataplane.tenant;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * The gateway's tenancy state: each tenant's usage against its limits (kept by name across reloads), and what the
 * tenant metrics count. The request path asks it to {@link #reserve} before dispatch and to {@link #settle} at the
 * end; the admin API reads {@link #usage}; the metrics read it on scrape.
 *
 * <p><b>Replicas.</b> With {@code rate_limit_store} the counters live in Redis ({@link RedisLimitStore}) and every
 * replica enforces the whole limit. Without it ({@link LocalLimitStore}) every replica enforces
 * {@code floor(limit / replicas)} (at least 1) of each limit, so the fleet never admits more than the limit, and admits less when the balancer spreads a tenant
 * unevenly. {@code max_concurrent} is divided the same way.
 *
 * <p>Thread-safe: usage objects are created once per tenant name and locked per tenant; counters are adders.
 * Tenants without limits are never reserved, so they cost nothing here but their counters.
 */
public final class Tenants {
    private final NanoClock clock;
    private final LocalLimitStore local;
    /** The shared store of the configuration's {@code rate_limit_store}, or null: replaced when a reload changes it. */
    private volatile RedisLimitStore shared;
    private final StoreFailures storeFailures = new StoreFailures();
    /** Opens the shared store's connection (a test gives a fake). */
    private final java.util.function.Function<TenancyConfig.RateLimitStore, RedisScripts> connector;
    private final ConcurrentHashMap<String, Stats> stats = new ConcurrentHashMap<>();
    /**
     * Under a shared store: each tenant's latest reservation the store decided, whose header values are the last known
     * state of its windows ({@link #current}). The request's own object, replaced per request without allocating.
     */
    private final ConcurrentHashMap<String, Reservation> lastShared = new ConcurrentHashMap<>();
    /** How long {@code ctl tenants} waits for the shared store's usage, at least (else the store's {@code timeout_ms}). */
    static final long USAGE_WAIT_MS = 1_000;
    /** {@link #USAGE_WAIT_MS}, shortened by a test whose store never answers. */
    long usageWaitMs = USAGE_WAIT_MS;

    /** The tenant metrics of one tenant. */
    private static final class Stats {
        final ConcurrentHashMap<String, LongAdder> byStatus = new ConcurrentHashMap<>();
        final LongAdder prompt = new LongAdder();
        final LongAdder completion = new LongAdder();
        final LongAdder[] limited = new LongAdder[LimitKind.values().length];

        Stats() {
            for (int i = 0; i < limited.length; i++) {
                limited[i] = new LongAdder();
            }
        }
    }

    public Tenants(NanoClock clock) {
        this(clock, spec -> new LettuceScripts(spec.url(), spec.timeoutMs()));
    }

    Tenants(NanoClock clock, java.util.function.Function<TenancyConfig.RateLimitStore, RedisScripts> connector) {
        this.clock = clock;
        this.local = new LocalLimitStore(clock);
        this.connector = connector;
    }

    /**
     * The store {@code tenancy} names: the shared one of its {@code rate_limit_store} (opened on first use and when a
     * reload changes it; the one it replaces is closed, so its reservations' settlements are lost, see
     * {@link StoreFailures}), or the local one.
     */
    LimitStore store(TenancyConfig tenancy) {
        TenancyConfig.RateLimitStore spec = tenancy.rateLimitStore();
        RedisLimitStore s = shared;
        if (spec == null) {
            return local;
        }
        if (s != null && s.spec.equals(spec)) {
            return s;
        }
        synchronized (this) {
            s = shared;
            if (s == null || !s.spec.equals(spec)) {
                RedisLimitStore old = s;
                s = new RedisLimitStore(spec, connector.apply(spec), local, storeFailures);
                shared = s;
                if (old != null) {
                    old.close();
                }
            }
            return s;
        }
    }

    /** Connects the configuration's shared store now (at start and after a reload), before a request needs it. */
    public void open(TenancyConfig tenancy) {
        store(tenancy);
    }

    /** Closes the shared store's connection (the gateway's shutdown). */
    public synchronized void close() {
        RedisLimitStore s = shared;
        shared = null;
        if (s != null) {
            s.close();
        }
    }

    StoreFailures storeFailures() {
        return storeFailures;
    }

    /** Who a request's key names under {@code config} ({@link TenantDirectory#of}). */
    public TenantDirectory directory(GatewayConfig config) {
        return TenantDirectory.of(config);
    }

    /** This replica's share of {@code limits}: each divided by {@code replicas}, rounded down, at least 1 where set. */
    public static Limits share(Limits limits, TenancyConfig tenancy) {
        int replicas = tenancy.replicas();
        if (replicas <= 1) {
            return limits;
        }
        return new Limits(part(limits.requestsPerMinute(), replicas), part(limits.tokensPerMinute(), replicas),
            part(limits.maxConcurrent(), replicas), part(limits.tokensPerDay(), replicas));
    }

    private static long part(long limit, int replicas) {
        return limit <= 0 ? limit : Math.max(1, limit / replicas);
    }

    /**
     * Reserves a request of {@code tenant} holding {@code tokens} (prompt plus completion budget) against its limits,
     * or denies it (counted under {@code kvgate_tenant_limited_total}). Null for a tenant without limits: nothing is
     * held and its answers carry no rate-limit headers.
     */
    public Reservation reserve(Tenant tenant, TenancyConfig tenancy, long tokens, boolean estimated) {
        if (!tenant.limited()) {
            return null;
        }
        Reservation r = new Reservation(tenant.name(), tokens, estimated);
        local.reserve(r, tenant.limits(), tenancy);
        counted(r);
        return r;
    }

    /**
     * What the rate-limit headers of an answer to {@code tenant} say when its request reserved nothing (it was
     * refused before the limits check, or is a local route such as {@code /v1/models}): the tenant's windows, unchanged.
     * A reservation neither granted nor denied, so settling it does nothing. Null for a tenant without limits (no
     * headers). Without a store, this replica's windows now. Under a shared {@code rate_limit_store}, the last state the
     * store answered for the tenant on this replica (asking Redis for a refusal's headers would add a round trip to a
     * path that has none): its remaining counts as they were then, its resets less the time since (a window whose
     * reset has passed is reported empty); null when this replica has no answer yet for the tenant's limits as
     * configured now. Allocates one small object: off the hot path, which reuses its request's reservation.
     */
    public Reservation current(Tenant tenant, TenancyConfig tenancy) {
        if (!tenant.limited()) {
            return null;
        }
        Reservation r = new Reservation(tenant.name(), 0, false);
        if (tenancy.rateLimitStore() == null) {
            local.peek(r, tenant.limits(), tenancy);
            return r;
        }
        Reservation last = lastShared.get(tenant.name());
        Limits l = tenant.limits();
        if (last == null || last.limitRequests != (l.requestsPerMinute() > 0 ? l.requestsPerMinute() : -1)
            || last.limitTokens != (l.tokensPerMinute() > 0 ? l.tokensPerMinute() : -1)) {
            return null; // nothing known yet, or known under other limits (a reload changed them)
        }
        long age = clock.nanoTime() - last.decidedNs;
        r.limitRequests = last.limitRequests;
        r.remainingRequests = last.resetRequestsNs <= age ? last.limitRequests : last.remainingRequests;
        r.resetRequestsNs = Math.max(0, last.resetRequestsNs - age);
        r.limitTokens = last.limitTokens;
        r.remainingTokens = last.resetTokensNs <= age ? last.limitTokens : last.remainingTokens;
        r.resetTokensNs = Math.max(0, last.resetTokensNs - age);
        return r;
    }

    /**
     * The front door's reservation: as {@link #reserve(Tenant, TenancyConfig, long, boolean)}, in the store
     * {@code tenancy} names, answered through {@code then} on {@code loop} (at once without a shared store; when Redis
     * answers, or {@code on_failure} decided, with one). A tenant without limits gets null at once, and no store is
     * asked.
     */
    public void reserve(Tenant tenant, TenancyConfig tenancy, long tokens, boolean estimated, Loop loop,
                        java.util.function.Consumer<Reservation> then) {
        if (!tenant.limited()) {
            then.accept(null);
            return;
        }
        Reservation r = new Reservation(tenant.name(), tokens, estimated);
        store(tenancy).reserve(r, tenant.limits(), tenancy, loop, done -> {
            counted(done);
            if (done.store instanceof RedisLimitStore && !done.unchecked && done.storeUnavailable == null) {
                done.decidedNs = clock.nanoTime();
                lastShared.put(done.tenant, done);
            }
            then.accept(done);
        });
    }

    private void counted(Reservation r) {
        if (!r.granted && r.deniedBy != null) {
            stats(r.tenant).limited[r.deniedBy.ordinal()].increment();
        }
    }

    /**
     * Ends a granted reservation: its tokens become {@code usedTokens} (the engine's usage: prompt plus completion), or
     * are released when {@code usedTokens < 0} (an error, a client gone before usage, a timeout). Once per
     * reservation; a denied or settled one is left alone.
     */
    public void settle(Reservation r, long usedTokens) {
        if (r == null || !r.granted || r.settled || r.unchecked) {
            return;
        }
        r.settled = true;
        r.store.settle(r, usedTokens);
    }

    /** Counts an answered request of {@code tenant} with HTTP {@code status} ({@code kvgate_tenant_requests_total}). */
    public void countRequest(String tenant, int status) {
        stats(tenant).byStatus.computeIfAbsent(Integer.toString(status), s -> new LongAdder()).increment();
    }

    /** Counts the engine-reported tokens of an answer of {@code tenant} ({@code kvgate_tenant_tokens_total}). */
    public void countTokens(String tenant, long prompt, long completion) {
        Stats s = stats(tenant);
        if (prompt > 0) {
            s.prompt.add(prompt);
        }
        if (completion > 0) {
            s.completion.add(completion);
        }
    }

    private Stats stats(String tenant) {
        Stats s = stats.get(tenant);
        return s != null ? s : stats.computeIfAbsent(tenant, t -> new Stats());
    }

    /** Registers the tenant families; labels are tenant names from configuration and fixed vocabularies. */
    public void register(PrometheusRegistry registry) {
        storeFailures.register(registry);
        CounterWithCallback.builder().name("kvgate_tenant_requests_total")
            .help("Client requests answered, by tenant and HTTP status (tenant 'anonymous': the flat api_keys, client"
                + " certificates, or no key).").labelNames("tenant", "status")
            .callback(cb -> stats.forEach((t, s) -> s.byStatus.forEach((st, a) -> cb.call(a.sum(), t, st)))).register(registry);
        CounterWithCallback.builder().name("kvgate_tenant_tokens_total")
            .help("Tokens the engines reported (usage) for a tenant's answers, by tenant and kind: prompt, completion.")
            .labelNames("tenant", "kind").callback(cb -> stats.forEach((t, s) -> {
                cb.call(s.prompt.sum(), t, "prompt");
                cb.call(s.completion.sum(), t, "completion");
            })).register(registry);
        CounterWithCallback.builder().name("kvgate_tenant_limited_total")
            .help("Requests answered 429 because their tenant was over a limit, by tenant and limit (max_concurrent,"
                + " requests_per_minute, tokens_per_minute, tokens_per_day).").labelNames("tenant", "limit")
            .callback(cb -> stats.forEach((t, s) -> {
                for (LimitKind k : LimitKind.values()) {
                    long v = s.limited[k.ordinal()].sum();
                    if (v > 0) {
                        cb.call(v, t, k.label);
                    }
                }
            })).register(registry);
    }

    /**
     * What {@code ctl tenants} shows for each tenant of {@code config}: its limits (fleet-wide and this replica's
     * share), its usage on this replica (requests and tokens in the last minute, tokens in the last day, in flight;
     * under a shared store only what {@code on_failure: local} held here), its answers so far, and under a shared
     * {@code rate_limit_store} the tenant's usage in the store over every replica ({@code shared}: read from Redis,
     * waited for at most {@link #USAGE_WAIT_MS} or the store's {@code timeout_ms}, else an {@code error} saying why).
     * Blocks for that wait at most: the admin API's thread, never a request's.
     */
    public List<Map<String, Object>> usage(GatewayConfig config) {
        List<Map<String, Object>> rows = new ArrayList<>();
        TenancyConfig tenancy = config.tenancy();
        long now = clock.nanoTime();
        Map<String, java.util.concurrent.CompletableFuture<long[]>> shared = sharedUsage(config);
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(
            tenancy.rateLimitStore() == null ? 0 : usageWait(tenancy.rateLimitStore()));
        for (Tenant t : directory(config).tenants().values()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("tenant", t.name());
            row.put("limits", limitsMap(t.limits()));
            row.put("replica_share", limitsMap(share(t.limits(), tenancy)));
            TenantUsage u = local.usage(t.name());
            row.put("used", usedMap(u == null ? new long[4] : u.snapshot(now)));
            var f = shared.get(t.name());
            if (f != null) {
                row.put("shared", sharedRow(tenancy.rateLimitStore(), f, deadline));
            }
            Stats st = stats.get(t.name());
            Map<String, Object> answered = new LinkedHashMap<>();
            Map<String, Object> limited = new LinkedHashMap<>();
            if (st != null) {
                st.byStatus.forEach((code, a) -> answered.put(code, a.sum()));
                for (LimitKind k : LimitKind.values()) {
                    if (st.limited[k.ordinal()].sum() > 0) {
                        limited.put(k.label, st.limited[k.ordinal()].sum());
                    }
                }
                row.put("tokens", Map.of("prompt", st.prompt.sum(), "completion", st.completion.sum()));
            }
            row.put("requests", answered);
            row.put("limited", limited);
            rows.add(row);
        }
        return rows;
    }

    /** The store's usage of every limited tenant, asked all at once (one round trip each, in parallel). */
    private Map<String, java.util.concurrent.CompletableFuture<long[]>> sharedUsage(GatewayConfig config) {
        Map<String, java.util.concurrent.CompletableFuture<long[]>> out = new LinkedHashMap<>();
        if (config.tenancy().rateLimitStore() == null) {
            return out;
        }
        RedisLimitStore s = (RedisLimitStore) store(config.tenancy());
        for (Tenant t : directory(config).tenants().values()) {
            if (t.limited()) {
                out.put(t.name(), s.peek(t.name()).toCompletableFuture());
            }
        }
        return out;
    }

    private long usageWait(TenancyConfig.RateLimitStore spec) {
        return usageWaitMs == USAGE_WAIT_MS ? Math.max(USAGE_WAIT_MS, spec.timeoutMs()) : usageWaitMs;
    }

    private Map<String, Object> sharedRow(TenancyConfig.RateLimitStore spec,
                                          java.util.concurrent.CompletableFuture<long[]> f, long deadline) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("store", spec.url());
        try {
            m.putAll(usedMap(f.get(Math.max(0, deadline - System.nanoTime()), java.util.concurrent.TimeUnit.NANOSECONDS)));
        } catch (java.util.concurrent.TimeoutException e) {
            m.put("error", "the store did not answer within " + usageWait(spec) + " ms");
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            m.put("error", "the store failed: " + c.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            m.put("error", "interrupted while waiting for the store");
        }
        return m;
    }

    private static Map<String, Object> usedMap(long[] s) {
        Map<String, Object> used = new LinkedHashMap<>();
        used.put("requests_last_minute", s[0]);
        used.put("tokens_last_minute", s[1]);
        used.put("tokens_last_day", s[2]);
        used.put("in_flight", s[3]);
        return used;
    }

    private static Map<String, Object> limitsMap(Limits l) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (l.requestsPerMinute() > 0) m.put("requests_per_minute", l.requestsPerMinute());
        if (l.tokensPerMinute() > 0) m.put("tokens_per_minute", l.tokensPerMinute());
        if (l.maxConcurrent() > 0) m.put("max_concurrent", l.maxConcurrent());
        if (l.tokensPerDay() > 0) m.put("tokens_per_day", l.tokensPerDay());
        return m;
    }
}
