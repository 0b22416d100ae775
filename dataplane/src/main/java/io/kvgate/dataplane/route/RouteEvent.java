package io.kvgate.dataplane.route;

/**
 * One slot of the routing ring: a copy of the request's {@link RouteInputs}, filled on the publishing I/O thread by
 * {@link #copyFrom} (the routing thread never reads the exchange), plus the request's {@link RouteCallback} and its
 * event loop's {@link RouterPort} to hand the decision back. Preallocated by the ring and reused; references
 * are cleared after each decision so the ring keeps no request alive.
 *
 * <p>The prompt tokens are the request's own array (immutable once published), not a copy: a copy would cost the
 * I/O thread a prompt-sized write per request for nothing.
 */
public final class RouteEvent {
    /** At most this many already-tried endpoints are carried (connect retries are capped well below it). */
    public static final int MAX_TRIED = 16;

    static final int ROUTE = 1;
    /**
     * SGLang's concurrent P/D: the request's prefill ({@link #role} PREFILL, as published) and its decode endpoint in
     * one decision, both counted together or neither ({@link RouterPort#tryRoutePair}).
     */
    static final int ROUTE_PAIR = 4;
    /** Nothing to decide: makes a busy-spinning or sleeping routing thread run its batch start (swap, probes). */
    static final int WAKE = 2;
    /**
     * An operator's drain or undrain of {@link #drainTarget} ({@link RoutingStage#drain}): applied by the routing
     * stage between the decisions published before it and those after, as a swap is.
     */
    static final int DRAIN = 8;

    int type;
    RouteCallback callback;
    /** {@link #DRAIN}: the endpoint and whether it is drained from now on. */
    EndpointState drainTarget;
    boolean drainOn;
    RouterPort port;
    Rule rule;
    Role role = Role.ANY;
    int[] promptTokens;
    String cacheSalt;
    String lora;
    /**
     * The ids (sorted) of the only endpoints that serve the request's LoRA adapter (a discovered adapter), or null:
     * every endpoint of the rule may take it.
     */
    int[] serving;
    long sessionKeyHash;
    /** chwbl without a tokenizer: the hash of the request text's prefix, 0 when none. */
    long textPrefixKey;
    boolean explain;
    boolean dryRun;
    /** {@link RouteInputs#needsAdmission()}. */
    boolean needsAdmission;
    final int[] triedIds = new int[MAX_TRIED];
    int triedCount;
    /** Admission control: the request's class and tenant (its API key's hash, 0 without one). */
    PriorityClass priority = PriorityClass.STANDARD;
    long tenant;
    /**
     * The admission control of the rule deciding this request (set by the routing stage before the policy runs), or
     * null: policies then skip saturated endpoints through {@link RoutingPolicy#eligible}.
     */
    Admission gate;
    /** {@link RouteInputs#tracksPrefill()}: only then is the chosen endpoint charged {@link #uncachedTokens}. */
    boolean tracksPrefill;
    /**
     * Set by the policy that decided (kv_exact): the prompt tokens the chosen endpoint does not hold, which it must
     * prefill. 0 when unknown. Reset by the routing stage before each decision.
     */
    int uncachedTokens;
    /** {@link RouteInputs#sendsDpRank()}: only then may kv_exact pin the request to a DP rank. */
    boolean sendsDpRank;
    /** Set by the policy that decided: the DP rank of the chosen endpoint the request is pinned to, -1 for none. */
    int chosenRank = -1;
    /** Set by the policy that decided: the tier that made the decision, null for a policy without tiers. */
    RuleStats.Tier tier;
    /**
     * Set by kv_exact (routing-quality accounting, {@code io.kvgate.dataplane.quality}): the longest prompt prefix, in
     * tokens, any endpoint the request may go to held at decision time (index + speculative overlay); -1 when no lookup
     * ran. Reset by the routing stage before each decision, as the three below.
     */
    int reachableTokens = -1;
    /** Set by admission control when it lets a waiting request go: when it queued and released it (0: never waited). */
    boolean waitedForAdmission;
    long admissionQueuedAtNs;
    long admissionAdmittedAtNs;
    /** Set by kv_exact: the prompt tokens the index found cached on the chosen endpoint; -1 when no lookup ran. */
    int predictedTokens = -1;
    /** Set by kv_exact: the part of {@link #predictedTokens} KV events confirmed (not the speculative overlay alone). */
    int confirmedTokens = -1;
    /** Set by kv_exact when {@link #reachableTokens} exceeds {@link #predictedTokens}: why the holder was passed over. */
    io.kvgate.dataplane.quality.LossCause routeLoss;

    /** The policy's tier for this decision (returned, for {@link RuleStats#tier}). */
    RuleStats.Tier decidedBy(RuleStats.Tier t) {
        tier = t;
        return t;
    }

