package io.kvgate.dataplane.tenant;

import io.kvgate.control.config.TenancyConfig.Limits;

/**
 * One tenant's counters on this replica: requests and tokens in the last minute, tokens in the last day, requests in
 * flight. Kept by tenant name across reloads ({@link Tenants}), so a reload that changes a limit applies it to the
 * usage so far. Thread-safe: every read and change holds this object's lock, for a few dozen instructions (the I/O
 * threads of one tenant's requests meet here, nobody else).
 */
final class TenantUsage {
    static final long SECOND_NS = 1_000_000_000L;
    static final long MINUTE_NS = 60 * SECOND_NS;

    final String tenant;
    private final SlidingWindow requestsPerMinute = new SlidingWindow(60, SECOND_NS);
    private final SlidingWindow tokensPerMinute = new SlidingWindow(60, SECOND_NS);
    private final SlidingWindow tokensPerDay = new SlidingWindow(1_440, MINUTE_NS);
    private long concurrent;

    TenantUsage(String tenant) {
        this.tenant = tenant;
    }

    /**
     * Reserves one request and {@code r.tokens} against {@code limits} (already this replica's share), or denies it
     * naming the first limit it would pass; fills the header values either way.
     */
    synchronized void reserve(Reservation r, Limits limits, long nowNs) {
        advance(nowNs);
        long tokens = r.tokens;
        LimitKind denied = null;
        long wait = 0;
        long limit = 0;
        long used = 0;
        long asked = 0;
        if (limits.maxConcurrent() > 0 && concurrent + 1 > limits.maxConcurrent()) {
            denied = LimitKind.MAX_CONCURRENT;
            limit = limits.maxConcurrent();
            used = concurrent;
            asked = 1;
            wait = SECOND_NS; // a request in flight ends at no time the gateway knows: ask again soon
        } else if (limits.requestsPerMinute() > 0 && (wait = requestsPerMinute.nsUntilFits(limits.requestsPerMinute(), 1, nowNs)) != 0) {
            denied = LimitKind.REQUESTS_PER_MINUTE;
            limit = limits.requestsPerMinute();
            used = requestsPerMinute.sum();
            asked = 1;
        } else if (limits.tokensPerMinute() > 0 && (wait = tokensPerMinute.nsUntilFits(limits.tokensPerMinute(), tokens, nowNs)) != 0) {
            denied = LimitKind.TOKENS_PER_MINUTE;
            limit = limits.tokensPerMinute();
            used = tokensPerMinute.sum();
            asked = tokens;
        } else if (limits.tokensPerDay() > 0 && (wait = tokensPerDay.nsUntilFits(limits.tokensPerDay(), tokens, nowNs)) != 0) {
            denied = LimitKind.TOKENS_PER_DAY;
            limit = limits.tokensPerDay();
            used = tokensPerDay.sum();
            asked = tokens;
        }
        if (denied == null) {
            r.granted = true;
            concurrent++;
            requestsPerMinute.add(1);
            r.minuteEpoch = tokensPerMinute.add(tokens);
            r.dayEpoch = tokensPerDay.add(tokens);
        } else {
            r.deniedBy = denied;
            r.retryAfterNs = wait < 0 ? 0 : wait;
            r.message = denial(r, denied, limit, used, asked, wait < 0);
        }
        headers(r, limits, nowNs);
    }

    /** The 429's message: the tenant, the limit, what it allows, what is used, what was asked, when to retry. */
    static String denial(Reservation r, LimitKind denied, long limit, long used, long asked, boolean never) {
        return "Rate limit reached for tenant '" + r.tenant + "' on " + denied.label + ": limit " + limit + ", used "
            + used + ", requested " + asked + (never
                ? ". This request alone asks for more than the limit allows: lower max_tokens (or max_completion_tokens)."
                : ". Retry after " + r.retryAfterSeconds() + " s.");
    }

    /** Replaces the reserved tokens by {@code usedTokens} (negative: the reservation is released) and ends the request. */
    synchronized void settle(Reservation r, long usedTokens, long nowNs) {
        advance(nowNs);
        long delta = (usedTokens < 0 ? 0 : usedTokens) - r.tokens;
        tokensPerMinute.adjust(r.minuteEpoch, delta);
        tokensPerDay.adjust(r.dayEpoch, delta);
        concurrent--;
    }

    /**
     * Fills {@code r}'s header values with the windows as they are now, reserving nothing: the rate-limit headers of
     * an answer refused before the limits check (a 400 of the body, a 404 model) or of a local route.
     */
    synchronized void peek(Reservation r, Limits limits, long nowNs) {
        advance(nowNs);
        headers(r, limits, nowNs);
    }

    private void headers(Reservation r, Limits limits, long nowNs) {
        if (limits.requestsPerMinute() > 0) {
            r.limitRequests = limits.requestsPerMinute();
            r.remainingRequests = Math.max(0, limits.requestsPerMinute() - requestsPerMinute.sum());
            r.resetRequestsNs = requestsPerMinute.nsUntilEmpty(nowNs);
        }
        if (limits.tokensPerMinute() > 0) {
            r.limitTokens = limits.tokensPerMinute();
            r.remainingTokens = Math.max(0, limits.tokensPerMinute() - tokensPerMinute.sum());
            r.resetTokensNs = tokensPerMinute.nsUntilEmpty(nowNs);
        }
    }

    private void advance(long nowNs) {
        requestsPerMinute.advance(nowNs);
        tokensPerMinute.advance(nowNs);
        tokensPerDay.advance(nowNs);
    }

    /** What {@code ctl tenants} shows: requests and tokens in the last minute, tokens in the last day, in flight. */
    synchronized long[] snapshot(long nowNs) {
        advance(nowNs);
        return new long[] {requestsPerMinute.sum(), tokensPerMinute.sum(), tokensPerDay.sum(), concurrent};
    }
}
