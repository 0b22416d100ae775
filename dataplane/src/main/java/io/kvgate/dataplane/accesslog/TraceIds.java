package io.kvgate.dataplane.accesslog;

/**
 * The trace id of a request, from the client's W3C Trace Context header ({@code traceparent:
 * 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>}). A malformed header, or the all-zero id the spec calls
 * invalid, gives none: the access log then writes {@code null} rather than something a tracing backend cannot find.
 */
public final class TraceIds {
    public static final String HEADER = "traceparent";

    private TraceIds() {}

    /** The 32 lowercase hex digits of {@code traceparent}'s trace id, or null. */
    public static String fromTraceparent(String header) {
        if (header == null) {
            return null;
        }
        String h = header.strip();
        // version 2 hex, '-', trace id 32, '-', parent id 16, '-', flags 2; later versions may append "-..." fields.
        if (h.length() < 55 || h.charAt(2) != '-' || h.charAt(35) != '-' || h.charAt(52) != '-'
            || (h.length() > 55 && h.charAt(55) != '-') || h.startsWith("ff")) {
            return null;
        }
        if (!hex(h, 0, 2) || !hex(h, 3, 35) || !hex(h, 36, 52) || !hex(h, 53, 55)) {
            return null;
        }
        boolean zero = true;
        for (int i = 3; i < 35; i++) {
            zero &= h.charAt(i) == '0';
        }
        return zero ? null : h.substring(3, 35);
    }

    private static boolean hex(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            char c = s.charAt(i);
            if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
                return false;
            }
        }
        return true;
    }
}
