package io.kvgate.dataplane.route;

import java.util.Locale;

/**
 * Admission control's priority classes, highest first (the ordinal is the rank: a lower ordinal is served first and
 * shed last). The lower-case name is the {@code X-Kvgate-Priority} value and the metrics' {@code class} label.
 */
public enum PriorityClass {
    INTERACTIVE, STANDARD, BATCH;

    /** The request header that names a request's class. */
    public static final String HEADER = "x-kvgate-priority";

    private static final PriorityClass[] VALUES = values();

    public final String label = name().toLowerCase(Locale.ROOT);

    /** The class named {@code value} (case-insensitive, surrounding blanks ignored), or null when it names none. */
    public static PriorityClass parse(String value) {
        if (value == null) {
            return null;
        }
        String v = value.strip();
        for (PriorityClass c : VALUES) {
            if (c.label.equalsIgnoreCase(v)) {
                return c;
            }
        }
        return null;
    }

    static PriorityClass of(int ordinal) {
        return VALUES[ordinal];
    }

    static int count() {
        return VALUES.length;
    }
}
