package io.kvgate.dataplane.tenant;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.control.config.TenancyConfig.Limits;
import io.netty.handler.codec.http.DefaultHttpHeaders;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Limits, shares, reservations and their settlement on a manual clock; keys to tenants; salts. */
class TenantsTest {
    private static final String RULES = """
        rules:
          - {name: chat, models: [m], endpoints: [{url: "http://127.0.0.1:1"}]}
        """;

    @TempDir
    Path dir;

    private final ManualClock clock = new ManualClock(0);
    private final Tenants tenants = new Tenants(clock);

    private static Tenant limited(Limits l) {
        return new Tenant("acme", java.util.Set.of(), null, false, l, null, false);
    }

    private static TenancyConfig tenancy(int replicas, boolean unused) {
        return new TenancyConfig(List.of(), null, null, replicas);
    }

    @Test
    void eachReplicaEnforcesItsShareRoundedDown() {
        Limits l = new Limits(100, 1000, 2, 0);
        assertEquals(new Limits(33, 333, 1, 0), Tenants.share(l, tenancy(3, false)));
        assertEquals(l, Tenants.share(l, tenancy(1, false)));
    }

    @Test
    void tokensPerDayHoldsOverASlidingDay() {
        Tenant t = limited(new Limits(0, 0, 0, 1000));
        Reservation a = tenants.reserve(t, tenancy(1, false), 600, false);
        assertTrue(a.granted());
        tenants.settle(a, 600);
        clock.advance(23, TimeUnit.HOURS);
        Reservation b = tenants.reserve(t, tenancy(1, false), 600, false);
        assertFalse(b.granted());
        assertEquals(LimitKind.TOKENS_PER_DAY, b.deniedBy());
        assertEquals(3600, b.retryAfterSeconds(), "the first request's minute leaves the day an hour from now");
        clock.advance(1, TimeUnit.HOURS);
        assertTrue(tenants.reserve(t, tenancy(1, false), 600, false).granted());
    }

    @Test
    void settlingTwiceOrSettlingADenialChangesNothing() {
        Tenant t = limited(new Limits(0, 100, 1, 0));
        Reservation a = tenants.reserve(t, tenancy(1, false), 80, false);
        tenants.settle(a, 10);
        tenants.settle(a, 10);
        Reservation b = tenants.reserve(t, tenancy(1, false), 90, false);
        assertTrue(b.granted(), "80 settled to 10 once, and the one slot freed once");
        Reservation c = tenants.reserve(t, tenancy(1, false), 1, false);
        assertFalse(c.granted());
        tenants.settle(c, 0);
        tenants.settle(b, -1);
        assertTrue(tenants.reserve(t, tenancy(1, false), 90, false).granted(), "the denial took no slot");
    }

    @Test
    void aTenantWithoutLimitsIsNeverReserved() {
        assertNull(tenants.reserve(limited(Limits.NONE), tenancy(1, false), 10, false));
    }

    @Test
    void keysResolveByDigestAndTheDirectoryIsPerGeneration() throws Exception {
        GatewayConfig c = GatewayConfig.parse("""
            tenants:
              - {name: acme, api_key_sha256: [%s]}
            """.formatted(TenancyConfig.sha256Hex("key-ä")) + RULES, dir);
        TenantDirectory d = tenants.directory(c);
        HttpHeaders h = new DefaultHttpHeaders();
        // Netty decodes header bytes as ISO-8859-1: a UTF-8 key arrives as one char per byte.
        h.set("authorization", "Bearer  " + new String("key-ä".getBytes(java.nio.charset.StandardCharsets.UTF_8),
            java.nio.charset.StandardCharsets.ISO_8859_1) + " ");
        assertEquals("acme", d.byKey(h).tenant().name());
        assertEquals("sha256:" + TenancyConfig.sha256Hex("key-ä").substring(0, 12), d.byKey(h).keyId());
        h.set("authorization", "Bearer key-a");
        assertNull(d.byKey(h));
        h.set("authorization", "Basic key-ä");
        assertNull(d.byKey(h));
        assertTrue(d == tenants.directory(c), "one directory per generation");
    }

    @Test
    void saltsAreSecretKeyedPerTenantAndSharedOnlyByOptIn() throws Exception {
        Files.writeString(dir.resolve("salt"), "0123456789abcdef0123");
        GatewayConfig c = GatewayConfig.parse("""
            cache_salt: {secret_file: salt}
            tenants:
              - {name: a, api_key_sha256: [%s]}
              - {name: b, api_key_sha256: [%s]}
              - {name: c, api_key_sha256: [%s], shared_prefix_salt: true}
              - {name: d, api_key_sha256: [%s], shared_prefix_salt: true}
            """.formatted(TenancyConfig.sha256Hex("a"), TenancyConfig.sha256Hex("b"), TenancyConfig.sha256Hex("c"),
            TenancyConfig.sha256Hex("d")) + RULES, dir);
        TenantDirectory d = TenantDirectory.of(c);
        String a = d.tenant("a").cacheSalt();
        assertEquals(64, a.length());
        assertNotEquals(a, d.tenant("b").cacheSalt());
        assertEquals(d.tenant("c").cacheSalt(), d.tenant("d").cacheSalt());
        assertNotEquals(a, d.tenant("c").cacheSalt());
        Files.writeString(dir.resolve("salt"), "another-secret-of-20");
        assertNotEquals(a, TenantDirectory.of(GatewayConfig.parse(Files.readString(dir.resolve("salt")).isEmpty() ? ""
            : """
            cache_salt: {secret_file: salt}
            tenants:
              - {name: a, api_key_sha256: [%s]}
            """.formatted(TenancyConfig.sha256Hex("a")) + RULES, dir)).tenant("a").cacheSalt(), "a new secret, new salts");
    }

    @Test
    void durationsAreSpelledAsOpenAiDoes() {
        assertEquals("0s", RateLimitHeaders.duration(0));
        assertEquals("250ms", RateLimitHeaders.duration(250_000_000L));
        assertEquals("12s", RateLimitHeaders.duration(11_200_000_000L));
        assertEquals("6m0s", RateLimitHeaders.duration(360_000_000_000L));
        assertEquals("1h2m3s", RateLimitHeaders.duration(3_723_000_000_000L));
    }
}
