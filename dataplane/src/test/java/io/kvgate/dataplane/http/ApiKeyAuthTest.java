package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The API-key check: exact keys only, whatever the case of "Bearer" and the spaces around the key. */
class ApiKeyAuthTest {
    private static final List<String> KEYS = List.of("key-one-0123", "k2");

    private static boolean authorized(String authorization) {
        HttpHeaders h = new DefaultHttpHeaders();
        if (authorization != null) {
            h.add("authorization", authorization);
        }
        return ApiKeyAuth.authorized(KEYS, h);
    }

    @Test
    void onlyAConfiguredKeyPasses() {
        assertTrue(authorized("Bearer key-one-0123"));
        assertTrue(authorized("bearer k2"));
        assertTrue(authorized("Bearer   k2 \t"), "spaces around the key are not part of it");
        assertFalse(authorized(null));
        assertFalse(authorized("Bearer "));
        assertFalse(authorized("Bearer k"), "a prefix of a key");
        assertFalse(authorized("Bearer k22"), "a key and more");
        assertFalse(authorized("Bearer key-one-0124"));
        assertFalse(authorized("Bearer k 2"));
        assertFalse(authorized("Basic k2"));
        assertFalse(authorized("k2"));
        assertTrue(ApiKeyAuth.authorized(List.of(), new DefaultHttpHeaders()), "no keys configured: open");
    }

    @Test
    void theComparisonCoversEveryCharacter() {
        assertTrue(ApiKeyAuth.sameSecret("abc", "xxabcxx", 2, 5));
        assertFalse(ApiKeyAuth.sameSecret("abc", "xxabdxx", 2, 5));
        assertFalse(ApiKeyAuth.sameSecret("abc", "xxab", 2, 4));
        assertFalse(ApiKeyAuth.sameSecret("", "x", 0, 1));
        assertTrue(ApiKeyAuth.sameSecret("", "x", 1, 1));
    }
}
