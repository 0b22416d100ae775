package io.kvgate.dataplane.tenant;

import io.netty.handler.codec.http.HttpHeaders;

/**
 * OpenAI's rate-limit headers, written on every answer to a limited tenant (200s, errors and 429s alike):
 * {@code x-ratelimit-limit-requests}, {@code x-ratelimit-remaining-requests}, {@code x-ratelimit-reset-requests} and
 * the same three for tokens, each pair present when the tenant has that limit ({@code requests_per_minute},
 * {@code tokens_per_minute}). Limits are this replica's share ({@link Tenants#share}); resets are durations in OpenAI's
 * spelling ({@code 1s}, {@code 6m0s}, {@code 250ms}). Stateless.
 */
public final class RateLimitHeaders {
    private RateLimitHeaders() {}

    /** Adds the headers {@code r} calls for to {@code headers}; nothing for null. */
    public static void write(Reservation r, HttpHeaders headers) {
        if (r == null) {
            return;
        }
        if (r.hasRequestLimit()) {
            headers.set("x-ratelimit-limit-requests", r.limitRequests());
            headers.set("x-ratelimit-remaining-requests", r.remainingRequests());
            headers.set("x-ratelimit-reset-requests", duration(r.resetRequestsNs()));
        }
        if (r.hasTokenLimit()) {
            headers.set("x-ratelimit-limit-tokens", r.limitTokens());
            headers.set("x-ratelimit-remaining-tokens", r.remainingTokens());
            headers.set("x-ratelimit-reset-tokens", duration(r.resetTokensNs()));
        }
    }

    /**
     * The same headers as lines ({@code name: value\r\n}) appended to {@code lines}: the header block of a response
     * head relayed as bytes ({@code RelayHead}), whose blank line the codec writes after it.
     */
    public static void writeLines(Reservation r, io.netty.buffer.ByteBuf lines) {
        if (r == null || !r.hasRequestLimit() && !r.hasTokenLimit()) {
            return;
        }
        StringBuilder sb = new StringBuilder(192);
        if (r.hasRequestLimit()) {
            line(sb, "x-ratelimit-limit-requests", Long.toString(r.limitRequests()));
            line(sb, "x-ratelimit-remaining-requests", Long.toString(r.remainingRequests()));
            line(sb, "x-ratelimit-reset-requests", duration(r.resetRequestsNs()));
        }
        if (r.hasTokenLimit()) {
            line(sb, "x-ratelimit-limit-tokens", Long.toString(r.limitTokens()));
            line(sb, "x-ratelimit-remaining-tokens", Long.toString(r.remainingTokens()));
            line(sb, "x-ratelimit-reset-tokens", duration(r.resetTokensNs()));
        }
        lines.writeCharSequence(sb, java.nio.charset.StandardCharsets.US_ASCII);
    }

    private static void line(StringBuilder sb, String name, String value) {
        sb.append(name).append(": ").append(value).append("\r\n");
    }

    /** A duration as OpenAI writes it: {@code 0s}, {@code 250ms}, {@code 12s}, {@code 6m0s}, {@code 1h2m3s}. */
    static String duration(long ns) {
        if (ns <= 0) {
            return "0s";
        }
        if (ns < 1_000_000_000L) {
            return Math.max(1, ns / 1_000_000L) + "ms";
        }
        long s = (ns + 999_999_999L) / 1_000_000_000L;
        long h = s / 3600;
        long m = (s % 3600) / 60;
        long sec = s % 60;
        if (h > 0) {
            return h + "h" + m + "m" + sec + "s";
        }
        return m > 0 ? m + "m" + sec + "s" : sec + "s";
    }
}
