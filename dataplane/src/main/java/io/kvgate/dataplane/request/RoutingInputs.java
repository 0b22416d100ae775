package io.kvgate.dataplane.request;

/**
 * What a request brings to the routing stage besides its fields: the exact prompt tokens (rendered and tokenized on
 * the I/O thread), the cache salt, the session affinity key, and, for {@code chwbl} rules without a tokenizer, the
 * hash of the request text's prefix ({@link #NO_TEXT_KEY} when there is none). Immutable.
 */
public record RoutingInputs(int[] promptTokens, String cacheSalt, String sessionKey, long textPrefixKey) {
    /** No text-prefix key (a computed key is never this value). */
    public static final long NO_TEXT_KEY = 0L;
    public static final RoutingInputs NONE = new RoutingInputs(null, null, null);

    public RoutingInputs(int[] promptTokens, String cacheSalt, String sessionKey) {
        this(promptTokens, cacheSalt, sessionKey, NO_TEXT_KEY);
    }

    /**
     * The key of the first {@code chars} characters of {@code text} (all of it if shorter): 64-bit FNV-1a over the
     * UTF-16 code units, finished with a mixer; never {@link #NO_TEXT_KEY}. {@link #NO_TEXT_KEY} for empty text.
     */
    public static long textPrefixKey(CharSequence text, int chars) {
        int n = Math.min(chars, text.length());
        if (n == 0) {
            return NO_TEXT_KEY;
        }
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < n; i++) {
            h = (h ^ text.charAt(i)) * 0x100000001b3L;
        }
        h ^= n;
        h = (h ^ (h >>> 33)) * 0xff51afd7ed558ccdL;
        h = (h ^ (h >>> 33)) * 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h == NO_TEXT_KEY ? 1 : h;
    }
}
