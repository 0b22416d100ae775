package io.kvgate.dataplane.tenant;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The counters in this replica's memory: one {@link TenantUsage} per tenant name (kept across reloads), each replica
 * enforcing {@link Tenants#share its share} of every limit. What serves without {@code rate_limit_store}, and when the
 * store fails under {@code on_failure: local}. Synchronous: {@code then} runs before {@link #reserve} returns.
 */
final class LocalLimitStore implements LimitStore {
    private final NanoClock clock;
    private final ConcurrentHashMap<String, TenantUsage> usage = new ConcurrentHashMap<>();

    LocalLimitStore(NanoClock clock) {
        this.clock = clock;
    }

    /** Decides {@code r} against this replica's share of {@code limits}. */
    void reserve(Reservation r, Limits limits, TenancyConfig tenancy) {
        TenantUsage u = usage.computeIfAbsent(r.tenant, TenantUsage::new);
        r.store = this; // settled here too, also when a shared store's on_failure: local sent it here
        r.usage = u;
        u.reserve(r, Tenants.share(limits, tenancy), clock.nanoTime());
    }

    /** Fills {@code r}'s header values from this replica's windows of its tenant, reserving nothing. */
    void peek(Reservation r, Limits limits, TenancyConfig tenancy) {
        TenantUsage u = usage.computeIfAbsent(r.tenant, TenantUsage::new);
        u.peek(r, Tenants.share(limits, tenancy), clock.nanoTime());
    }

    @Override
    public void reserve(Reservation r, Limits limits, TenancyConfig tenancy, Loop loop, Consumer<Reservation> then) {
        reserve(r, limits, tenancy);
        then.accept(r);
    }

    @Override
    public void settle(Reservation r, long usedTokens) {
        r.usage.settle(r, usedTokens, clock.nanoTime());
    }

    /** The tenant's counters on this replica, or null before its first request. */
    TenantUsage usage(String tenant) {
        return usage.get(tenant);
    }
}
