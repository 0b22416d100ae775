package io.kvgate.control.config;

/** Section {@code shutdown}: what SIGTERM/SIGINT do before the listener closes (see [operations](operations.md)). */
public final class ShutdownKeys {
    private ShutdownKeys() {}

    public static final ConfigSection<ShutdownConfig> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "shutdown",
        "what SIGTERM/SIGINT do before the listener closes", GatewayConfig::shutdown);

    public static final ConfigKey<ShutdownConfig, Long> DRAIN_DELAY_MS = SECTION.longKey("drain_delay_ms",
            ShutdownConfig.DEFAULTS.drainDelayMs(), 0, ShutdownConfig.MAX_DRAIN_DELAY_MS)
        .doc("after the signal, `/ready` answers 503 while the gateway keeps accepting and serving this long (time for"
            + " balancers to take it out of rotation), then stops accepting and drains; 0 = at once")
        .readBack(ShutdownConfig::drainDelayMs);
}
