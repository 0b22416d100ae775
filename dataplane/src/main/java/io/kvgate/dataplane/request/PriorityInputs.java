package io.kvgate.dataplane.request;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.PriorityClass;
import io.kvgate.dataplane.route.SessionKeys;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Admission control's inputs from a request head (I/O thread): its priority class and its tenant.
 *
 * <ul>
 *   <li><b>Class</b>: an API key listed in the rule's {@code admission.api_key_priorities} (by SHA-256 fingerprint)
 *       has that class as its ceiling: {@code X-Kvgate-Priority} may lower its requests, never raise them (a batch
 *       tenant cannot make its traffic interactive by sending a header). Other requests take the header's class, or
 *       {@code standard}.</li>
 *   <li><b>Tenant</b>: a hash of the bearer token, so admission control is fair across API keys; 0 without one.</li>
 * </ul>
 * Stateless and thread-safe.
 */
public final class PriorityInputs {
    private PriorityInputs() {}

    /** A 400 naming the header when {@code X-Kvgate-Priority} is present but names no class; null when fine. */
    public static Problem problem(HttpHeaders headers) {
        String v = headers.get(PriorityClass.HEADER);
        if (v == null || PriorityClass.parse(v) != null) {
            return null;
        }
        String shown = v.length() > 64 ? v.substring(0, 64) + "..." : v;
        return Problem.body("invalid_priority", "Header X-Kvgate-Priority: '" + shown
            + "' is not a priority class; use interactive, standard or batch.");
    }

    /** The request's class under {@code admission} (the header was validated by {@link #problem}). */
    public static PriorityClass priority(HttpHeaders headers, RuleConfig.AdmissionConfig admission) {
        PriorityClass asked = PriorityClass.parse(headers.get(PriorityClass.HEADER));
        PriorityClass ceiling = null;
        if (!admission.apiKeyPriorities().isEmpty()) {
            String key = bearerToken(headers);
            if (key != null) {
                ceiling = PriorityClass.parse(admission.apiKeyPriorities().get(fingerprint(key)));
            }
        }
        if (ceiling == null) {
            return asked != null ? asked : PriorityClass.STANDARD;
        }
        return asked != null && asked.ordinal() > ceiling.ordinal() ? asked : ceiling;
    }

    /** The tenant admission control is fair across: the bearer token's hash, 0 without one. */
    public static long tenant(HttpHeaders headers) {
        String key = bearerToken(headers);
        return key == null ? 0L : SessionKeys.hash(key);
    }

    /** SHA-256 of an API key, lower-case hex: what {@code admission.api_key_priorities} is keyed by. */
    public static String fingerprint(String apiKey) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(apiKey.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is a required JDK algorithm", e);
        }
    }

    private static String bearerToken(HttpHeaders headers) {
        String auth = headers.get(HttpHeaderNames.AUTHORIZATION);
        if (auth == null || !auth.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return null;
        }
        String k = auth.substring(7).trim();
        return k.isEmpty() ? null : k;
    }
}
