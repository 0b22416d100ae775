package io.kvgate.dataplane.route;

/**
 * Session affinity keys as the routing stage stores them: a 64-bit hash of the key text (the client's {@code user},
 * a header or a cookie value). The pin table is then bounded in bytes as well as entries, whatever the client sends
 * (a unique multi-megabyte {@code user} per request costs 8 bytes, not megabytes: reliability review M6). Two
 * conversations whose keys collide share a pin, which costs only cache locality.
 *
 * <p>Thread-safe (pure functions). Computed on the I/O thread before the request enters the routing ring.
 */
public final class SessionKeys {
    /** "No session key": hashes are never this value. */
    public static final long NONE = 0L;

    private SessionKeys() {}

    /** The key's hash, or {@link #NONE} for null. Never allocates. */
    public static long hash(CharSequence key) {
        if (key == null) {
            return NONE;
        }
        // FNV-1a over the UTF-16 units (about a nanosecond per char), then a full avalanche so that the table's low
        // bits depend on every char.
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < key.length(); i++) {
            h = (h ^ key.charAt(i)) * 0x100000001b3L;
        }
        h = mix(h ^ key.length());
        return h == NONE ? 1L : h;
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }
}