    /** Copies the request's routing inputs (publishing thread). */
    void copyFrom(RouteInputs in, RouteCallback cb, RouterPort p) {
        type = ROUTE;
        callback = cb;
        port = p;
        rule = in.rule;
        role = in.role;
        promptTokens = in.promptTokens;
        cacheSalt = in.cacheSalt;
        lora = in.lora;
        serving = in.serving;
        sessionKeyHash = in.sessionKeyHash;
        textPrefixKey = in.textPrefixKey;
        explain = in.explain;
        dryRun = in.dryRun;
        needsAdmission = in.needsAdmission();
        System.arraycopy(in.triedIds, 0, triedIds, 0, in.triedCount);
        triedCount = in.triedCount;
        priority = in.priority;
        tenant = in.tenant;
        tracksPrefill = in.tracksPrefill;
        sendsDpRank = in.sendsDpRank;
        waitedForAdmission = false;
    }

    /** Copies another slot's inputs (the routing stage keeps a waiting request's inputs past its ring slot). */
    void copyFrom(RouteEvent o) {
        type = o.type;
        callback = o.callback;
        port = o.port;
        rule = o.rule;
        role = o.role;
        promptTokens = o.promptTokens;
        cacheSalt = o.cacheSalt;
        lora = o.lora;
        serving = o.serving;
        sessionKeyHash = o.sessionKeyHash;
        textPrefixKey = o.textPrefixKey;
        explain = o.explain;
        dryRun = o.dryRun;
        needsAdmission = o.needsAdmission;
        System.arraycopy(o.triedIds, 0, triedIds, 0, o.triedCount);
        triedCount = o.triedCount;
        priority = o.priority;
        tenant = o.tenant;
        tracksPrefill = o.tracksPrefill;
        sendsDpRank = o.sendsDpRank;
        waitedForAdmission = o.waitedForAdmission;
        admissionQueuedAtNs = o.admissionQueuedAtNs;
        admissionAdmittedAtNs = o.admissionAdmittedAtNs;
    }

    void clear() {
        drainTarget = null;
        gate = null;
        callback = null;
        port = null;
        rule = null;
        promptTokens = null;
        cacheSalt = null;
        lora = null;
        serving = null;
    }

    /** For policy unit tests and benchmarks: an event with these inputs and no request behind it. */
    public static RouteEvent of(Rule rule, Role role, int[] promptTokens, String cacheSalt, long sessionKeyHash,
                                boolean explain, boolean dryRun) {
        RouteEvent e = new RouteEvent();
        e.type = ROUTE;
        e.rule = rule;
        e.role = role;
        e.promptTokens = promptTokens;
        e.cacheSalt = cacheSalt;
        e.sessionKeyHash = sessionKeyHash;
        e.explain = explain;
        e.dryRun = dryRun;
        e.needsAdmission = role != Role.DECODE;
        return e;
    }

    /** Marks {@code ep} as tried (tests and benchmarks; requests report theirs through {@link RouteInputs#tried}). */
    public RouteEvent tried(EndpointState ep) {
        if (triedCount < MAX_TRIED) {
            triedIds[triedCount++] = ep.id();
        }
        return this;
    }

    public Role role() {
        return role;
    }

    public int[] promptTokens() {
        return promptTokens;
    }

    /** Replaces the prompt (tests and benchmarks reusing one event). */
    public RouteEvent promptTokens(int[] tokens) {
        this.promptTokens = tokens;
        return this;
    }

    public String cacheSalt() {
        return cacheSalt;
    }

    /** The uncached prompt tokens the last decision charged (tests), see {@link #uncachedTokens}. */
    public int uncachedTokens() {
        return uncachedTokens;
    }

    /** The DP rank the last decision pinned the request to, -1 for none (tests). */
    public int chosenRank() {
        return chosenRank;
    }

    /** Marks the event as a request that can carry a DP rank hint (tests and benchmarks). */
    public RouteEvent sendsDpRank(boolean on) {
        this.sendsDpRank = on;
        return this;
    }

    /** Marks the event as a request that reports its prefill's end (tests and benchmarks). */
    public RouteEvent tracksPrefill(boolean on) {
        this.tracksPrefill = on;
        return this;
    }

    public String lora() {
        return lora;
    }

    /** The request text's prefix key (chwbl without a tokenizer), 0 when none. */
    public long textPrefixKey() {
        return textPrefixKey;
    }

    /** Sets the text-prefix key (tests and benchmarks reusing one event). */
    public RouteEvent textPrefixKey(long key) {
        this.textPrefixKey = key;
        return this;
    }

    /** {@link SessionKeys#NONE} when the request has no session key. */
    public long sessionKeyHash() {
        return sessionKeyHash;
    }

    public boolean explain() {
        return explain;
    }

    public boolean dryRun() {
        return dryRun;
    }

    /** Whether {@code ep} serves the request's adapter (always, unless only some endpoints list it). */
    boolean serves(EndpointState ep) {
        return serving == null || java.util.Arrays.binarySearch(serving, ep.id()) >= 0;
    }

    /** For policy unit tests: restricts the event to the endpoints with these ids (a discovered adapter's). */
    public RouteEvent servedBy(int... endpointIds) {
        int[] ids = endpointIds.clone();
        java.util.Arrays.sort(ids);
        this.serving = ids;
        return this;
    }

    boolean alreadyTried(EndpointState ep) {
        int id = ep.id();
        for (int i = 0; i < triedCount; i++) {
            if (triedIds[i] == id) {
                return true;
            }
        }
        return false;
    }
}
