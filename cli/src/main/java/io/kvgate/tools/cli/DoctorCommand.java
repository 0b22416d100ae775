package io.kvgate.tools.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;

/**
 * {@code ./kvgate ctl doctor [RULE] [--timeout-ms N]}: what the gateway assumes about each engine, checked
 * ({@code GET /control/v1/doctor}): one line per check, and for each mismatch what was found, what the gateway
 * expects and the fix. Exit status 1 when any check mismatches (so scripts and CI can gate on it), 0 when none does.
 */
final class DoctorCommand {
    private static final ObjectMapper JSON = new ObjectMapper();

    private DoctorCommand() {}

    /** The request path for the verb's arguments (at most one rule name) and its timeout; null = usage error. */
    static String path(java.util.List<String> args, String timeout, PrintStream err) {
        if (args.size() > 1) {
            err.println("usage: ctl doctor [RULE] [--timeout-ms N]: one rule at most, got " + args);
            return null;
        }
        String rule = args.isEmpty() ? null : args.get(0);
        StringBuilder p = new StringBuilder("/control/v1/doctor");
        char sep = '?';
        if (rule != null) {
            p.append(sep).append("rule=").append(URLEncoder.encode(rule, StandardCharsets.UTF_8));
            sep = '&';
        }
        if (timeout != null) {
            p.append(sep).append("timeout_ms=").append(URLEncoder.encode(timeout, StandardCharsets.UTF_8));
        }
        return p.toString();
    }

    static void print(PrintStream out, String body) throws IOException {
        JsonNode root = JSON.readTree(body);
        out.printf("%-8s  %-12s  %-21s  %-28s  %s%n", "STATUS", "RULE", "ENDPOINT", "CHECK", "FOUND");
        for (JsonNode c : root.path("checks")) {
            String endpoint = c.path("endpoint").isTextual() ? c.path("endpoint").asText() : "-";
            out.printf("%-8s  %-12s  %-21s  %-28s  %s%n", c.path("status").asText(), c.path("rule").asText(), endpoint,
                c.path("check").asText(), c.path("found").asText());
            if ("mismatch".equals(c.path("status").asText())) {
                out.println("          expected: " + c.path("expected").asText());
                out.println("          fix: " + c.path("fix").asText());
            }
        }
        long mismatches = root.path("mismatches").asLong();
        out.println(mismatches == 0 ? "doctor: every check that could be judged matches"
            : "doctor: " + mismatches + " mismatch" + (mismatches == 1 ? "" : "es"));
    }

    /** 1 when the report has a mismatch, else 0. */
    static int exitStatus(String body) throws IOException {
        return JSON.readTree(body).path("ok").asBoolean(false) ? 0 : 1;
    }
}
