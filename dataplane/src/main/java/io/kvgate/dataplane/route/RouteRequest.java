package io.kvgate.dataplane.route;

/**
 * A request as the routing stage sees it. The getters are read once, on the publishing I/O thread, when the request
 * is copied into its ring slot ({@link RouteEvent}); the routing thread never calls back into the request.
 * {@link #onRouted} is invoked ON THE REQUEST'S EVENT LOOP (the thread of the {@link RouterPort} it was published
 * through), in a batch with the other decisions for that loop: implementations act on the decision directly and
 * must not re-dispatch themselves.
 */
public interface RouteRequest {
    /** Which pool of a P/D rule to pick from; {@link Role#ANY} outside P/D. */
    enum Role { ANY, PREFILL, DECODE }

    /** The rule the I/O thread resolved for the request's model (from {@link RoutingStage#table()}). */
    Rule rule();

    default Role role() {
        return Role.ANY;
    }

    /**
     * Whether admission control gates this decision: a request's first decision is gated, a P/D request's later
     * legs were admitted with it (by default: every role but {@link Role#DECODE}, whose request routed its prefill
     * first).
     */
    default boolean needsAdmission() {
        return role() != Role.DECODE;
    }

    /** The prompt's token ids as the engine will see them (rendered + tokenized on the I/O thread), or null. */
    default int[] promptTokens() {
        return null;
    }

    /** vLLM {@code cache_salt} / SGLang salt of the request (enters block 0's hash), or null. */
    default String cacheSalt() {
        return null;
    }

    /** The LoRA adapter the request is served with, or null (base model). kv_exact hashes its blocks under it (vLLM). */
    default String lora() {
        return null;
    }

    /**
     * The sorted ids of the only endpoints serving the request's LoRA adapter (an adapter discovered on some of the
     * rule's endpoints), or null when every endpoint of the rule may take it. The array is shared, never modified.
     */
    default int[] servingEndpoints() {
        return null;
    }

    /** The session affinity key as {@link SessionKeys#hash}, or {@link SessionKeys#NONE}. */
    default long textPrefixKey() {
        return 0L; // RoutingInputs.NO_TEXT_KEY
    }

    /** {@link SessionKeys#NONE} when the request has no session key. */
    default long sessionKeyHash() {
        return SessionKeys.NONE;
    }

    /** Whether the decision should be explained (policies then fill in their {@code why}). */
    default boolean explain() {
        return false;
    }

    /**
     * A decision asked for its explanation only (admin explain): the routing stage decides as it would but counts
     * no load, records no speculative blocks and pins no session.
     */
    default boolean dryRun() {
        return false;
    }

    /** How many endpoints this request already tried (connect failure → retry elsewhere); at most {@link RouteEvent#MAX_TRIED} count. */
    default int triedCount() {
        return 0;
    }

    /** The {@code i}-th endpoint already tried. */
    default EndpointState tried(int i) {
        throw new IndexOutOfBoundsException(i);
    }

    /** Admission control's priority class of the request ({@code X-Kvgate-Priority} or its API key's class). */
    default PriorityClass priority() {
        return PriorityClass.STANDARD;
    }

    /** The tenant admission control is fair across (a hash of the request's API key), 0 when it has none. */
    default long tenant() {
        return 0L;
    }

    /**
     * Whether this request reports the end of its prefill on the endpoint it was routed to
     * ({@link RouterPort#prefillDone}): only then do kv_exact rules charge the endpoint the prompt tokens it does not
     * hold ({@code kv.prefill_token_weight}); a request that cannot report it is routed on request counts alone.
     */
    default boolean tracksPrefill() {
        return false;
    }

    /**
     * The uncached prompt tokens the routing stage charged the endpoint for this request (a {@link #tracksPrefill}
     * request, on its event loop, just before {@link #onRouted} with that endpoint). The request hands them back
     * exactly once through the same port's {@link RouterPort#prefillDone}: when the engine's first response bytes
     * arrive, or when the request ends, whichever comes first.
     */
    default void prefillCharged(int tokens) {}

    /**
     * Whether this request can carry a DP rank hint to the engine ({@code X-data-parallel-rank}) and report its end
     * on that rank ({@link RouterPort#complete(EndpointState, Outcome, int)}): only then do kv_exact rules with
     * {@code kv.dp_rank_hint} score the DP ranks of an endpoint separately and pin the request to one.
     */
    default boolean sendsDpRank() {
        return false;
    }

    /**
     * The DP rank of the endpoint the routing stage pinned this request to (a {@link #sendsDpRank} request, on its
     * event loop, just before {@link #onRouted}); the request sends it to the engine and reports its end, and its
     * prefill, with it.
     */
    default void dpRankChosen(int rank) {}

    /**
     * The routing stage's decision, for the access log and routing-quality accounting (routing thread, before the
     * decision is posted to the request's event loop, which reads it after): the policy tier that chose
     * ({@code kvgate_route_decisions_total}'s label); the longest prompt prefix any endpoint the request may go to held
     * ({@code reachableTokens}), what the chosen endpoint held ({@code predictedTokens}) and the part of that KV events
     * confirmed ({@code confirmedTokens}), all -1 when no lookup ran; and why a holder was passed over when
     * reachable exceeds predicted ({@code routeLoss}, else null).
     */
    default void decision(String tier, int reachableTokens, int predictedTokens, int confirmedTokens,
                          io.kvgate.dataplane.quality.LossCause routeLoss) {}

    /**
     * Admission control held the request from {@code queuedAtNs} to {@code admittedAtNs} (the routing stage's clock,
     * the gateway's): for the request's trace. Called on the routing thread just before the decision is posted to the
     * request's event loop, which reads it after; not called for a request that never waited.
     */
    default void admissionWaited(long queuedAtNs, long admittedAtNs) {}

    /**
     * Admission control gave up on the request (its queue was full, or it waited {@code admission.max_wait_ms}): the
     * client gets 429 with {@code Retry-After}. On the request's event loop; no endpoint was counted for it. The
     * default answers like "no endpoint" for requests that know no better.
     */
    default void onShed(Rule rule, String message) {
        onRouted(null, rule, message);
    }

    /**
     * The decision, on the request's event loop: an endpoint (its load already counted unless dry run: complete it
     * through the same {@link RouterPort}), or null with a reason (no endpoint available / rule gone / ring error).
     */
    void onRouted(EndpointState endpoint, Rule rule, String explanation);
}
