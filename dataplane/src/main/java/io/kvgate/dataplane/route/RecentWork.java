package io.kvgate.dataplane.route;

/**
 * New prefill work that landed on each endpoint lately, from every gateway in front of it: the KV blocks the engine
 * came to hold ({@link io.kvgate.index.block.BlockIndex#blocksAdded}, fed by its KV events), decayed over
 * {@link #WINDOW_NS} ({@code kv.spread: recent_work}).
 *
 * <p>Why: replicas of the gateway see each other's placements only through the engines. The load scrape shows them a
 * quarter of a second late and as a sample of requests that mostly finished already (short requests), so three
 * replicas placing new conversations at once each spread their own and collide (issue #35 shape 2: the busiest engine
 * 1.5x the mean through 3 gateways). A BlockStored event arrives milliseconds after the engine prefilled a request,
 * whoever routed it, and a conversation keeps storing blocks at its engine turn after turn: the recent growth of an
 * engine's blocks says how much work was recently placed there, which a new conversation should avoid.
 *
 * <p>Threading: routing stage only (one instance per kv_exact policy); the counter it reads is the index writer's.
 * No allocation after construction.
 */
final class RecentWork {
    /** The default decay time of the recent blocks ({@code kv.recent_work_window_ms}). */
    static final long WINDOW_NS = 1_000_000_000L;

    /** Decay time of the recent blocks. */
    private final long windowNs;
    private final long[] seenAdded;
    private final double[] recent;
    /**
     * Blocks this gateway just sent to the endpoint (a request's uncached blocks, at its decision) whose KV events
     * have not arrived yet: they count at once, and the endpoint's next new blocks confirm them instead of adding.
     * So one replica's own burst is seen without waiting for the events, and never twice.
     */
    private final double[] pending;
    private final long[] atNs;
    private final boolean[] started;

    RecentWork(int maxEndpoints) {
        this(maxEndpoints, WINDOW_NS);
    }

    RecentWork(int maxEndpoints, long windowNs) {
        if (windowNs <= 0) {
            throw new IllegalArgumentException("windowNs=" + windowNs + " must be > 0");
        }
        this.windowNs = windowNs;
        seenAdded = new long[maxEndpoints];
        recent = new double[maxEndpoints];
        pending = new double[maxEndpoints];
        atNs = new long[maxEndpoints];
        started = new boolean[maxEndpoints];
    }

    /**
     * Starts watching endpoint {@code id} from its count of blocks added {@code added} at {@code nowNs}: what it
     * stores from then on is recent work, what it held before is not. The policy watches every endpoint when it is
     * built, before its first decision: a replica whose first unpinned request comes after another replica's must
     * see that one's blocks (issue #35: in a wave of new conversations through 3 gateways, each replica's first
     * placement otherwise took the engines the others had just filled as idle).
     */
    void watch(int id, long added, long nowNs) {
        started[id] = true;
        seenAdded[id] = added;
        atNs[id] = nowNs;
        recent[id] = 0;
        pending[id] = 0;
    }

    /**
     * The blocks endpoint {@code id} stored recently (decayed), given its monotonic count of blocks added
     * {@code added} as of {@code nowNs}. Blocks count from the call that first sees them. For an endpoint not
     * {@link #watch watched} yet, this call starts its watch at 0.
     */
    double update(int id, long added, long nowNs) {
        if (!started[id]) {
            watch(id, added, nowNs);
            return 0;
        }
        long dt = nowNs - atNs[id];
        if (dt > 0) {
            double keep = Math.exp(-(double) dt / windowNs);
            recent[id] *= keep;
            pending[id] *= keep;
            atNs[id] = nowNs;
        }
        long delta = added - seenAdded[id];
        if (delta > 0) {
            // Stored blocks count once: those this gateway sent move from pending to recent, the rest are new.
            pending[id] -= Math.min(delta, pending[id]);
            recent[id] += delta;
        }
        seenAdded[id] = added;
        return recent[id] + pending[id];
    }

    /**
     * This gateway sent endpoint {@code id} a request that will store {@code blocks} new blocks (its uncached ones):
     * they count from now ({@link #pending}). Call after {@link #update} for the same decision.
     */
    void routed(int id, int blocks) {
        if (started[id] && blocks > 0) {
            pending[id] += blocks;
        }
    }

    /** Heap bytes of the arrays (the rule's memory budget). */
    static long heapBytesFor(int maxEndpoints) {
        return (long) maxEndpoints * (Long.BYTES * 2 + Double.BYTES + 1);
    }
}
