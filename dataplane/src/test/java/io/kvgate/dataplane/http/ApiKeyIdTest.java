package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Which key a request presented, and its id in the access log: a fingerprint, never the secret. */
class ApiKeyIdTest {
    private static HttpHeaders bearer(String key) {
        return new DefaultHttpHeaders().set("Authorization", "Bearer " + key);
    }

    @Test
    void theMatchedKeyIsNamedByItsIndex() {
        List<String> keys = List.of("sk-first-secret", "sk-second-secret");
        assertEquals(1, ApiKeyAuth.matchedKey(keys, bearer("sk-second-secret")));
        assertEquals(0, ApiKeyAuth.matchedKey(keys, bearer(" sk-first-secret ")));
        assertEquals(ApiKeyAuth.REFUSED, ApiKeyAuth.matchedKey(keys, bearer("sk-other")));
        assertEquals(ApiKeyAuth.REFUSED, ApiKeyAuth.matchedKey(keys, new DefaultHttpHeaders()));
        assertEquals(ApiKeyAuth.NO_KEYS, ApiKeyAuth.matchedKey(List.of(), new DefaultHttpHeaders()));
        assertTrue(ApiKeyAuth.authorized(List.of(), new DefaultHttpHeaders()));
        assertFalse(ApiKeyAuth.authorized(keys, bearer("sk-other")));
    }

    @Test
    void aKeyIdIsTheSha256PrefixNeverTheSecret() {
        List<String> keys = List.of("sk-first-secret", "sk-second-secret");
        String id = ApiKeyAuth.keyId(keys, 0);
        // printf %s sk-first-secret | sha256sum | cut -c1-12
        assertEquals("sha256:a13678adb25c", id);
        assertEquals(19, id.length());
        assertFalse(id.contains("secret"));
        assertEquals(id, ApiKeyAuth.keyId(List.copyOf(keys), 0), "stable across key lists");
        assertFalse(id.equals(ApiKeyAuth.keyId(keys, 1)));
        assertNull(ApiKeyAuth.keyId(keys, ApiKeyAuth.REFUSED));
        assertNull(ApiKeyAuth.keyId(List.of(), ApiKeyAuth.NO_KEYS));
    }
}
