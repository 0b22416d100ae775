package io.kvgate.dataplane.route;

/**
 * Everything a request brings to one routing decision, as one value: the exchange fills it on its event loop and
 * publishes it ({@link RouterPort#tryRoute}), which copies it field by field into a ring slot ({@link RouteEvent}) —
 * the routing thread never reads it. Mutable and reused: each port lends its loop one instance ({@link
 * RouterPort#inputs()}, cleared), filled and published in one go, so routing a request allocates nothing for it.
 *
 * <p>Defaults (after {@link #clear}) are those of a request that brings nothing but its rule: role {@link Role#ANY},
 * no prompt, salt, LoRA or session, not explained, not a dry run, gated by admission, standard priority, no tenant,
 * no prefill tracking, no DP rank.
 */
public final class RouteInputs {
    Rule rule;
    Role role = Role.ANY;
    boolean needsAdmission = true;
    boolean needsAdmissionSet;
    int[] promptTokens;
    String cacheSalt;
    String lora;
    int[] serving;
    long textPrefixKey;
    long sessionKeyHash = SessionKeys.NONE;
    boolean explain;
    boolean dryRun;
    final int[] triedIds = new int[RouteEvent.MAX_TRIED];
    int triedCount;
    PriorityClass priority = PriorityClass.STANDARD;
    long tenant;
    boolean tracksPrefill;
    boolean sendsDpRank;

    /** A fresh value; the hot path reuses its port's ({@link RouterPort#inputs()}) instead. */
    public RouteInputs() {}

    /** Back to the defaults, dropping every reference. */
    public RouteInputs clear() {
        rule = null;
        role = Role.ANY;
        needsAdmission = true;
        needsAdmissionSet = false;
        promptTokens = null;
        cacheSalt = null;
        lora = null;
        serving = null;
        textPrefixKey = 0L;
        sessionKeyHash = SessionKeys.NONE;
        explain = false;
        dryRun = false;
        triedCount = 0;
        priority = PriorityClass.STANDARD;
        tenant = 0L;
        tracksPrefill = false;
        sendsDpRank = false;
        return this;
    }

    /** The rule the I/O thread resolved for the request's model (from {@link RoutingStage#table()}). */
    public RouteInputs rule(Rule r) {
        this.rule = r;
        return this;
    }

    /** Which pool of a P/D rule to pick from. */
    public RouteInputs role(Role r) {
        this.role = r;
        return this;
    }

    /**
     * Whether admission control gates this decision: a request's first decision is gated, a P/D request's later legs
     * were admitted with it. Unless set, every role but {@link Role#DECODE} (whose request routed its prefill first).
     */
    public RouteInputs needsAdmission(boolean on) {
        this.needsAdmission = on;
        this.needsAdmissionSet = true;
        return this;
    }

    /** The prompt's token ids as the engine will see them (rendered + tokenized on the I/O thread), or null. */
    public RouteInputs promptTokens(int[] tokens) {
        this.promptTokens = tokens;
        return this;
    }

    /** vLLM {@code cache_salt} / SGLang salt of the request (enters block 0's hash), or null. */
    public RouteInputs cacheSalt(String salt) {
        this.cacheSalt = salt;
        return this;
    }

    /** The LoRA adapter the request is served with, or null (base model). kv_exact hashes its blocks under it. */
    public RouteInputs lora(String adapter) {
        this.lora = adapter;
        return this;
    }

    /**
     * The sorted ids of the only endpoints serving the request's LoRA adapter (an adapter discovered on some of the
     * rule's endpoints), or null when every endpoint of the rule may take it. Shared, never modified.
     */
    public RouteInputs servingEndpoints(int[] ids) {
        this.serving = ids;
        return this;
    }

    /** chwbl without a tokenizer: the hash of the request text's prefix, 0 when none. */
    public RouteInputs textPrefixKey(long key) {
        this.textPrefixKey = key;
        return this;
    }

