package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.HealthOverride;

/** Section {@code rules[].health}: where this rule's endpoints are probed instead of the global {@code health}. */
public final class RuleHealthKeys {
    private RuleHealthKeys() {}

    public static final ConfigSection<HealthOverride> SECTION = ConfigSection.optionalMapping(RuleKeys.SECTION, "health",
        "per-rule probe settings (e.g. SGLang's deep `/health_generate`)", RuleConfig::health,
        h -> h.path() != null || h.timeoutMs() > 0);

    public static final ConfigKey<HealthOverride, String> PATH = SECTION.stringKey("path", null)
        .defaultText("global `health.path`").doc("probe path of this rule's endpoints (must start with `/`)")
        .readBack(HealthOverride::path);
    public static final ConfigKey<HealthOverride, Long> TIMEOUT_MS = SECTION.longKey("timeout_ms", 0, 1, 600_000)
        .defaultText("global `health.timeout_ms`").doc("probe timeout of this rule's endpoints")
        .readBack(h -> h.timeoutMs() > 0 ? h.timeoutMs() : null);
}
