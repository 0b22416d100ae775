package io.kvgate.dataplane.quality;

import java.util.Locale;

/**
 * Why a prompt token the engine computed was not served from its prefix cache: the {@code cause} label of
 * {@code kvgate_routing_loss_tokens_total}. Each uncached token of an accounted request gets exactly one cause, by
 * its position in the prompt ({@link PromptAccount}): the causes of a rule sum to its prompt tokens minus its observed
 * ones.
 *
 * <ul>
 *   <li>{@link #COLD}: no endpoint of the rule held the token when the request was routed: a cold workload, not a
 *       routing loss.</li>
 *   <li>Routing losses (reachable − predicted: an endpoint held the token, the router chose another):
 *       {@link #LOAD_BOUND}, {@link #TIER}, {@link #DP_RANK}, {@link #MIN_MATCH}, {@link #COLD_READMIT},
 *       {@link #DRAINING}, {@link #UNAVAILABLE}, {@link #ADMISSION}, {@link #RETRY}, {@link #FALLBACK}.</li>
 *   <li>Serving losses (predicted − observed: the chosen endpoint was expected to hold the token and did not serve
 *       it): {@link #SPECULATIVE}, {@link #INDEX_STALE}.</li>
 *   <li>{@link #UNKNOWN}: the router made no index lookup for the request (no KV index, no prompt tokens, an
 *       unresolved hash seed, a policy that does not consult the index), so whether anyone held the token is not
 *       known.</li>
 * </ul>
 */
public enum LossCause {
    COLD,
    /** The holder was over kv_exact's load bound (or, in soft mode, the load term outweighed its match). */
    LOAD_BOUND,
    /** {@code kv.tier_weights} preferred a shorter match in a faster memory tier. */
    TIER,
    /** The longest match was on another DP rank of the chosen endpoint ({@code kv.dp_rank_hint}). */
    DP_RANK,
    /** The longest match was below {@code kv.min_match_blocks}: the fallback policy chose. */
    MIN_MATCH,
    /** kv_exact's periodic re-admission of an endpoint with an empty inventory took the request. */
    COLD_READMIT,
    /** The holder was drained by the operator. */
    DRAINING,
    /** The holder's breaker was open (failing or not yet healthy). */
    UNAVAILABLE,
    /** Admission control had no room on the holder for the request's priority class. */
    ADMISSION,
    /** The holder had already failed this request (a connect retry). */
    RETRY,
    /** Any other fallback decision while an endpoint held part of the prompt. */
    FALLBACK,
    /**
     * Predicted from the speculative overlay only (blocks routed to the endpoint moments ago, no KV event for them
     * yet): the earlier request had not finished its prefill, or its blocks never came.
     */
    SPECULATIVE,
    /** The index said the endpoint held the token (a KV event) and it did not serve it: evicted since, or events lost. */
    INDEX_STALE,
    UNKNOWN;

    private static final LossCause[] ALL = values();

    /** The metric label. */
    public final String label = name().toLowerCase(Locale.ROOT);

    /** Every cause, in declaration order (shared: never modify). */
    static LossCause[] all() {
        return ALL;
    }
}
