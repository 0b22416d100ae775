package io.kvgate.dataplane.route;

/**
 * One routing decision as the request's event loop receives it ({@link RouteCallback#onDecision}): a flyweight over
 * the {@link RouterPort}'s per-loop decision slot, written by the routing thread and read by the loop, so handing a
 * decision back allocates nothing. Valid only during the callback: the slot is cleared and reused after it.
 *
 * <p>What one decision says, in the order a callback usually asks:
 * <ul>
 *   <li>{@link #shed()}: admission control gave up on the request (429 with {@code Retry-After}); no endpoint was
 *       counted; {@link #explanation()} is the client's message;</li>
 *   <li>otherwise {@link #endpoint()}: the chosen endpoint, its load already counted unless dry run (complete it
 *       through the same port), or null with the reason in {@link #explanation()} (no endpoint available, rule gone,
 *       routing error);</li>
 *   <li>{@link #decodeEndpoint()}: a pair decision's decode endpoint ({@link RouterPort#tryRoutePair}), counted with
 *       {@link #endpoint()}; both or neither are set;</li>
 *   <li>the prefill tokens charged to the endpoint and the DP rank it was pinned to, which the request hands back on
 *       completion; the policy tier and the cached prompt tokens found (access log); the admission wait (trace).</li>
 * </ul>
 */
public final class Decision {
    EndpointState endpoint;
    EndpointState decodeEndpoint;
    Rule rule;
    String explanation;
    Role unserved;
    boolean shed;
    int chargedPrefillTokens;
    int dpRank = -1;
    String tier;
    int reachableTokens = -1;
    int predictedTokens = -1;
    int confirmedTokens = -1;
    io.kvgate.dataplane.quality.LossCause routeLoss;
    boolean waitedForAdmission;
    long admissionQueuedAtNs;
    long admissionAdmittedAtNs;

    Decision() {}

    /** A routed decision outside a routing stage: for exchanges' tests that script the router. */
    public static Decision routed(EndpointState endpoint, Rule rule, String explanation) {
        Decision d = new Decision();
        d.endpoint = endpoint;
        d.rule = rule;
        d.explanation = explanation;
        return d;
    }

    /** A routed decision that charged its endpoint {@code prefillTokens} uncached prompt tokens (tests). */
    public static Decision charged(EndpointState endpoint, Rule rule, String explanation, int prefillTokens) {
        Decision d = routed(endpoint, rule, explanation);
        d.chargedPrefillTokens = prefillTokens;
        return d;
    }

    /** A pair decision outside a routing stage (tests scripting SGLang's prefill and decode in one decision). */
    public static Decision pair(EndpointState prefill, EndpointState decode, Rule rule, String explanation) {
        Decision d = routed(prefill, rule, explanation);
        d.decodeEndpoint = decode;
        return d;
    }

    /** A pair refused for want of an endpoint in pool {@code unserved}, outside a routing stage (tests). */
    public static Decision refusedPair(Rule rule, Role unserved, String explanation) {
        Decision d = new Decision();
        d.rule = rule;
        d.unserved = unserved;
        d.explanation = explanation;
        return d;
    }

    /** Admission control's refusal outside a routing stage (tests). */
    public static Decision shed(Rule rule, String message) {
        Decision d = new Decision();
        d.rule = rule;
        d.explanation = message;
        d.shed = true;
        return d;
    }

    void reset() {
        endpoint = null;
        decodeEndpoint = null;
        rule = null;
        explanation = null;
        unserved = null;
        shed = false;
        chargedPrefillTokens = 0;
        dpRank = -1;
        tier = null;
        reachableTokens = -1;
        predictedTokens = -1;
        confirmedTokens = -1;
        routeLoss = null;
        waitedForAdmission = false;
        admissionQueuedAtNs = 0;
        admissionAdmittedAtNs = 0;
    }

    /** The chosen endpoint (a pair decision: the prefill's), or null when none was (see {@link #explanation}). */
    public EndpointState endpoint() {
        return endpoint;
    }

    /** A pair decision's decode endpoint, null otherwise (and whenever {@link #endpoint()} is null). */
    public EndpointState decodeEndpoint() {
        return decodeEndpoint;
    }

    /**
     * A refused pair decision: the pool that had no endpoint ({@link Role#PREFILL} or {@link Role#DECODE}); null for
     * any other decision. Nothing was counted on the other pool.
     */
    public Role unserved() {
        return unserved;
    }

    /** The rule that decided (the current table's, after a swap), null when the request's rule was removed. */
    public Rule rule() {
        return rule;
    }

    /** The policy's reason (explained requests), the refusal's reason without an endpoint, or null. */
    public String explanation() {
        return explanation;
    }

    /** Admission control shed the request (queue full or it waited {@code admission.max_wait_ms}): answer 429. */
    public boolean shed() {
        return shed;
    }

    /**
     * The uncached prompt tokens charged to {@link #endpoint()} for a {@link RouteInputs#tracksPrefill} request; it
     * hands them back exactly once through {@link RouterPort#prefillDone} (first response bytes, or its end). 0: none.
     */
    public int chargedPrefillTokens() {
        return chargedPrefillTokens;
    }

    /** The DP rank of {@link #endpoint()} a {@link RouteInputs#sendsDpRank} request was pinned to, -1 for none. */
    public int dpRank() {
        return dpRank;
    }

    /** The policy tier that chose ({@code kvgate_route_decisions_total}'s label), null for a policy without tiers. */
    public String tier() {
        return tier;
    }

    /**
     * Routing-quality accounting ({@code io.kvgate.dataplane.quality}): the longest prompt prefix, in tokens, any
     * endpoint the request may go to held at decision time; -1 when no lookup ran.
     */
    public int reachableTokens() {
        return reachableTokens;
    }

    /** The prompt tokens the KV index (and the speculative overlay) found cached on {@link #endpoint()}; -1: no lookup. */
    public int predictedTokens() {
        return predictedTokens;
    }

    /** The part of {@link #predictedTokens()} KV events confirmed (not the speculative overlay alone); -1: no lookup. */
    public int confirmedTokens() {
        return confirmedTokens;
    }

    /** Why a holder of more of the prompt was passed over (reachable exceeds predicted), else null. */
    public io.kvgate.dataplane.quality.LossCause routeLoss() {
        return routeLoss;
    }

    /** Whether admission control held the request before this decision ({@link #admissionQueuedAtNs} then is set). */
    public boolean waitedForAdmission() {
        return waitedForAdmission;
    }

    /** When admission control queued the request (the gateway's clock); 0 when it never waited. */
    public long admissionQueuedAtNs() {
        return admissionQueuedAtNs;
    }

    /** When admission control let the request go; 0 when it never waited. */
    public long admissionAdmittedAtNs() {
        return admissionAdmittedAtNs;
    }
}
