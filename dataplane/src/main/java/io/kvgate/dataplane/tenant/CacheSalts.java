package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.TenancyConfig;
import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Gateway-owned cache salts: {@code cache_salt = hex(HMAC-SHA256(secret, "tenant:" + name))}, one per tenant, so two
 * tenants' identical prompts hash to different KV blocks on the engines (vLLM puts the salt into the first block's
 * hash, SGLang into the first page's) and no tenant can probe another's cached prefixes by timing. A tenant with
 * {@code shared_prefix_salt} gets the one shared salt ({@code "shared"}) instead: opted-in tenants share public system
 * prompts with each other, never with the tenants that did not opt in. Computed once per tenant per configuration
 * generation ({@link TenantDirectory}). Immutable.
 */
public final class CacheSalts {
    private final byte[] secret;

    private CacheSalts(byte[] secret) {
        this.secret = secret;
    }

    /** The salts of {@code cache_salt}, or null when the section is absent (no gateway-owned salts). */
    public static CacheSalts of(TenancyConfig.CacheSalt config) {
        return config == null ? null : new CacheSalts(config.secret().getBytes(StandardCharsets.UTF_8));
    }

    /** The salt of tenant {@code name}, or the shared one. */
    public String saltOf(String name, boolean shared) {
        return hmac(shared ? "shared" : "tenant:" + name);
    }

    private String hmac(String message) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            return HexFormat.of().formatHex(mac.doFinal(message.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }
}
