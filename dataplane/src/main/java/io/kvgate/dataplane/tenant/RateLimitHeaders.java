package io.kvgate.dataplane.tenant;

import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;

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
     * head relayed as bytes ({@code RelayHead}), whose blank line the codec writes after it. This is the path of every
     * proxied answer, so it writes digits straight into the buffer and allocates nothing.
     */
    public static void writeLines(Reservation r, ByteBuf lines) {
        if (r == null) {
            return;
        }
        if (r.hasRequestLimit()) {
            number(lines, LIMIT_REQUESTS, r.limitRequests());
            number(lines, REMAINING_REQUESTS, r.remainingRequests());
            lines.writeBytes(RESET_REQUESTS);
            writeDuration(lines, r.resetRequestsNs());
            lines.writeShort(CRLF);
        }
        if (r.hasTokenLimit()) {
            number(lines, LIMIT_TOKENS, r.limitTokens());
            number(lines, REMAINING_TOKENS, r.remainingTokens());
            lines.writeBytes(RESET_TOKENS);
            writeDuration(lines, r.resetTokensNs());
            lines.writeShort(CRLF);
        }
    }

    private static final byte[] LIMIT_REQUESTS = prefix("x-ratelimit-limit-requests");
    private static final byte[] REMAINING_REQUESTS = prefix("x-ratelimit-remaining-requests");
    private static final byte[] RESET_REQUESTS = prefix("x-ratelimit-reset-requests");
    private static final byte[] LIMIT_TOKENS = prefix("x-ratelimit-limit-tokens");
    private static final byte[] REMAINING_TOKENS = prefix("x-ratelimit-remaining-tokens");
    private static final byte[] RESET_TOKENS = prefix("x-ratelimit-reset-tokens");
    private static final int CRLF = ('\r' << 8) | '\n';

    private static byte[] prefix(String name) {
        return (name + ": ").getBytes(StandardCharsets.US_ASCII);
    }

    private static void number(ByteBuf out, byte[] prefix, long value) {
        out.writeBytes(prefix);
        writeDecimal(out, value);
        out.writeShort(CRLF);
    }

    /** {@code v} (at least 0) in decimal ASCII. */
    static void writeDecimal(ByteBuf out, long v) {
        if (v <= 0) {
            out.writeByte('0');
            return;
        }
        int digits = 0;
        for (long x = v; x > 0; x /= 10) {
            digits++;
        }
        int at = out.writerIndex();
        out.ensureWritable(digits);
        for (int i = at + digits - 1; i >= at; i--) {
            out.setByte(i, (int) ('0' + v % 10));
            v /= 10;
        }
        out.writerIndex(at + digits);
    }

    /** {@link #duration} written into {@code out} without a String. */
    static void writeDuration(ByteBuf out, long ns) {
        if (ns <= 0) {
            out.writeByte('0').writeByte('s');
            return;
        }
        if (ns < 1_000_000_000L) {
            writeDecimal(out, Math.max(1, ns / 1_000_000L));
            out.writeByte('m').writeByte('s');
            return;
        }
        long s = (ns + 999_999_999L) / 1_000_000_000L;
        long h = s / 3600;
        long m = (s % 3600) / 60;
        if (h > 0) {
            writeDecimal(out, h);
            out.writeByte('h');
        }
        if (h > 0 || m > 0) {
            writeDecimal(out, m);
            out.writeByte('m');
        }
        writeDecimal(out, s % 60);
        out.writeByte('s');
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
