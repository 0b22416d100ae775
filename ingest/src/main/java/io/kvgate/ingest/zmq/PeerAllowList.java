package io.kvgate.ingest.zmq;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.List;

/**
 * The peers allowed to connect to a bound event socket ({@code kv_events_allow}): IP literals and CIDR blocks, IPv4
 * and IPv6. An empty list allows every peer. Parsing never touches DNS (only literals are accepted).
 *
 * <p>Immutable; thread-safe.
 */
final class PeerAllowList {
    private final byte[][] networks;
    private final int[] prefixBits;

    PeerAllowList(List<String> entries) {
        networks = new byte[entries.size()][];
        prefixBits = new int[entries.size()];
        for (int i = 0; i < entries.size(); i++) {
            Object[] p = parse(entries.get(i));
            networks[i] = (byte[]) p[0];
            prefixBits[i] = (Integer) p[1];
        }
    }

    boolean isEmpty() {
        return networks.length == 0;
    }

    /** Whether {@code address} (an IP literal as ZAP reports it) is in the list; an empty list allows all. */
    boolean allows(String address) {
        if (networks.length == 0) {
            return true;
        }
        byte[] a = literal(address);
        if (a == null) {
            return false;
        }
        for (int i = 0; i < networks.length; i++) {
            if (inNetwork(a, networks[i], prefixBits[i])) {
                return true;
            }
        }
        return false;
    }

    private static boolean inNetwork(byte[] a, byte[] net, int bits) {
        if (a.length != net.length) {
            return false;
        }
        int full = bits >>> 3;
        for (int i = 0; i < full; i++) {
            if (a[i] != net[i]) {
                return false;
            }
        }
        int rest = bits & 7;
        if (rest == 0) {
            return true;
        }
        int mask = (0xFF << (8 - rest)) & 0xFF;
        return (a[full] & mask) == (net[full] & mask);
    }

    /** {address bytes, prefix bits}; throws naming the entry when it is not an IP literal or CIDR block. */
    static Object[] parse(String entry) {
        String addr = entry;
        int bits = -1;
        int slash = entry.indexOf('/');
        if (slash >= 0) {
            addr = entry.substring(0, slash);
            try {
                bits = Integer.parseInt(entry.substring(slash + 1));
            } catch (NumberFormatException e) {
                bits = -2;
            }
        }
        byte[] a = literal(addr);
        if (a == null || bits == -2 || bits > a.length * 8) {
            throw new IllegalArgumentException("kv_events_allow=" + entry
                + " must be an IP address or CIDR block (e.g. 10.0.0.7, 10.0.0.0/24, fd00::/8)");
        }
        return new Object[] {a, bits < 0 ? a.length * 8 : bits};
    }

    /** The bytes of an IPv4/IPv6 literal, or null for anything else (never a DNS lookup). */
    static byte[] literal(String s) {
        if (s == null || s.isEmpty()) {
            return null;
        }
        String t = s.startsWith("[") && s.endsWith("]") ? s.substring(1, s.length() - 1) : s;
        boolean v4 = t.matches("\\d{1,3}(\\.\\d{1,3}){3}");
        boolean v6 = !v4 && t.indexOf(':') >= 0 && t.matches("[0-9A-Fa-f:.%a-zA-Z0-9]+");
        if (!v4 && !v6) {
            return null;
        }
        if (v4) {
            for (String part : t.split("\\.")) {
                if (Integer.parseInt(part) > 255) {
                    return null;
                }
            }
        }
        try {
            byte[] b = InetAddress.getByName(t).getAddress(); // a literal: parsed, not resolved
            if (b.length == 16 && isV4Mapped(b)) {
                return java.util.Arrays.copyOfRange(b, 12, 16);
            }
            return b;
        } catch (UnknownHostException e) {
            return null;
        }
    }

    private static boolean isV4Mapped(byte[] b) {
        for (int i = 0; i < 10; i++) {
            if (b[i] != 0) {
                return false;
            }
        }
        return (b[10] & 0xFF) == 0xFF && (b[11] & 0xFF) == 0xFF;
    }
}
