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
 * ({@link MessageDigest#isEqual}, every key compared). Stateless.
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
        byte[] presented = auth.substring(7).trim().getBytes(StandardCharsets.UTF_8);
        boolean ok = false;
        for (String k : keys) {
            ok |= MessageDigest.isEqual(k.getBytes(StandardCharsets.UTF_8), presented);
        }
        return ok;
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
