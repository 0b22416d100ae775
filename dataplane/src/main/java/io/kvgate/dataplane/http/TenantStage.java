package io.kvgate.dataplane.http;

import io.kvgate.dataplane.exchange.RequestContext;
import io.kvgate.dataplane.request.ContextBudget;
import io.kvgate.dataplane.request.Problem;
import io.kvgate.dataplane.request.RequestEdits;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.request.Refusal;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.tenant.Loop;
import io.kvgate.dataplane.tenant.Reservation;
import io.kvgate.dataplane.tenant.Tenant;
import io.kvgate.dataplane.tenant.Tenants;
import java.util.function.Consumer;

/**
 * The limits stage, last before the exchange: a request of a limited tenant reserves what it can cost, or is refused
 * 429 naming the limit. What it holds:
 * <ul>
 *   <li><b>prompt</b>: the exact count where the gateway counted it (the rule's tokenizer, or one token-id prompt),
 *       else an estimate from the body, one token per 4 bytes ({@link Reservation#estimated} says which);</li>
 *   <li><b>completion</b>: {@code max_completion_tokens} / {@code max_tokens}, else the context's remainder after the
 *       prompt, else the completions route's default of 16 (chat without a known context: nothing, the usage settles
 *       it), times {@code n} and the number of prompts.</li>
 * </ul>
 * The connection settles the reservation from the engine's usage when the exchange ends. Tenants without limits pass
 * untouched. Event-loop only; stateless.
 */
final class TenantStage {
    /** Bytes per token of the body estimate: English text runs about 4, JSON syntax makes it an over-estimate. */
    static final int BYTES_PER_TOKEN = 4;

    private TenantStage() {}

    /**
     * The tenant's gateway-owned cache salt, on a rule whose engine takes one ({@code cache_salt} configured): written
     * into the body the engine gets (the client's own salt replaced, or refused where the tenant may not set one) and
     * into the routing inputs, so the gateway hashes the blocks the engine will cache. Runs after the prompt stage
     * (which read the client's salt) and before the body is forwarded (which applies the edit).
     */
    static Refusal salt(RequestContext rc) {
        Tenant tenant = rc.tenant();
        if (tenant == null || tenant.cacheSalt() == null || !rc.rule().profile().takesCacheSalt()) {
            return null;
        }
        RequestFields f = rc.fields();
        if (tenant.refusesClientSalt() && f.has(RequestFields.Member.CACHE_SALT)) {
            return Refusal.of(Problem.field("cache_salt", "cache_salt_not_allowed", "cache_salt is set by the gateway for"
                + " tenant '" + tenant.name() + "' (its prefix cache is its own); remove it from the request."));
        }
        rc.edits().set(RequestFields.Member.CACHE_SALT, RequestEdits.jsonString(tenant.cacheSalt()));
        f.cacheSalt = tenant.cacheSalt();
        RoutingInputs in = rc.inputs();
        if (in != RoutingInputs.NONE) {
            rc.inputs(new RoutingInputs(in.promptTokens(), tenant.cacheSalt(), in.sessionKey(), in.textPrefixKey()));
        }
        return null;
    }

    /**
     * The reservation in the store the configuration names, answered through {@code then} on {@code loop} (at once
     * without a shared store or for a tenant without limits, which gets null and asks no store). The caller sets it on
     * the request ({@link RequestContext#reservation}) if the request is still there when the answer comes.
     */
    static void reserve(RequestContext rc, Tenants tenants, Loop loop, Consumer<Reservation> then) {
        Tenant tenant = rc.tenant();
        if (tenant == null || !tenant.limited()) {
            then.accept(null);
            return;
        }
        long[] held = held(rc);
        tenants.reserve(tenant, rc.config().tenancy(), held[0], held[1] != 0, loop, then);
    }

    /** What a decided reservation answers: null to go on, a 429 over a limit, a 503 when the store could not decide. */
    static Refusal refusal(Reservation r) {
        if (r == null || r.granted()) {
            return null;
        }
        if (r.storeUnavailable() != null) {
            return Refusal.storeUnavailable(r.storeUnavailable());
        }
        return Refusal.rateLimited(r.message(), r.retryAfterSeconds());
    }

    /** The tokens the request holds and whether the count is an estimate (1) or exact (0). */
    private static long[] held(RequestContext rc) {
        RequestFields f = rc.fields();
        boolean chat = rc.chat();
        long prompt = rc.promptTokenCount();
        boolean estimated = false;
        if (prompt < 0 && !chat && f.promptIsTokenIds && f.promptCount <= 1) {
            prompt = f.promptTokenIdsMax;
        }
        if (prompt < 0) {
            prompt = (rc.body().readableBytes() + BYTES_PER_TOKEN - 1) / BYTES_PER_TOKEN;
            estimated = true;
        }
        int requested = ContextBudget.requested(f, chat);
        long completion;
        int contextLen = rc.rule().contextLength();
        if (requested >= 0) {
            completion = requested;
        } else if (contextLen > 0) {
            completion = Math.max(0, contextLen - prompt);
        } else {
            completion = chat ? 0 : ContextBudget.COMPLETIONS_DEFAULT_MAX_TOKENS;
            estimated |= chat;
        }
        long copies = (long) Math.max(1, f.n) * (chat ? 1 : Math.max(1, f.promptCount));
        return new long[] {prompt + completion * copies, estimated ? 1 : 0};
    }
}
