package io.kvgate.control.config;

import java.util.List;
import java.util.Locale;

/** Section {@code logging}: the operator log's format and level, and the access log (see [logging](logging.md)). */
public final class LoggingKeys {
    private LoggingKeys() {}

    public static final ConfigSection<LoggingConfig> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "logging",
        "the operator log and the access log (see [logging](logging.md)); set up at start-up", GatewayConfig::logging)
        .restartAsWhole();

    public static final ConfigKey<LoggingConfig, String> FORMAT = SECTION.oneOfKey("format", "text", List.of("text", "json"))
        .doc("the operator log on stderr: ISO-8601 UTC timestamped text lines, or one JSON object per line")
        .readBack(l -> l.format().name().toLowerCase(Locale.ROOT));
    public static final ConfigKey<LoggingConfig, String> LEVEL = SECTION.oneOfKey("level", "info",
            List.of("error", "warn", "info", "debug"))
        .doc("the operator log's level at start (`ctl log-level` changes it live)")
        .readBack(l -> l.level().name().toLowerCase(Locale.ROOT));
    public static final ConfigKey<LoggingConfig, String> ACCESS_LOG = SECTION.stringKey("access_log", LoggingConfig.ACCESS_LOG_OFF)
        .typeText("`off`, `stdout` or path")
        .doc("one JSON line per request, written off the I/O threads (a relative path resolves against the config file)")
        .readBack(LoggingConfig::accessLog);
    public static final ConfigKey<LoggingConfig, Integer> ACCESS_LOG_QUEUE = SECTION.intKey("access_log_queue",
            LoggingConfig.DEFAULT_ACCESS_LOG_QUEUE, 64, 1 << 22)
        .doc("lines the access log holds for its writer (a power of two); a request that finds it full is counted in"
            + " `kvgate_access_log_dropped_total`, not logged")
        .readBack(LoggingConfig::accessLogQueue);
}
