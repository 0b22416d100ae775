package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import java.util.function.Consumer;

/**
 * Where a tenant's counters live: this replica's memory ({@link LocalLimitStore}, each replica enforcing its share of
 * every limit) or Redis shared by all replicas ({@link RedisLimitStore}, the whole limit). {@link Tenants} picks one per
 * the configuration's {@code rate_limit_store}.
 */
interface LimitStore {
    /**
     * Decides {@code r} against {@code limits} (the tenant's fleet-wide limits) and fills what its answer's headers say,
     * then calls {@code then} with it, exactly once, on {@code loop}: at once for a local store, when the store answers
     * (or {@code on_failure} decided) for a shared one.
     */
    void reserve(Reservation r, Limits limits, TenancyConfig tenancy, Loop loop, Consumer<Reservation> then);

    /** Ends a granted reservation of this store: its tokens become {@code usedTokens}, or are released when negative. */
    void settle(Reservation r, long usedTokens);
}
