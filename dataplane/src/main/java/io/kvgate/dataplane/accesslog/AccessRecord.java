package io.kvgate.dataplane.accesslog;

/**
 * What the access log says about one request: filled while the request is handled, then copied into the access
 * log's queue when the request ends ({@link AccessLog#log}). One per client connection (the front door's, reused for
 * each request it reads; an exchange fills the same one), so logging allocates nothing per request. Strings are
 * kept by reference: every one is immutable and already exists for the request (request id, rule name, model...).
 * Never holds a secret: the key is named by {@link #keyId}, a fingerprint. Event-loop only until copied.
 */
public final class AccessRecord {
    /** A count or duration the request never produced: written as JSON {@code null}. */
    public static final long UNKNOWN = -1;

    /** Wall-clock time the request ended, epoch milliseconds (set by {@link AccessLog#log}). */
    public long timeMillis;
    public String requestId;
    /** The 32-hex trace id (W3C {@code traceparent}), or null. The one place a request's trace id is kept. */
    public String traceId;
    public String keyId;
    /** The caller's tenant ({@code tenants[].name}, or {@code anonymous}), or null before the key was checked. */
    public String tenant;
    public String rule;
    public String model;
    /** The engine endpoint that answered ({@code host:port}), or null when none did. */
    public String endpoint;
    /** The endpoint a hedge leg went to (rules[].hedge, docs/hedging.md), or null when the request was not hedged. */
    public String hedgeEndpoint;
    /** The HTTP status the client got (499: the client left first). */
    public int status;
    public long bytesIn;
    public long bytesOut;
    public long promptTokens = UNKNOWN;
    public long cachedTokens = UNKNOWN;
    /** Completion tokens the engine reported (usage), or unknown; with {@link #promptTokens}, what a reservation settles. */
    public long completionTokens = UNKNOWN;
    /**
     * The longest prompt prefix, in tokens, any endpoint the request could go to held at decision time (kv_exact's
     * index lookup), or unknown.
     */
    public long reachableTokens = UNKNOWN;
    /** Prompt tokens the routing decision found cached on the chosen endpoint (kv_exact), or unknown. */
    public long predictedTokens = UNKNOWN;
    /** Why the router passed over an endpoint holding more of the prompt ({@code LossCause} label), or null. */
    public String routeLoss;
    public long ttftNs = UNKNOWN;
    public long durationNs;
    /** The routing policy tier that chose the endpoint ({@code kvgate_route_decisions_total}'s label), or null. */
    public String tier;
    /** Why the request failed (the OpenAI error's code or the refusal's reason), or null on success. */
    public String errorCode;
    public boolean stream;
    /**
     * Mid-stream failover: the endpoints the request left, in order, joined with {@code ,} (the last one answered:
     * {@link #endpoint}), or null when it never moved.
     */
    public String migratedFrom;

    /** Forgets the previous request: every field back to "not known". */
    public void reset() {
        timeMillis = 0;
        requestId = null;
        traceId = null;
        keyId = null;
        tenant = null;
        rule = null;
        model = null;
        endpoint = null;
        hedgeEndpoint = null;
        status = 0;
        bytesIn = 0;
        bytesOut = 0;
        promptTokens = UNKNOWN;
        cachedTokens = UNKNOWN;
        completionTokens = UNKNOWN;
        reachableTokens = UNKNOWN;
        predictedTokens = UNKNOWN;
        routeLoss = null;
        ttftNs = UNKNOWN;
        durationNs = 0;
        tier = null;
        errorCode = null;
        stream = false;
        migratedFrom = null;
    }

    /** Makes this a copy of {@code o} (the queue's slot taking the request's record). */
    public void copyFrom(AccessRecord o) {
        timeMillis = o.timeMillis;
        requestId = o.requestId;
        traceId = o.traceId;
        keyId = o.keyId;
        tenant = o.tenant;
        rule = o.rule;
        model = o.model;
        endpoint = o.endpoint;
        hedgeEndpoint = o.hedgeEndpoint;
        status = o.status;
        bytesIn = o.bytesIn;
        bytesOut = o.bytesOut;
        promptTokens = o.promptTokens;
        cachedTokens = o.cachedTokens;
        completionTokens = o.completionTokens;
        reachableTokens = o.reachableTokens;
        predictedTokens = o.predictedTokens;
        routeLoss = o.routeLoss;
        ttftNs = o.ttftNs;
        durationNs = o.durationNs;
        tier = o.tier;
        errorCode = o.errorCode;
        stream = o.stream;
        migratedFrom = o.migratedFrom;
    }
}
