package io.kvgate.control.config;

import io.kvgate.control.log.Log;
import io.kvgate.control.log.LogSetup;
import java.nio.file.Path;
import java.util.List;

/**
 * The {@code logging} section: the operator log's format and level, and the access log (issue #37 item 2).
 *
 * @param format         {@code logging.format}: {@code text} (default) or {@code json}, for the operator log on stderr
 * @param level          {@code logging.level}: the operator log's level at start ({@code ctl log-level} changes it live)
 * @param accessLog      {@code logging.access_log}: {@link #ACCESS_LOG_OFF} (default), {@link #ACCESS_LOG_STDOUT},
 *                       or a file path (relative paths resolve against the configuration file's directory)
 * @param accessLogQueue {@code logging.access_log_queue}: records the access log holds for its writer thread; a
 *                       request that finds it full is not logged and counted in
 *                       {@code kvgate_access_log_dropped_total}
 */
public record LoggingConfig(LogSetup.Format format, Log.Level level, String accessLog, int accessLogQueue) {
    public static final String ACCESS_LOG_OFF = "off";
    public static final String ACCESS_LOG_STDOUT = "stdout";
    public static final int DEFAULT_ACCESS_LOG_QUEUE = 16_384;
    public static final LoggingConfig DEFAULTS = new LoggingConfig(LogSetup.Format.TEXT, Log.Level.INFO, ACCESS_LOG_OFF,
        DEFAULT_ACCESS_LOG_QUEUE);

    /** Whether requests are logged at all. */
    public boolean accessLogOn() {
        return !ACCESS_LOG_OFF.equals(accessLog);
    }

    /** Reads {@code logging} from {@code parent}; problems name the key, the value and the rule. */
    public static LoggingConfig read(ConfigNode parent, Path baseDir) {
        ConfigNode n = parent.child(LoggingKeys.SECTION.name());
        LogSetup.Format format = LogSetup.parseFormat(LoggingKeys.FORMAT.read(n));
        Log.Level level = Log.parse(LoggingKeys.LEVEL.read(n));
        String accessLog = LoggingKeys.ACCESS_LOG.read(n);
        if (accessLog.isBlank()) {
            n.problem("access_log", accessLog, "must be off, stdout or a file path");
            accessLog = ACCESS_LOG_OFF;
        } else if (!accessLog.equals(ACCESS_LOG_OFF) && !accessLog.equals(ACCESS_LOG_STDOUT)) {
            Path p = Path.of(accessLog);
            if (!p.isAbsolute() && baseDir != null) {
                p = baseDir.resolve(p).normalize();
            }
            Path dir = p.toAbsolutePath().getParent();
            if (dir == null || !java.nio.file.Files.isDirectory(dir)) {
                n.problem("access_log", accessLog, "must be off, stdout or a file in an existing directory (" + dir + " is not one)");
            }
            accessLog = p.toString();
        }
        int queue = LoggingKeys.ACCESS_LOG_QUEUE.read(n);
        if (Integer.bitCount(queue) != 1) {
            n.problem("access_log_queue", queue, "must be a power of two");
            queue = DEFAULT_ACCESS_LOG_QUEUE;
        }
        n.finish();
        return new LoggingConfig(format == null ? LogSetup.Format.TEXT : format, level == null ? Log.Level.INFO : level,
            accessLog, queue);
    }
}
