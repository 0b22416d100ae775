package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * How a vLLM decode simulator knows that {@code kv_transfer_params} were really issued by a prefill it can pull
 * from (in the real engine, NIXL fails to read blocks that a prefill never allocated). Two modes:
 * <ul>
 *   <li>in-memory: prefills record what they issued, decodes look it up and consume it (simulators in one JVM —
 *       tests, the demo — share {@link #shared()} or their own instance);</li>
 *   <li>secret ({@code --pd-secret}): prefills sign the params with HMAC-SHA256 into an extra opaque field
 *       {@code sim_signature}; a decode with the same secret verifies it (simulators in different processes).</li>
 * </ul>
 * Both bind the X-Request-Id of the prefill leg, so a proxy that changes it between legs is caught.
 * Thread-safe (synchronized; cold path). Bounded: at most {@value #MAX_ENTRIES} unconsumed issues are kept.
 */
public final class PdRegistry {
    static final int MAX_ENTRIES = 100_000;
    private static final PdRegistry SHARED = new PdRegistry(null);
    /**
     * Without a secret a decode only knows the params issued in its own JVM: prefill and decode simulators started
     * as separate processes must share {@code --pd-secret}, and the refusal says so (the usual first-run mistake).
     */
    static final String IN_MEMORY_HINT = " (this simulator has no --pd-secret: it accepts only params issued by a"
        + " prefill simulator in its own process; start separate prefill and decode processes with the same --pd-secret)";

    private final byte[] secret;
    private final Map<String, String> issued = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > MAX_ENTRIES;
        }
    };

    private PdRegistry(String secret) {
        this.secret = secret == null ? null : secret.getBytes(StandardCharsets.UTF_8);
    }

    /** The JVM-wide in-memory registry (default for simulators without a secret or an explicit registry). */
    public static PdRegistry shared() {
        return SHARED;
    }

    /** A fresh in-memory registry (isolates one test's fleet from another's). */
    public static PdRegistry inMemory() {
        return new PdRegistry(null);
    }

    /** Verifies by HMAC with a shared secret (works across processes). */
    public static PdRegistry secret(String secret) {
        if (secret == null || secret.isEmpty()) {
            throw new IllegalArgumentException("pd-secret=" + secret + ": must be a non-empty string");
        }
        return new PdRegistry(secret);
    }

    /** A prefill issues {@code params}; in secret mode this adds {@code sim_signature}. */
    synchronized void issue(ObjectNode params, String xRequestId) {
        if (secret != null) {
            params.put("sim_signature", sign(params, xRequestId));
        } else {
            issued.put(key(params), xRequestId);
        }
    }

    /** A decode checks {@code params}: null when accepted, else the reason (the caller answers 400). */
    synchronized String verify(JsonNode params, String xRequestId) {
        for (String f : new String[] {"remote_engine_id", "remote_request_id", "remote_block_ids", "remote_host",
            "remote_port"}) {
            if (!params.hasNonNull(f)) {
                return "kv_transfer_params." + f + " is missing: cannot pull KV blocks from the prefill";
            }
        }
        if (secret != null) {
            String sig = params.path("sim_signature").asText("");
            if (!MessageDigest.isEqual(sig.getBytes(StandardCharsets.US_ASCII),
                sign(params, xRequestId).getBytes(StandardCharsets.US_ASCII))) {
                return "kv_transfer_params were not issued by a known prefill for X-Request-Id " + xRequestId
                    + " (signature mismatch)";
            }
            return null;
        }
        String k = key(params);
        String issuedFor = issued.get(k);
        if (issuedFor == null) {
            return "kv_transfer_params were not issued by a known prefill (remote_engine_id="
                + params.path("remote_engine_id").asText() + ", remote_request_id="
                + params.path("remote_request_id").asText() + ") or were already consumed" + IN_MEMORY_HINT;
        }
        if (!issuedFor.equals(xRequestId)) {
            return "X-Request-Id " + xRequestId + " differs from the prefill leg's " + issuedFor
                + ": both P/D legs must carry the same X-Request-Id";
        }
        issued.remove(k);
        return null;
    }

    /**
     * TensorRT-LLM context server: issues the {@code encoded_opaque_state} for one context-only request (base64 of
     * the sim's material; in secret mode with an HMAC so another process can verify it).
     */
    synchronized String issueOpaque(String material) {
        String state = java.util.Base64.getEncoder().encodeToString(
            (secret != null ? material + '\u0000' + hmac(material) : material).getBytes(StandardCharsets.UTF_8));
        if (secret == null) {
            issued.put("trtllm\u0000" + state, material);
        }
        return state;
    }

    /** TensorRT-LLM generation server: null when the state was issued (and not yet used), else the reason. */
    synchronized String consumeOpaque(String state) {
        if (secret != null) {
            String decoded;
            try {
                decoded = new String(java.util.Base64.getDecoder().decode(state), StandardCharsets.UTF_8);
            } catch (IllegalArgumentException e) {
                return "encoded_opaque_state is not base64";
            }
            int cut = decoded.lastIndexOf('\u0000');
            if (cut < 0 || !MessageDigest.isEqual(decoded.substring(cut + 1).getBytes(StandardCharsets.US_ASCII),
                hmac(decoded.substring(0, cut)).getBytes(StandardCharsets.US_ASCII))) {
                return "encoded_opaque_state was not issued by a known context server (signature mismatch)";
            }
            return null;
        }
        return issued.remove("trtllm\u0000" + state) != null ? null
            : "encoded_opaque_state was not issued by a known context server or was already used" + IN_MEMORY_HINT;
    }

    private String hmac(String material) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            return HexFormat.of().formatHex(mac.doFinal(material.getBytes(StandardCharsets.UTF_8)));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    private static String key(JsonNode params) {
        return params.path("remote_engine_id").asText() + '\u0000' + params.path("remote_request_id").asText();
    }

    private String sign(JsonNode params, String xRequestId) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            String material = params.path("remote_engine_id").asText() + '\u0000'
                + params.path("remote_request_id").asText() + '\u0000' + params.path("remote_block_ids") + '\u0000'
                + params.path("remote_host").asText() + '\u0000' + params.path("remote_port").asText() + '\u0000'
                + xRequestId;
            return HexFormat.of().formatHex(mac.doFinal(material.getBytes(StandardCharsets.UTF_8)));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }
}
