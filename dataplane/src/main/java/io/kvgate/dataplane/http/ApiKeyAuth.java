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

    /** Whether the head carries {@code Authorization: Bearer <one of keys>}; true when no keys are configured. */
    public static boolean authorized(List<String> keys, HttpHeaders headers) {
        if (keys.isEmpty()) {
            return true;
        }
        String auth = headers.get(HttpHeaderNames.AUTHORIZATION);
        if (auth == null || !auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return false;
        }
        int from = 7;
        int to = auth.length();
        while (from < to && auth.charAt(from) <= ' ') {
            from++;
        }
        while (to > from && auth.charAt(to - 1) <= ' ') {
            to--;
        }
        boolean ok = false;
        for (int i = 0, n = keys.size(); i < n; i++) {
            ok |= sameSecret(keys.get(i), auth, from, to);
        }
        return ok;
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
