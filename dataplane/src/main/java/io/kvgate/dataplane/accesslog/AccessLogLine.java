package io.kvgate.dataplane.accesslog;

import io.kvgate.dataplane.wire.JsonText;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * One access-log line: an {@link AccessRecord} as a JSON object on one line, members in a fixed order (documented
 * in docs/logging.md). Strings are escaped as JSON requires (quote, backslash, control characters as
 * {@code \}{@code uNNNN}), so a client's request id or model name cannot break the line or forge a member; absent
 * strings and counts are {@code null}. Durations are milliseconds with microsecond precision. Writer thread only:
 * the builder is reused line after line.
 */
final class AccessLogLine {
    private static final DateTimeFormatter TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
        .withZone(ZoneOffset.UTC);

    private final StringBuilder out = new StringBuilder(512);
    /** The last second formatted, and its text: lines within one second reuse it (formatting allocates). */
    private long cachedSecond = Long.MIN_VALUE;
    private String cachedSecondText;

    /** The line for {@code r}, newline included; valid until the next call. */
    StringBuilder encode(AccessRecord r) {
        StringBuilder b = out;
        b.setLength(0);
        b.append("{\"time\":\"");
        time(b, r.timeMillis);
        b.append('"');
        str(b, "request_id", r.requestId);
        str(b, "trace_id", r.traceId);
        str(b, "key_id", r.keyId);
        str(b, "rule", r.rule);
        str(b, "model", r.model);
        str(b, "endpoint", r.endpoint);
        if (r.hedgeEndpoint != null) {
            str(b, "hedge_endpoint", r.hedgeEndpoint);
        }
        b.append(",\"status\":").append(r.status);
        b.append(",\"stream\":").append(r.stream);
        b.append(",\"bytes_in\":").append(r.bytesIn);
        b.append(",\"bytes_out\":").append(r.bytesOut);
        count(b, "prompt_tokens", r.promptTokens);
        count(b, "cached_tokens", r.cachedTokens);
        count(b, "reachable_tokens", r.reachableTokens);
        count(b, "predicted_tokens", r.predictedTokens);
        str(b, "route_loss", r.routeLoss);
        millis(b, "ttft_ms", r.ttftNs);
        millis(b, "duration_ms", r.durationNs);
        str(b, "tier", r.tier);
        str(b, "error_code", r.errorCode);
        str(b, "tenant", r.tenant);
        str(b, "migrated_from", r.migratedFrom);
        b.append("}\n");
        return b;
    }

    private void time(StringBuilder b, long epochMillis) {
        long second = Math.floorDiv(epochMillis, 1000);
        if (second != cachedSecond) {
            cachedSecond = second;
            String full = TIME.format(Instant.ofEpochMilli(second * 1000));
            cachedSecondText = full.substring(0, full.length() - 5); // without ".000Z"
        }
        int ms = Math.floorMod(epochMillis, 1000);
        b.append(cachedSecondText).append('.');
        if (ms < 100) {
            b.append('0');
        }
        if (ms < 10) {
            b.append('0');
        }
        b.append(ms).append('Z');
    }

    private static void count(StringBuilder b, String name, long v) {
        b.append(",\"").append(name).append("\":");
        if (v < 0) {
            b.append("null");
        } else {
            b.append(v);
        }
    }

    /** Nanoseconds as milliseconds with three decimals (microseconds), or null when unknown. */
    private static void millis(StringBuilder b, String name, long ns) {
        b.append(",\"").append(name).append("\":");
        if (ns < 0) {
            b.append("null");
            return;
        }
        long us = ns / 1000;
        b.append(us / 1000).append('.');
        int frac = (int) (us % 1000);
        if (frac < 100) {
            b.append('0');
        }
        if (frac < 10) {
            b.append('0');
        }
        b.append(frac);
    }

    private static void str(StringBuilder b, String name, String v) {
        b.append(",\"").append(name).append("\":");
        if (v == null) {
            b.append("null");
            return;
        }
        b.append('"');
        JsonText.appendEscaped(b, v);
        b.append('"');
    }
}
