package io.kvgate.control.config;

/** Section {@code admin_limits}: bounds of the admin listener and the control socket. */
public final class AdminLimitsKeys {
    private AdminLimitsKeys() {}

    public static final ConfigSection<GatewayConfig.AdminLimits> SECTION = ConfigSection.mapping(GatewayKeys.SECTION,
        "admin_limits", "admin listener and control socket bounds (apply to the next connection)", GatewayConfig::adminLimits);

    public static final ConfigKey<GatewayConfig.AdminLimits, Integer> MAX_CONNECTIONS = SECTION.intKey("max_connections", 64, 1, 100_000)
        .doc("one connection more → 503 and close").readBack(GatewayConfig.AdminLimits::maxConnections);
    public static final ConfigKey<GatewayConfig.AdminLimits, Long> IDLE_TIMEOUT_MS = SECTION.longKey("idle_timeout_ms", 60_000, 100,
            86_400_000L)
        .doc("idle admin connections close").readBack(GatewayConfig.AdminLimits::idleTimeoutMs);
    public static final ConfigKey<GatewayConfig.AdminLimits, Integer> MAX_BODY_BYTES = SECTION.intKey("max_body_bytes", 4 << 20,
            1024, 1 << 30)
        .doc("larger admin bodies → 413").readBack(GatewayConfig.AdminLimits::maxBodyBytes);
}
