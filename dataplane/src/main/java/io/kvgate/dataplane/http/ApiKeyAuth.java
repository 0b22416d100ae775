package io.kvgate.dataplane.http;

import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.List;

/**
 * Secret checks of the client listener, decided from the request head alone: {@code api_keys} on every
 * {@code /v1/*} route (and {@code /metrics} when keys are set), and the admin token that unlocks
 * {@code X-Kvgate-Explain}. Comparisons take time that depends only on the configured secrets' lengths
 * (every character of every key compared, {@link MessageDigest#isEqual} for the admin token), and the API-key check
 * allocates nothing (it runs on every request). Stateless.
 */
public final class ApiKeyAuth {
    /** Header that carries the admin token on client requests (to unlock {@code X-Kvgate-Explain}). */
    public static final String ADMIN_TOKEN_HEADER = "x-kvgate-admin-token";

    private ApiKeyAuth() {}

    /** {@link #matchedKey}'s answer when no keys are configured: every request is authorized, by no key. */
    public static final int NO_KEYS = -2;
    /** {@link #matchedKey}'s answer when the request carries no configured key. */
    public static final int REFUSED = -1;

    /** Whether the head carries {@code Authorization: Bearer <one of keys>}; true when no keys are configured. */
    public static boolean authorized(List<String> keys, HttpHeaders headers) {
        return matchedKey(keys, headers) != REFUSED;
    }

    /**
     * Which of {@code keys} the head's {@code Authorization: Bearer} presents: its index, {@link #REFUSED} for none,
     * {@link #NO_KEYS} when no keys are configured. Every key is compared whichever matches (constant time).
     */
    public static int matchedKey(List<String> keys, HttpHeaders headers) {
        if (keys.isEmpty()) {
            return NO_KEYS;
        }
        String auth = headers.get(HttpHeaderNames.AUTHORIZATION);
        if (auth == null || !auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return REFUSED;
        }
        int from = 7;
        int to = auth.length();
        while (from < to && auth.charAt(from) <= ' ') {
            from++;
        }
        while (to > from && auth.charAt(to - 1) <= ' ') {
            to--;
        }
        int matched = REFUSED;
        for (int i = 0, n = keys.size(); i < n; i++) {
            boolean same = sameSecret(keys.get(i), auth, from, to);
            matched = same && matched == REFUSED ? i : matched;
        }
        return matched;
    }

    /** The key ids of the last key list asked for, by index (the list is replaced whole on a reload). */
    private record KeyIds(List<String> keys, String[] ids) {}

    private static volatile KeyIds keyIds = new KeyIds(List.of(), new String[0]);

    /**
     * The access log's name of key {@code index} of {@code keys}: {@code sha256:} and the first 12 hex digits of the
     * key's SHA-256, never the secret (an operator finds a key's id with {@code printf %s KEY | sha256sum}). Null for
     * no key. Computed once per key list.
     */
    public static String keyId(List<String> keys, int index) {
        if (index < 0 || index >= keys.size()) {
            return null;
        }
        KeyIds k = keyIds;
        if (k.keys() != keys) {
            String[] ids = new String[keys.size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = fingerprint(keys.get(i));
            }
            k = new KeyIds(keys, ids);
            keyIds = k;
        }
        return k.ids()[index];
    }

    static String fingerprint(String key) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
            return "sha256:" + java.util.HexFormat.of().formatHex(d, 0, 6);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }

    /**
     * Whether a verified client certificate's subject CN ({@code identity}, null without one) is one of
     * {@code tls.client_identities}. Not a secret (the certificate's verification is the proof), so a plain comparison.
     */
    public static boolean identityAuthorized(List<String> identities, String identity) {
        return identity != null && identities.contains(identity);
    }

    /**
     * Whether {@code presented[from, to)} equals {@code key}, in time that depends on the key's length only. Chars
     * compare as the UTF-8 bytes did (the header's chars are its bytes; a key is configuration text).
     */
    static boolean sameSecret(String key, String presented, int from, int to) {
        int length = to - from;
        int diff = key.length() ^ length;
        for (int i = 0; i < key.length(); i++) {
            diff |= key.charAt(i) ^ (i < length ? presented.charAt(from + i) : 0);
        }
        return diff == 0;
    }

    /** Whether the head carries the configured admin token in {@value #ADMIN_TOKEN_HEADER}; false when none is set. */
    public static boolean adminTokenPresented(String adminToken, HttpHeaders headers) {
        if (adminToken == null || adminToken.isEmpty()) {
            return false;
        }
        String presented = headers.get(ADMIN_TOKEN_HEADER);
        return presented != null
            && MessageDigest.isEqual(adminToken.getBytes(StandardCharsets.UTF_8), presented.trim().getBytes(StandardCharsets.UTF_8));
    }
}
