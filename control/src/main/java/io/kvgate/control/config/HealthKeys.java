package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Health;

/** Section {@code health}: active probes and the per-endpoint circuit breaker. */
public final class HealthKeys {
    private HealthKeys() {}

    public static final ConfigSection<Health> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "health",
        "active probes and the per-endpoint circuit breaker", GatewayConfig::health);

    /** Unset: each rule's engine profile names it (data plane; {@code /health} on every engine supported today). */
    public static final ConfigKey<Health, String> PATH = SECTION.stringKey("path", null)
        .defaultText("the engine's (`/health`)")
        .doc("probe path (must start with `/`) of every rule's endpoints; unset, each engine's own health route").readBack(Health::path);
    public static final ConfigKey<Health, Long> INTERVAL_MS = SECTION.longKey("interval_ms", 2_000, 10, 3_600_000)
        .doc("time between probes of one endpoint").readBack(Health::intervalMs);
    public static final ConfigKey<Health, Long> TIMEOUT_MS = SECTION.longKey("timeout_ms", 1_000, 1, 600_000)
        .doc("bound of one probe").readBack(Health::timeoutMs);
    public static final ConfigKey<Health, Integer> HEALTHY_THRESHOLD = SECTION.intKey("healthy_threshold", 2, 1, 100)
        .doc("consecutive good probes to mark an endpoint up").readBack(Health::healthyThreshold);
    public static final ConfigKey<Health, Integer> UNHEALTHY_THRESHOLD = SECTION.intKey("unhealthy_threshold", 3, 1, 100)
        .doc("consecutive failed probes to mark it down").readBack(Health::unhealthyThreshold);
    public static final ConfigKey<Health, Integer> BREAKER_FAILURE_THRESHOLD = SECTION.intKey("breaker_failure_threshold", 5, 1,
            10_000)
        .doc("consecutive request failures that open the endpoint's breaker").readBack(Health::breakerFailureThreshold);
    public static final ConfigKey<Health, Long> BREAKER_OPEN_MS = SECTION.longKey("breaker_open_ms", 5_000, 1, 3_600_000)
        .doc("how long an open breaker stays open before a half-open trial").readBack(Health::breakerOpenMs);
    public static final ConfigKey<Health, Long> RETRY_AFTER_SECONDS = SECTION.longKey("retry_after_seconds", 1, 1, 3600)
        .doc("`Retry-After` on 503s").readBack(Health::retryAfterSeconds);
}
