package io.kvgate.control.log;

import java.util.Locale;

/**
 * The gateway's operator log: one line per event on stderr, prefixed {@code kvgate: }, filtered by a level an
 * operator can change at run time ({@code ./kvgate ctl log-level debug}). The level is process-wide by nature (one
 * process, one stderr); it is the only mutable static here and it is a single volatile.
 */
public final class Log {
    public enum Level { ERROR, WARN, INFO, DEBUG }

    private static volatile Level level = Level.INFO;

    private Log() {}

    public static Level level() {
        return level;
    }

    public static void level(Level l) {
        level = l;
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
        write(Level.ERROR, msg);
    }

    public static void warn(String msg) {
        write(Level.WARN, msg);
    }

    public static void info(String msg) {
        write(Level.INFO, msg);
    }

    public static void debug(String msg) {
        write(Level.DEBUG, msg);
    }

    private static void write(Level l, String msg) {
        if (enabled(l)) {
            System.err.println("kvgate: " + (l == Level.INFO ? "" : l.name().toLowerCase(Locale.ROOT) + ": ") + msg);
        }
    }
}
