package io.kvgate.control.config;

/** Section {@code rules[].failover}: mid-stream failover (see [failover](failover.md)); off unless {@code mid_stream}. */
public final class FailoverKeys {
    private FailoverKeys() {}

    public static final ConfigSection<FailoverConfig> SECTION = ConfigSection.optionalMapping(RuleKeys.SECTION, "failover",
        "mid-stream failover (see [failover](failover.md)): a stream whose engine fails continues on another endpoint",
        RuleConfig::failover, FailoverConfig::enabled);

    public static final ConfigKey<FailoverConfig, Boolean> MID_STREAM = SECTION.boolKey("mid_stream", false)
        .doc("continue a stream whose engine failed (connection lost, retryable error event, stall) on another endpoint;"
            + " retry a non-streamed request whole").readBack(FailoverConfig::midStream);
    public static final ConfigKey<FailoverConfig, Integer> MAX_MIGRATIONS = SECTION.intKey("max_migrations",
            FailoverConfig.DEFAULT_MAX_MIGRATIONS, 1, 16)
        .doc("how many times one request may move to another endpoint").readBack(FailoverConfig::maxMigrations);
    public static final ConfigKey<FailoverConfig, Integer> STALL_MS = SECTION.optionalIntKey("stall_ms", 10, 600_000, "off")
        .doc("a started stream with no byte from its engine for this long moves (off: only a lost connection or an error"
            + " event moves it)").readBack(c -> c.stallMs() > 0 ? c.stallMs() : null);
}
