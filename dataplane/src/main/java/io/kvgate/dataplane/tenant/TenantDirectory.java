package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.TenancyConfig;
import io.kvgate.dataplane.route.PriorityClass;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Who a request's API key names, for one configuration generation: built once per applied configuration
 * ({@link #of}), so a reload swaps every tenant and key at once and a revoked key is refused on the next request.
 *
 * <p><b>Keys are never held</b>: a tenant's keys are SHA-256 digests, and a presented key is hashed and looked up by
 * its digest. The lookup's time depends only on the digest (a hash table over SHA-256 outputs, then
 * {@link MessageDigest#isEqual} on the one candidate), so it reveals nothing about how close a guess was to a key: a
 * timing attack would need SHA-256 preimages. The flat {@code api_keys} keep the front door's own constant-time
 * comparison and name the {@link #anonymous} tenant.
 *
 * <p>Immutable after construction; {@link #byKey} is thread-safe and allocates nothing but the lookup's box
 * (a digest per I/O thread is reused).
 */
public final class TenantDirectory {
    /** A resolved caller: its tenant and the key id the logs name it by ({@code sha256:<12 hex>}, never the key). */
    public record Resolved(Tenant tenant, String keyId) {}

    private record Entry(byte[] digest, Tenant tenant, String keyId, Entry next) {}

    private static final ThreadLocal<MessageDigest> SHA256 = ThreadLocal.withInitial(() -> {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    });
    private static final ThreadLocal<byte[]> KEY_BYTES = ThreadLocal.withInitial(() -> new byte[256]);
    private static final ThreadLocal<byte[]> DIGEST = ThreadLocal.withInitial(() -> new byte[32]);

    private final GatewayConfig config;
    private final Map<Long, Entry> byDigest = new HashMap<>();
    private final Map<String, Tenant> byName = new LinkedHashMap<>();
    private final Tenant anonymous;

    private TenantDirectory(GatewayConfig config) {
        this.config = config;
        TenancyConfig t = config.tenancy();
        CacheSalts salts = CacheSalts.of(t.cacheSalt());
        this.anonymous = salts == null ? Tenant.ANONYMOUS : new Tenant(Tenant.ANONYMOUS_NAME, Set.of(), null, true,
            TenancyConfig.Limits.NONE, salts.saltOf(Tenant.ANONYMOUS_NAME, false), false);
        byName.put(anonymous.name(), anonymous);
        HexFormat hex = HexFormat.of();
        for (TenancyConfig.Tenant tc : t.tenants()) {
            Tenant tenant = new Tenant(tc.name(), Set.copyOf(tc.models()), PriorityClass.parse(tc.priority()),
                tc.priorityHeader(), tc.limits(), salts == null ? null : salts.saltOf(tc.name(), tc.sharedPrefixSalt()),
                tc.clientCacheSalt().equals("refuse"));
            byName.put(tenant.name(), tenant);
            for (String d : tc.apiKeySha256()) {
                byte[] digest = hex.parseHex(d);
                long slot = slot(digest);
                byDigest.put(slot, new Entry(digest, tenant, "sha256:" + d.substring(0, 12), byDigest.get(slot)));
            }
        }
    }

    /**
     * The directories of the last few generations, looked up by identity (a configuration's {@code equals} is deep).
     * More than one slot because one JVM may hold several gateways (tests run them side by side; the picker and the
     * HTTP front door share one): with a single slot they would evict each other's directory on every request.
     */
    private static final int RECENT = 8;
    /** Newest first; replaced whole (copy on write), so a lookup reads it without a lock. */
    private static volatile TenantDirectory[] recent = new TenantDirectory[0];

    /** The directory of {@code config}: built on the first request of a generation, then shared by every thread. */
    public static TenantDirectory of(GatewayConfig config) {
        TenantDirectory found = find(recent, config);
        if (found != null) {
            return found;
        }
        synchronized (TenantDirectory.class) {
            TenantDirectory[] now = recent;
            found = find(now, config);
            if (found == null) {
                found = new TenantDirectory(config);
                TenantDirectory[] next = new TenantDirectory[Math.min(RECENT, now.length + 1)];
                next[0] = found;
                System.arraycopy(now, 0, next, 1, next.length - 1);
                recent = next;
            }
            return found;
        }
    }

    private static TenantDirectory find(TenantDirectory[] dirs, GatewayConfig config) {
        for (TenantDirectory d : dirs) {
            if (d.config == config) {
                return d;
            }
        }
        return null;
    }

    /** The tenants of this generation by name, the anonymous one first. */
    public Map<String, Tenant> tenants() {
        return byName;
    }

    /** The tenant named {@code name}, or null. */
    public Tenant tenant(String name) {
        return byName.get(name);
    }

    /** Whether any tenant has keys (else callers are the flat {@code api_keys}' or nobody's). */
    public boolean hasKeys() {
        return !byDigest.isEmpty();
    }

    /** The tenant of callers no tenant key names: the flat {@code api_keys}, certificate identities, no key at all. */
    public Tenant anonymous() {
        return anonymous;
    }

    /**
     * The tenant whose key the head's {@code Authorization: Bearer} presents, with the key's id, or null when no
     * tenant's key is presented (the front door then tries the flat {@code api_keys} and certificate identities).
     */
    public Resolved byKey(HttpHeaders headers) {
        if (byDigest.isEmpty()) {
            return null;
        }
        Entry e = lookup(headers.get(HttpHeaderNames.AUTHORIZATION));
        return e == null ? null : new Resolved(e.tenant(), e.keyId());
    }

    /** The entry of the bearer token's digest, or null. */
    private Entry lookup(String auth) {
        if (auth == null || !auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return null;
        }
        int from = 7;
        int to = auth.length();
        while (from < to && auth.charAt(from) <= ' ') {
            from++;
        }
        while (to > from && auth.charAt(to - 1) <= ' ') {
            to--;
        }
        int n = to - from;
        if (n == 0) {
            return null;
        }
        byte[] bytes = KEY_BYTES.get();
        if (bytes.length < n) {
            bytes = new byte[Math.max(n, bytes.length * 2)];
            KEY_BYTES.set(bytes);
        }
        for (int i = 0; i < n; i++) {
            bytes[i] = (byte) auth.charAt(from + i); // a header's chars are its bytes: the key's UTF-8 bytes again
        }
        MessageDigest sha = SHA256.get();
        byte[] digest = DIGEST.get();
        sha.update(bytes, 0, n);
        try {
            sha.digest(digest, 0, 32);
        } catch (java.security.DigestException e) {
            throw new IllegalStateException("SHA-256 writes 32 bytes", e);
        }
        for (Entry e = byDigest.get(slot(digest)); e != null; e = e.next()) {
            if (MessageDigest.isEqual(e.digest(), digest)) {
                return e;
            }
        }
        return null;
    }

    private static long slot(byte[] digest) {
        long s = 0;
        for (int i = 0; i < 8; i++) {
            s = (s << 8) | (digest[i] & 0xFF);
        }
        return s;
    }
}
