package io.kvgate.dataplane.route;

import io.netty.util.concurrent.EventExecutor;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One event loop's connection to the routing stage: how its requests go in, how decisions come back, how completions
 * are reported. One port per event loop ({@link RoutingStage#port}); all three hand-offs are batched and none blocks
 * or allocates per request:
 *
 * <ul>
 *   <li><b>In</b> ({@link #tryRoute}): the request's inputs are copied into a ring slot without waking the routing
 *       thread; the first publish of an event-loop turn queues one task that wakes it at the end of the turn, so
 *       everything one turn read costs one wake-up.</li>
 *   <li><b>Back</b>: decisions land in this port's inbox (a single-producer/single-consumer array ring, the routing
 *       thread producing, the loop consuming); at the end of each routing batch the stage schedules at most one drain
 *       task per port ({@code execute(this)}, skipped while a drain is already pending), and the drain delivers every
 *       decision with {@link RouteCallback#onDecision} on the loop, the inbox slot itself being the {@link Decision} it
 *       gets. The inbox cannot overflow: a request reserves its
 *       decision's slot when it is published and the reservation ends when the decision is drained; with no slot
 *       free the request is refused like a full ring (503).</li>
 *   <li><b>Completions</b> ({@link #complete}): per-endpoint counters written only by this loop (release stores);
 *       the routing thread reads them at the start of each batch and on its idle duty cycle. A completion never wakes
 *       the router, never waits for ring space (reliability review M14) and is never lost.</li>
 * </ul>
 *
 * <p>When the stage runs on an event loop ({@code router.thread: io}), "the routing thread" below is that loop inside
 * the stage's cycles: each publish is decided in a short cycle before {@link #tryRoute} returns, the end-of-turn task
 * runs the full cycle instead of waking a thread, and the loop's own port gets its decisions in the cycle that made
 * them ({@link #deliverNow}) instead of a drain task. Ports of other executors (the admin explain port, tests) are
 * served as before: their publishes ask the loop for a cycle, their decisions come back through a drain task on
 * their executor.
 *
 * <p>Threading: {@link #tryRoute} and {@link #complete} are called by the port's owning thread only (the event loop;
 * for a port with a plain {@link Executor}, callers serialize themselves); {@link #run} runs on the executor.
 */
public final class RouterPort implements Runnable {
    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final int RANKS = EngineReading.MAX_RANKS;
    private static final VarHandle PUBLISHED_TAIL;
    private static final VarHandle DRAINED_HEAD;
    private static final VarHandle COMPLETIONS;
    private static final VarHandle TTFT_VERSION;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            PUBLISHED_TAIL = l.findVarHandle(RouterPort.class, "publishedTail", long.class);
            DRAINED_HEAD = l.findVarHandle(RouterPort.class, "drainedHead", long.class);
            COMPLETIONS = l.findVarHandle(RouterPort.class, "completions", long.class);
            TTFT_VERSION = l.findVarHandle(RouterPort.class, "ttftVersion", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final RoutingStage stage;
    private final Executor executor;
    /** Non-null when {@link #executor} is a Netty event loop: lets publishes in one loop turn share one wake-up. */
    private final EventExecutor eventLoop;

    // Inbox slots (router writes, loop reads and clears).
    private final int capacity;
    private final int mask;
    private final RouteCallback[] callbacks;
    /** The decisions themselves, preallocated: the routing thread fills one, the loop hands it to its callback. */
    private final Decision[] slots;
    /** The routing inputs this port lends its publisher ({@link #inputs()}), reused for every request. */
    private final RouteInputs inputs = new RouteInputs();
    /** Router only: next slot to fill. */
    private long routerTail;
    /** Slots filled and visible to the loop (router: release at the end of each batch). */
    private volatile long publishedTail;
    /** Loop only: next slot to deliver. */
    private long head;
    /** Slots delivered (drainer: release), read by the publisher for its reservation check. */
    private volatile long drainedHead;
    /** Publisher only: decisions asked for through this port. */
    private long reserved;
    private final AtomicBoolean drainScheduled = new AtomicBoolean();
    /** Drain tasks run (drainer only; tests read it after the drains). */
    private long drains;
    /** Router only: this port got decisions in the current batch. */
    boolean dirty;

    // End-of-turn wake-up (loop only).
    private boolean wakeQueued;
    private final Runnable wakeRouterTask = this::wakeRouterAtEndOfTurn;

    // Completion counters: loop writes (release), router reads (acquire).
    private volatile CompletionCounts counts = new CompletionCounts(64);
    /** Total completions reported (loop: release), so the router skips ports with nothing new. */
    private volatile long completions;
    /**
     * Seqlock over the TTFT sums and counts (a sample's sum and count must be read together): odd while this port's
     * thread writes one, bumped twice per sample; the router skips a port whose version moved while it read.
     */
    private volatile long ttftVersion;
    // Router only: what it has applied so far.
    private long completionsApplied;
    private long[] appliedSucceeded = new long[64];
    private long[] appliedFailed = new long[64];
    private long[] appliedReleased = new long[64];
    private long[] appliedPrefillDone = new long[64];
    private long[] appliedRankDone = new long[64 * RANKS];
    private long[] appliedRankPrefillDone = new long[64 * RANKS];
    private long[] appliedTtftSumNs = new long[64];
    private long[] appliedTtftCount = new long[64];
    private long[] appliedBoundSumNs = new long[64];
    private long[] appliedBoundCount = new long[64];
    private long ttftVersionApplied;
    /** The TTFT counters as read under one seqlock version (sum, count, bound sum, bound count per endpoint). */
    private long[] scratchTtft = new long[4 * 64];

    private static final class CompletionCounts {
        final long[] succeeded;
        final long[] failed;
        final long[] released;
        /** Charged prefill tokens handed back (first response bytes, or the end of the request). */
        final long[] prefillDone;
        /** Per (endpoint, DP rank), index {@code id * 8 + rank}: pinned requests finished, their prefill tokens back. */
        final long[] rankDone;
        final long[] rankPrefillDone;
        /** First tokens measured (streamed legs' send to first body bytes): their sum in ns and their count. */
        final long[] ttftSumNs;
        final long[] ttftCount;
        /** Primary legs cancelled by a hedge before their first token: their waits (TTFT lower bounds) and count. */
        final long[] boundSumNs;
        final long[] boundCount;

        CompletionCounts(int endpoints) {
            succeeded = new long[endpoints];
            failed = new long[endpoints];
            released = new long[endpoints];
            prefillDone = new long[endpoints];
            rankDone = new long[endpoints * RANKS];
            rankPrefillDone = new long[endpoints * RANKS];
            ttftSumNs = new long[endpoints];
            ttftCount = new long[endpoints];
            boundSumNs = new long[endpoints];
            boundCount = new long[endpoints];
        }
    }

    RouterPort(RoutingStage stage, Executor executor, int capacity) {
        if (Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("capacity=" + capacity + " must be a power of two");
        }
        this.stage = stage;
        this.executor = executor;
        this.eventLoop = executor instanceof EventExecutor e ? e : null;
        this.capacity = capacity;
        this.mask = capacity - 1;
        this.callbacks = new RouteCallback[capacity];
        this.slots = new Decision[capacity];
        for (int i = 0; i < capacity; i++) {
            slots[i] = new Decision();
        }
    }

    /**
     * The routing inputs to fill for the next {@link #tryRoute} on this port, cleared: one instance per port, reused,
     * so a request's inputs cost no allocation. The port's owning thread only; valid until that publish returns.
     */
    public RouteInputs inputs() {
        return inputs.clear();
    }

    /**
     * Publishes a request's {@code inputs} (copied before this returns) for routing. Returns false when the request
     * must be shed (503 with Retry-After): the ring is full or this loop already waits for as many decisions as its
     * inbox holds. On true, exactly one {@link RouteCallback#onDecision} of {@code callback} follows on this port's
     * executor.
     */
    public boolean tryRoute(RouteInputs inputs, RouteCallback callback) {
        return publish(inputs, callback, false);
    }

    /**
     * As {@link #tryRoute}, for a P/D request whose prefill ({@code inputs}, role {@link Role#PREFILL}) and decode
     * endpoints are chosen in one decision (SGLang: both legs start together): one round trip; both endpoints are
     * counted together, or, when either pool has none, neither ({@link Decision#unserved()}). The decode is chosen as
     * the request's decode leg would be: without the prompt, nothing tried, not gated by admission again.
     */
    public boolean tryRoutePair(RouteInputs inputs, RouteCallback callback) {
        return publish(inputs, callback, true);
    }

    private boolean publish(RouteInputs inputs, RouteCallback callback, boolean pair) {
        if (reserved - drainedHead >= capacity) {
            stage.countInboxFull();
            return false;
        }
        if (!stage.publish(inputs, callback, this, pair)) {
            return false;
        }
        reserved++;
        if (eventLoop != null && eventLoop.inEventLoop()) {
            if (!wakeQueued) {
                wakeQueued = true;
                eventLoop.execute(wakeRouterTask);
            }
            stage.decideAtOnce(); // io mode on this loop: decided and delivered before this returns
        } else {
            stage.wakeRouter();
        }
        return true;
    }

    private void wakeRouterAtEndOfTurn() {
        wakeQueued = false;
        stage.endOfTurn(); // io mode on the stage's own loop: the stage runs here, and this turn's decisions come back
    }

    /**
     * A request routed to {@code endpoint} through this port finished with {@code outcome}. Called once per routed
     * (not dry-run) decision, on this port's thread. Never blocks, never wakes the routing thread.
     */
    public void complete(EndpointState endpoint, Outcome outcome) {
        int id = endpoint.id();
        CompletionCounts c = countsFor(id);
        long[] a = switch (outcome) {
            case SUCCESS -> c.succeeded;
            case FAILURE -> c.failed;
            case RELEASED -> c.released;
        };
        LONGS.setRelease(a, id, (long) LONGS.get(a, id) + 1);
        COMPLETIONS.setRelease(this, (long) COMPLETIONS.get(this) + 1);
    }

    /**
     * As {@link #complete(EndpointState, Outcome)}, for a request the routing stage pinned to DP rank {@code rank}
     * (-1: none), so the rank's own count of requests in flight follows too.
     */
    public void complete(EndpointState endpoint, Outcome outcome, int rank) {
        if (rank >= 0 && rank < RANKS) {
            addForRank(endpoint.id(), rank, false, 1);
        }
        complete(endpoint, outcome);
    }

    /** As {@link #prefillDone(EndpointState, int)}, for a request pinned to DP rank {@code rank} (-1: none). */
    public void prefillDone(EndpointState endpoint, int tokens, int rank) {
        if (tokens <= 0) {
            return;
        }
        if (rank >= 0 && rank < RANKS) {
            addForRank(endpoint.id(), rank, true, tokens);
        }
        prefillDone(endpoint, tokens);
    }

    /**
     * {@code tokens} of the prefill the routing stage charged to a request routed to {@code endpoint} through this
     * port are done (its first response bytes arrived, or it ended). On this port's thread, like {@link #complete};
     * never blocks, never wakes the routing thread.
     */
    public void prefillDone(EndpointState endpoint, int tokens) {
        if (tokens <= 0) {
            return;
        }
        int id = endpoint.id();
        CompletionCounts c = countsFor(id);
        LONGS.setRelease(c.prefillDone, id, (long) LONGS.get(c.prefillDone, id) + tokens);
        COMPLETIONS.setRelease(this, (long) COMPLETIONS.get(this) + 1);
    }

    /** The counters, grown first when endpoint {@code id} is beyond them. */
    private CompletionCounts countsFor(int id) {
        CompletionCounts c = counts;
        return id < c.succeeded.length ? c : grow(c, id);
    }

    /** Adds {@code n} to DP rank {@code rank}'s completed requests, or its prefill tokens done ({@code prefill}). */
    private void addForRank(int id, int rank, boolean prefill, long n) {
        CompletionCounts c = countsFor(id);
        long[] a = prefill ? c.rankPrefillDone : c.rankDone;
        int i = id * RANKS + rank;
        LONGS.setRelease(a, i, (long) LONGS.get(a, i) + n);
    }

    /**
     * A request routed to {@code endpoint} through this port got its first token {@code ttftNs} after it was sent
     * ({@link TtftEstimate}). On this port's thread, like {@link #complete}; never blocks, never wakes the router.
     */
    public void firstToken(EndpointState endpoint, long ttftNs) {
        addSample(endpoint, ttftNs, false);
    }

    /**
     * A request's leg on {@code endpoint} was cancelled by a hedge that won, {@code waitedNs} after it was sent,
     * with no first token yet: a lower bound of its TTFT ({@link TtftEstimate}). On this port's thread.
     */
    public void noFirstTokenAfter(EndpointState endpoint, long waitedNs) {
        addSample(endpoint, waitedNs, true);
    }

    private void addSample(EndpointState endpoint, long ns, boolean lowerBound) {
        if (ns < 0) {
            return;
        }
        int id = endpoint.id();
        CompletionCounts c = countsFor(id);
        long[] sum = lowerBound ? c.boundSumNs : c.ttftSumNs;
        long[] count = lowerBound ? c.boundCount : c.ttftCount;
        long v = (long) TTFT_VERSION.get(this);
        TTFT_VERSION.setOpaque(this, v + 1);
        VarHandle.storeStoreFence();
        LONGS.setOpaque(sum, id, (long) LONGS.get(sum, id) + ns);
        LONGS.setOpaque(count, id, (long) LONGS.get(count, id) + 1);
        TTFT_VERSION.setRelease(this, v + 2);
        COMPLETIONS.setRelease(this, (long) COMPLETIONS.get(this) + 1);
    }

    private CompletionCounts grow(CompletionCounts c, int id) {
        int n = Math.max(id + 1, c.succeeded.length * 2);
        CompletionCounts g = new CompletionCounts(n);
        System.arraycopy(c.succeeded, 0, g.succeeded, 0, c.succeeded.length);
        System.arraycopy(c.failed, 0, g.failed, 0, c.failed.length);
        System.arraycopy(c.released, 0, g.released, 0, c.released.length);
        System.arraycopy(c.prefillDone, 0, g.prefillDone, 0, c.prefillDone.length);
        System.arraycopy(c.rankDone, 0, g.rankDone, 0, c.rankDone.length);
        System.arraycopy(c.rankPrefillDone, 0, g.rankPrefillDone, 0, c.rankPrefillDone.length);
        System.arraycopy(c.ttftSumNs, 0, g.ttftSumNs, 0, c.ttftSumNs.length);
        System.arraycopy(c.ttftCount, 0, g.ttftCount, 0, c.ttftCount.length);
        System.arraycopy(c.boundSumNs, 0, g.boundSumNs, 0, c.boundSumNs.length);
        System.arraycopy(c.boundCount, 0, g.boundCount, 0, c.boundCount.length);
        counts = g; // only this thread writes the counters, so nothing written to the old arrays can be missed
        return g;
    }

    // ---- routing thread -------------------------------------------------------------------------------------

    /**
     * The next decision slot, cleared, for {@code callback}'s decision (routing thread): the stage fills it and
     * {@link #commit}s it; {@link #flush} makes it visible to the loop. The reservation made at publish guarantees the
     * slot is free.
     */
    Decision next(RouteCallback callback) {
        int i = (int) routerTail & mask;
        callbacks[i] = callback;
        Decision d = slots[i];
        d.reset();
        return d;
    }

    /** Queues the slot {@link #next} returned (routing thread). */
    void commit() {
        routerTail++;
    }

    /** Queues a decision without an endpoint, or a plain one (routing thread). */
    void post(RouteCallback callback, EndpointState endpoint, Rule rule, String explanation) {
        Decision d = next(callback);
        d.endpoint = endpoint;
        d.rule = rule;
        d.explanation = explanation;
        commit();
    }

    /** Queues admission control's refusal of a request (routing thread); delivered as a {@link Decision#shed()}. */
    void postShed(RouteCallback callback, Rule rule, String message) {
        Decision d = next(callback);
        d.rule = rule;
        d.explanation = message;
        d.shed = true;
        commit();
    }

    /** Publishes the queued decisions and schedules one drain unless one is pending (routing thread, end of batch). */
    void flush() {
        dirty = false;
        PUBLISHED_TAIL.setVolatile(this, routerTail);
        if (!drainScheduled.get() && drainScheduled.compareAndSet(false, true)) {
            try {
                executor.execute(this);
            } catch (RejectedExecutionException e) {
                // The loop is shutting down: its connections, and the requests waiting for these decisions, are gone.
                drainScheduled.set(false);
                stage.countUndeliverable();
            }
        }
    }

    /** Applies the completions reported since the last call to their endpoints (routing thread). */
    void applyCompletions(EndpointState[] byId, int failureThreshold, long openNs, long nowNs) {
        long total = (long) COMPLETIONS.getAcquire(this);
        if (total == completionsApplied) {
            return;
        }
        completionsApplied = total;
        CompletionCounts c = counts;
        int n = c.succeeded.length;
        if (appliedSucceeded.length < n) {
            appliedSucceeded = java.util.Arrays.copyOf(appliedSucceeded, n);
            appliedFailed = java.util.Arrays.copyOf(appliedFailed, n);
            appliedReleased = java.util.Arrays.copyOf(appliedReleased, n);
            appliedPrefillDone = java.util.Arrays.copyOf(appliedPrefillDone, n);
            appliedRankDone = java.util.Arrays.copyOf(appliedRankDone, n * RANKS);
            appliedRankPrefillDone = java.util.Arrays.copyOf(appliedRankPrefillDone, n * RANKS);
            appliedTtftSumNs = java.util.Arrays.copyOf(appliedTtftSumNs, n);
            appliedTtftCount = java.util.Arrays.copyOf(appliedTtftCount, n);
            appliedBoundSumNs = java.util.Arrays.copyOf(appliedBoundSumNs, n);
            appliedBoundCount = java.util.Arrays.copyOf(appliedBoundCount, n);
        }
        int limit = Math.min(n, byId.length);
        if (scratchTtft.length < 4 * n) {
            scratchTtft = new long[4 * n];
        }
        applyTtft(c, byId, limit, nowNs);
        for (int id = 0; id < limit; id++) {
            // Prefill first: a request reports it before it completes, and its completion may zero the endpoint.
            long p = (long) LONGS.getAcquire(c.prefillDone, id);
            long s = (long) LONGS.getAcquire(c.succeeded, id);
            long f = (long) LONGS.getAcquire(c.failed, id);
            long r = (long) LONGS.getAcquire(c.released, id);
            long dp = p - appliedPrefillDone[id];
            long ds = s - appliedSucceeded[id];
            long df = f - appliedFailed[id];
            long dr = r - appliedReleased[id];
            if (dp != 0 && byId[id] != null) {
                appliedPrefillDone[id] = p;
                byId[id].loadEstimate().onPrefillDone(dp);
                for (int k = 0; k < RANKS; k++) {
                    int i = id * RANKS + k;
                    long rp = (long) LONGS.getAcquire(c.rankPrefillDone, i);
                    if (rp != appliedRankPrefillDone[i]) {
                        byId[id].rankLoad().onPrefillDone(k, rp - appliedRankPrefillDone[i]);
                        appliedRankPrefillDone[i] = rp;
                    }
                }
            }
            if ((ds | df | dr) != 0 && byId[id] != null) {
                appliedSucceeded[id] = s;
                appliedFailed[id] = f;
                appliedReleased[id] = r;
                for (int k = 0; k < RANKS; k++) {
                    int i = id * RANKS + k;
                    long rd = (long) LONGS.getAcquire(c.rankDone, i);
                    if (rd != appliedRankDone[i]) {
                        byId[id].rankLoad().onCompleted(k, rd - appliedRankDone[i]);
                        appliedRankDone[i] = rd;
                    }
                }
                byId[id].onCompleted(ds, df, dr, failureThreshold, openNs, nowNs);
            }
        }
    }

    /**
     * The first tokens and lower bounds measured since the last call, into the endpoints' estimates (routing thread).
     * A read that overlapped a write is dropped and retried at the next call: nothing is applied from it.
     */
    private void applyTtft(CompletionCounts c, EndpointState[] byId, int limit, long nowNs) {
        long v1 = (long) TTFT_VERSION.getAcquire(this);
        if ((v1 & 1) != 0 || v1 == ttftVersionApplied) {
            return;
        }
        int n = Math.min(limit, c.ttftCount.length);
        for (int id = 0; id < n; id++) {
            scratchTtft[4 * id] = (long) LONGS.getOpaque(c.ttftSumNs, id);
            scratchTtft[4 * id + 1] = (long) LONGS.getOpaque(c.ttftCount, id);
            scratchTtft[4 * id + 2] = (long) LONGS.getOpaque(c.boundSumNs, id);
            scratchTtft[4 * id + 3] = (long) LONGS.getOpaque(c.boundCount, id);
        }
        VarHandle.loadLoadFence();
        if ((long) TTFT_VERSION.getOpaque(this) != v1) {
            return;
        }
        ttftVersionApplied = v1;
        for (int id = 0; id < n; id++) {
            TtftEstimate t = byId[id] == null ? null : byId[id].ttft();
            long sum = scratchTtft[4 * id];
            long count = scratchTtft[4 * id + 1];
            if (count != appliedTtftCount[id] && t != null) {
                t.onMeasured(sum - appliedTtftSumNs[id], count - appliedTtftCount[id], nowNs);
            }
            appliedTtftSumNs[id] = sum;
            appliedTtftCount[id] = count;
            long bSum = scratchTtft[4 * id + 2];
            long bCount = scratchTtft[4 * id + 3];
            if (bCount != appliedBoundCount[id] && t != null) {
                t.onLowerBound(bSum - appliedBoundSumNs[id], bCount - appliedBoundCount[id], nowNs);
            }
            appliedBoundSumNs[id] = bSum;
            appliedBoundCount[id] = bCount;
        }
    }

    // ---- the port's executor (the event loop) -----------------------------------------------------------------

    /** Whether the calling thread is this port's event loop (io mode: the loop running the stage). */
    boolean onCurrentLoop() {
        return eventLoop != null && eventLoop.inEventLoop();
    }

    /**
     * io mode, on this port's loop while it runs the stage: publishes the queued decisions and delivers them now,
     * without a drain task (the loop would only run that task later in the same turn).
     */
    void deliverNow() {
        dirty = false;
        PUBLISHED_TAIL.setRelease(this, routerTail);
        drain();
    }

    /** Delivers every published decision (the drain task; runs on the port's executor). */
    @Override
    public void run() {
        drainScheduled.set(false);
        drain();
    }

    private void drain() {
        drains++;
        long tail = publishedTail;
        while (head < tail) {
            int i = (int) head & mask;
            RouteCallback callback = callbacks[i];
            Decision d = slots[i];
            callbacks[i] = null;
            // Advanced before the callback: it may publish again (a retry, SGLang's decode), and in io mode that
            // publish's decision may be delivered by a drain nested in this one, which must start after this slot.
            // The slot itself is refilled only after a full inbox of newer decisions, and a callback reads its
            // decision before it publishes again (RouteCallback's contract).
            head++;
            DRAINED_HEAD.setRelease(this, head);
            try {
                callback.onDecision(d);
            } catch (RuntimeException | Error e) {
                // One exchange's bug must not strand the decisions behind it in this batch.
                stage.countDeliveryError(e);
            }
            // Not cleared after the callback: a nested publish may have refilled it. It keeps no request alive (the
            // callback is dropped above), only an endpoint, a rule and a reason until its next use.
        }
    }

    /** Decisions the routing thread made visible to the loop so far (tests). */
    long published() {
        return publishedTail;
    }

    /** Drain tasks that ran (tests). */
    long drains() {
        return drains;
    }

    /** Decisions delivered by this port so far (tests and metrics). */
    public long delivered() {
        return drainedHead;
    }
}
