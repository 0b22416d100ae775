package io.kvgate.control.log;

import java.util.Locale;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gateway's operator log, the one facade every component writes through ({@code Log.info/warn/error/debug}).
 * Lines go through SLF4J to Log4j 2, configured in code by {@link LogSetup} ({@code logging.format: text | json},
 * ISO-8601 UTC timestamps, asynchronous loggers), so the gateway's lines and its libraries' (Netty, Chronicle) share
 * one stream and one format. The level is the operator's ({@code logging.level}, changed at run time with
 * {@code ./kvgate ctl log-level debug}): it is kept here as one volatile, checked before a line reaches SLF4J, and
 * handed to Log4j's {@code kvgate} logger so both agree.
 */
public final class Log {
    public enum Level { ERROR, WARN, INFO, DEBUG }

    /** The logger every facade line goes to (its name is the {@code logger} field of a line). */
    public static final String LOGGER = "kvgate";

    private static volatile Level level = Level.INFO;

    static {
        LogSetup.ensureConfigured(); // before the first line: our configuration, never Log4j's search for a file
    }

    private static final Logger OUT = LoggerFactory.getLogger(LOGGER);

    private Log() {}

    public static Level level() {
        return level;
    }

    /** Sets the level now: this facade's filter and the Log4j logger behind it. */
    public static void level(Level l) {
        level = l;
        LogSetup.applyLevel(l);
    }

    /** Parses {@code error|warn|info|debug}; null when not one of them. */
    public static Level parse(String s) {
        if (s == null) {
            return null;
        }
        try {
            return Level.valueOf(s.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    public static boolean enabled(Level l) {
        return l.ordinal() <= level.ordinal();
    }

    public static void error(String msg) {
        if (enabled(Level.ERROR)) {
            OUT.error(msg);
        }
    }

    public static void warn(String msg) {
        if (enabled(Level.WARN)) {
            OUT.warn(msg);
        }
    }

    public static void info(String msg) {
        if (enabled(Level.INFO)) {
            OUT.info(msg);
        }
    }

    public static void debug(String msg) {
        if (enabled(Level.DEBUG)) {
            OUT.debug(msg);
        }
    }
}