    /** The session affinity key as {@link SessionKeys#hash}, or {@link SessionKeys#NONE}. */
    public RouteInputs sessionKeyHash(long hash) {
        this.sessionKeyHash = hash;
        return this;
    }

    /** Whether the decision should be explained (policies then fill in their {@code why}). */
    public RouteInputs explain(boolean on) {
        this.explain = on;
        return this;
    }

    /**
     * A decision asked for its explanation only (admin explain): the routing stage decides as it would but counts no
     * load, records no speculative blocks and pins no session.
     */
    public RouteInputs dryRun(boolean on) {
        this.dryRun = on;
        return this;
    }

    /** An endpoint this request already tried (connect failure: retry elsewhere); at most {@link RouteEvent#MAX_TRIED} count. */
    public RouteInputs tried(EndpointState ep) {
        if (triedCount < RouteEvent.MAX_TRIED) {
            triedIds[triedCount++] = ep.id();
        }
        return this;
    }

    /** Admission control's priority class of the request ({@code X-Kvgate-Priority} or its API key's class). */
    public RouteInputs priority(PriorityClass cls) {
        this.priority = cls;
        return this;
    }

    /** The tenant admission control is fair across (a hash of the request's API key), 0 when it has none. */
    public RouteInputs tenant(long t) {
        this.tenant = t;
        return this;
    }

    /**
     * The request reports the end of its prefill on the endpoint it was routed to ({@link RouterPort#prefillDone}):
     * only then do kv_exact rules charge the endpoint the prompt tokens it does not hold
     * ({@link Decision#chargedPrefillTokens}).
     */
    public RouteInputs tracksPrefill(boolean on) {
        this.tracksPrefill = on;
        return this;
    }

    /**
     * The request can carry a DP rank hint to the engine ({@code X-data-parallel-rank}) and report its end on that
     * rank: only then do kv_exact rules with {@code kv.dp_rank_hint} pin it to one ({@link Decision#dpRank}).
     */
    public RouteInputs sendsDpRank(boolean on) {
        this.sendsDpRank = on;
        return this;
    }

    public Rule rule() {
        return rule;
    }

    public Role role() {
        return role;
    }

    /** Whether admission control gates the decision (see {@link #needsAdmission(boolean)}). */
    public boolean needsAdmission() {
        return needsAdmissionSet ? needsAdmission : role != Role.DECODE;
    }

    public int[] promptTokens() {
        return promptTokens;
    }

    public String cacheSalt() {
        return cacheSalt;
    }

    public long sessionKeyHash() {
        return sessionKeyHash;
    }

    public boolean explain() {
        return explain;
    }

    public boolean dryRun() {
        return dryRun;
    }

    public int triedCount() {
        return triedCount;
    }

    public PriorityClass priority() {
        return priority;
    }

    public boolean tracksPrefill() {
        return tracksPrefill;
    }

    public boolean sendsDpRank() {
        return sendsDpRank;
    }

    /** Copies {@code o} (tests scripting the router keep what was published past the port's reuse). */
    public RouteInputs copyFrom(RouteInputs o) {
        rule = o.rule;
        role = o.role;
        needsAdmission = o.needsAdmission;
        needsAdmissionSet = o.needsAdmissionSet;
        promptTokens = o.promptTokens;
        cacheSalt = o.cacheSalt;
        lora = o.lora;
        serving = o.serving;
        textPrefixKey = o.textPrefixKey;
        sessionKeyHash = o.sessionKeyHash;
        explain = o.explain;
        dryRun = o.dryRun;
        System.arraycopy(o.triedIds, 0, triedIds, 0, o.triedCount);
        triedCount = o.triedCount;
        priority = o.priority;
        tenant = o.tenant;
        tracksPrefill = o.tracksPrefill;
        sendsDpRank = o.sendsDpRank;
        return this;
    }
}
