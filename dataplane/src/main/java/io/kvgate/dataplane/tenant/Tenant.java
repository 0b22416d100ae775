package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.TenancyConfig;
import io.kvgate.dataplane.route.PriorityClass;
import java.util.Set;

/**
 * A caller as one configuration generation resolved it: who it is, what it may use and what bounds it. Built by
 * {@link TenantDirectory} from {@code tenants[]} (or the one {@link #ANONYMOUS} tenant of the flat {@code api_keys} and
 * of a gateway without keys). Limits' counters are not here: they survive reloads by {@link #name} ({@link Tenants}).
 * Immutable.
 *
 * @param name             the metrics' {@code tenant} label and the cache-salt input
 * @param models           the models it may use; empty: every model
 * @param priority         its admission class, or null: the header's (when allowed) or {@code standard}
 * @param priorityHeader   whether its clients choose their class with {@code X-Kvgate-Priority}
 * @param limits           its limits (as configured, for the whole fleet)
 * @param cacheSalt        the {@code cache_salt} its requests carry on vLLM and SGLang rules, or null (no salt)
 * @param refusesClientSalt whether a client's own {@code cache_salt} is refused (400) rather than replaced
 */
public record Tenant(String name, Set<String> models, PriorityClass priority, boolean priorityHeader,
                     TenancyConfig.Limits limits, String cacheSalt, boolean refusesClientSalt) {
    /** The name of the anonymous tenant: callers of the flat {@code api_keys}, of a certificate identity, or of no key. */
    public static final String ANONYMOUS_NAME = "anonymous";

    /** The anonymous tenant without a cache salt: every model, the client's priority header, no limits. */
    public static final Tenant ANONYMOUS = new Tenant(ANONYMOUS_NAME, Set.of(), null, true, TenancyConfig.Limits.NONE, null,
        false);

    /** Whether the tenant may use {@code model}. */
    public boolean allows(String model) {
        return models.isEmpty() || models.contains(model);
    }

    /** Whether any limit applies (then its requests are reserved, settled and answered with rate-limit headers). */
    public boolean limited() {
        return limits.any();
    }
}
