package io.kvgate.dataplane.tenant;

/**
 * One request's hold on its tenant's limits: taken before dispatch ({@link Tenants#reserve}), settled once at the end
 * from the engine's usage or released ({@link Tenants#settle}). Granted or denied; either way it carries what the
 * answer's {@code x-ratelimit-*} headers say (the state just after the decision). Owned by the request's connection
 * (event-loop only); settling is idempotent.
 */
public final class Reservation {
    /** The store that holds it and settles it (set by the store that decided it); null until decided. */
    LimitStore store;
    /** The local store's counters of the tenant, for a reservation held on this replica. */
    TenantUsage usage;
    /** In a shared store: the reservation's id (its in-flight slot) and the tenant's fleet-wide limits it was held under. */
    String id;
    io.kvgate.control.config.TenancyConfig.Limits fleetLimits;
    /** Admitted unchecked ({@code on_failure: allow}): nothing is held, nothing to settle, no headers. */
    boolean unchecked;
    /** Refused because the shared store did not answer ({@code on_failure: deny}): the 503's message, else null. */
    String storeUnavailable;
    final String tenant;
    /** Tokens held: the prompt (exact or estimated) plus the completion budget times {@code n}. */
    final long tokens;
    final boolean estimated;
    long minuteEpoch;
    long dayEpoch;
    boolean granted;
    boolean settled;
    LimitKind deniedBy;
    String message;
    long retryAfterNs;

    // What the headers say: -1 for a limit the tenant does not have.
    long limitRequests = -1;
    long remainingRequests;
    long resetRequestsNs;
    long limitTokens = -1;
    long remainingTokens;
    long resetTokensNs;
    /** When a shared store's answer was applied (the gateway's clock): how old its header values are, for {@link Tenants#current}. */
    long decidedNs;

    Reservation(String tenant, long tokens, boolean estimated) {
        this.tenant = tenant;
        this.tokens = tokens;
        this.estimated = estimated;
    }

    public boolean granted() {
        return granted;
    }

    /** The limit a denied request met, or null. */
    public LimitKind deniedBy() {
        return deniedBy;
    }

    /**
     * The 503's message when the request was refused because the shared rate-limit store did not answer in time and
     * {@code rate_limit_store.on_failure} is {@code deny}; null otherwise.
     */
    public String storeUnavailable() {
        return storeUnavailable;
    }

    /** The 429's message (names the tenant, the limit, what it allows and what was asked), or null when granted. */
    public String message() {
        return message;
    }

    /** {@code Retry-After} of a denied request: when enough of the limit frees up, whole seconds, at least 1. */
    public long retryAfterSeconds() {
        return Math.max(1, (retryAfterNs + 999_999_999L) / 1_000_000_000L);
    }

    /** The tokens held for the request. */
    public long tokens() {
        return tokens;
    }

    /** Whether the prompt part of {@link #tokens} is an estimate from the body (the rule does not tokenize it). */
    public boolean estimated() {
        return estimated;
    }

    public String tenant() {
        return tenant;
    }

    /** Whether the answer carries request-limit headers (the tenant has {@code requests_per_minute}). */
    public boolean hasRequestLimit() {
        return limitRequests >= 0;
    }

    public long limitRequests() {
        return limitRequests;
    }

    public long remainingRequests() {
        return remainingRequests;
    }

    public long resetRequestsNs() {
        return resetRequestsNs;
    }

    /** Whether the answer carries token-limit headers (the tenant has {@code tokens_per_minute}). */
    public boolean hasTokenLimit() {
        return limitTokens >= 0;
    }

    public long limitTokens() {
        return limitTokens;
    }

    public long remainingTokens() {
        return remainingTokens;
    }

    public long resetTokensNs() {
        return resetTokensNs;
    }
}
