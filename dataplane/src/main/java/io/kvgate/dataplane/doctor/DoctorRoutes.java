package io.kvgate.dataplane.doctor;

import io.kvgate.dataplane.admin.AdminApi;
import io.kvgate.dataplane.openai.OpenAiErrors;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;

/**
 * {@code GET /control/v1/doctor} (the control socket, what {@code ctl doctor} calls) and {@code GET /admin/v1/doctor}:
 * the {@link Doctor}'s report as JSON. Query: {@code rule=NAME} (one rule; every rule when absent) and
 * {@code timeout_ms} (the parity probe's wait, 100..60000, default 5000). 200 whatever the verdict; {@code ok} says
 * whether anything mismatched.
 */
public final class DoctorRoutes {
    private DoctorRoutes() {}

    public static void register(AdminApi admin, Doctor doctor) {
        admin.register("GET /control/v1/doctor", r -> report(doctor, r.query()));
        admin.register("GET /admin/v1/doctor", r -> report(doctor, r.query()));
    }

    static AdminApi.Reply report(Doctor doctor, String query) {
        String rule = null;
        long timeoutMs = 5_000;
        for (String kv : query.split("&")) {
            if (kv.startsWith("rule=")) {
                rule = URLDecoder.decode(kv.substring(5), StandardCharsets.UTF_8);
            } else if (kv.startsWith("timeout_ms=")) {
                String v = kv.substring(11);
                try {
                    timeoutMs = Long.parseLong(v);
                } catch (NumberFormatException e) {
                    timeoutMs = -1;
                }
                if (timeoutMs < 100 || timeoutMs > 60_000) {
                    return AdminApi.Reply.json(400, OpenAiErrors.json("timeout_ms=" + v + ": must be an integer in"
                        + " [100, 60000] (milliseconds the parity probe waits for the engines' events)",
                        "invalid_request_error", "timeout_ms", null));
                }
            }
        }
        if (rule != null && !doctor.hasRule(rule)) {
            return AdminApi.Reply.json(404, OpenAiErrors.json("no rule named '" + rule + "'", "invalid_request_error",
                "rule", null));
        }
        return AdminApi.Reply.json(200, Doctor.toJson(doctor.examine(rule, timeoutMs)).toPrettyString());
    }
}
