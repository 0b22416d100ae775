package io.kvgate.dataplane.route;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.metrics.HistogramFamily;
import io.kvgate.dataplane.metrics.LatencyHistogram;
import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Supplier;

/**
 * Admission control of one rule (configuration {@code admission.*}): which endpoints are saturated, and the bounded
 * {@link AdmissionQueue} requests wait in while every eligible endpoint is. Owned by the routing stage's thread (the
 * single writer of load state, so saturation and dispatch are decided against the same numbers the policies see);
 * survives configuration swaps by rule name ({@link RoutingStage}); metrics are read by any thread.
 *
 * <p><b>Saturated</b>: this gateway has {@code max_outstanding} requests in flight to the endpoint, or the engine
 * reports more than {@code max_waiting} requests in its own queue, or KV-cache usage above {@code max_kv_usage}
 * ({@link EngineLoad}; an unknown or stale reading never saturates). For standard and batch requests the two count
 * thresholds are {@code interactive_reserve} lower. A saturated endpoint takes no new request:
 * policies skip it like an unavailable one ({@link RoutingPolicy#eligible}), so a request waits only when every
 * eligible endpoint is saturated, and a request whose endpoints are all down is still answered 503 at once.
 *
 * <p>Waiting requests are copies of their ring slots ({@link RouteEvent}), pooled here so the steady overload state
 * allocates only the queue's nodes.
 */
public final class Admission {
    private final String ruleName;
    private RuleConfig.AdmissionConfig config;
    private final AdmissionQueue<RouteEvent> queue;
    private final ArrayDeque<RouteEvent> spare = new ArrayDeque<>();
    /** The engine readings saturation is judged on (routing stage sets it). */
    EngineLoad engineLoad = EngineLoad.NONE;

    // Metrics: written by the routing thread, read by scrapes.
    private final AtomicLongArray depth = new AtomicLongArray(PriorityClass.count());
    private final AtomicLongArray shed = new AtomicLongArray(PriorityClass.count());
    private final LatencyHistogram[] waits = new LatencyHistogram[PriorityClass.count()];
    /** The longest wait seen, ns (histogram buckets are too coarse to prove the max_wait_ms bound). */
    private final AtomicLongArray longestWaitNs = new AtomicLongArray(PriorityClass.count());
    /** Requests that left the queue after their deadline: the routing thread's turn came late (a stalled machine). */
    private final AtomicLongArray overdue = new AtomicLongArray(PriorityClass.count());

    Admission(String ruleName, RuleConfig.AdmissionConfig config) {
        this.ruleName = ruleName;
        this.config = config;
        this.queue = new AdmissionQueue<>(config.maxQueue(), config.maxWaitMs() * 1_000_000L);
        for (int i = 0; i < waits.length; i++) {
            waits[i] = new LatencyHistogram();
        }
    }

    public String ruleName() {
        return ruleName;
    }

    RuleConfig.AdmissionConfig config() {
        return config;
    }

    /** New thresholds and bounds (same rule name, changed configuration); excess waiting requests go to {@code sink}. */
    void reconfigure(RuleConfig.AdmissionConfig next, long nowNs, AdmissionQueue.ShedSink<RouteEvent> sink) {
        this.config = next;
        queue.bounds(next.maxQueue(), next.maxWaitMs() * 1_000_000L);
        queue.shrink(nowNs, sink);
        syncDepth();
    }

    /**
     * Whether {@code ep} may take another request of {@code cls}: not saturated for it. Below interactive, the
     * count thresholds are lowered by {@code admission.interactive_reserve}: that headroom is kept for interactive
     * requests, so one arriving at a busy fleet finds a slot instead of waiting for the next completion.
     */
    boolean admits(EndpointState ep, PriorityClass cls) {
        RuleConfig.AdmissionConfig c = config;
        int reserve = cls == PriorityClass.INTERACTIVE ? 0 : c.interactiveReserve();
        if (c.maxOutstanding() >= 0 && ep.outstanding() >= c.maxOutstanding() - reserve) {
            return false;
        }
        if (c.maxWaiting() >= 0) {
            int w = engineLoad.waiting(ep);
            if (w >= 0 && w > c.maxWaiting() - reserve) {
                return false;
            }
        }
        if (c.maxKvUsage() >= 0) {
            double u = engineLoad.kvUsage(ep);
            if (u > c.maxKvUsage()) { // NaN (unknown) compares false
                return false;
            }
        }
        return true;
    }

    /**
     * Whether {@code request} must wait: some endpoint would take it (available, not tried) but every such endpoint is
     * saturated. False when none is available at all (that is a 503, not a wait) or when one has room.
     */
    boolean mustWait(EndpointState[] candidates, RouteEvent request, long nowNs) {
        boolean anyAvailable = false;
        for (EndpointState ep : candidates) {
            if (ep.available(nowNs) && !request.alreadyTried(ep) && request.serves(ep)) {
                if (admits(ep, request.priority)) {
                    return false;
                }
                anyAvailable = true;
            }
        }
        return anyAvailable;
    }

    boolean hasWaiting() {
        return !queue.isEmpty();
    }

    /** Requests waiting now (routing thread; other threads read {@link #depth}). */
    public int waiting() {
        return queue.size();
    }

    /** Copies {@code e} (a ring slot about to be reused) into the queue; false when it was shed instead. */
    boolean enqueue(RouteEvent e, long nowNs, AdmissionQueue.ShedSink<RouteEvent> sink) {
        RouteEvent copy = spare.poll();
        if (copy == null) {
            copy = new RouteEvent();
        }
        copy.copyFrom(e);
        boolean queued = queue.offer(copy, e.priority, e.tenant, nowNs, sink);
        syncDepth();
        return queued;
    }

    /** The request that leaves next, or null. */
    RouteEvent peek() {
        return queue.peek();
    }

    /**
     * Removes {@link #peek()}'s request for dispatch, recording its wait, which it returns. The caller recycles it
     * after deciding.
     */
    long take(long nowNs) {
        PriorityClass cls = queue.peekClass();
        long waitedNs = queue.take(nowNs);
        recordWait(cls, waitedNs);
        syncDepth();
        return waitedNs;
    }

    /** Sheds every request that would pass {@code max_wait_ms} before the caller's next turn ({@code slackNs}). */
    void expire(long nowNs, long slackNs, AdmissionQueue.ShedSink<RouteEvent> sink) {
        if (queue.expire(nowNs, slackNs, sink) > 0) {
            syncDepth();
        }
    }

    /** Hands every waiting request to {@code out} in dispatch order (the rule lost its admission control or went away). */
    void drainTo(java.util.function.Consumer<RouteEvent> out) {
        queue.drainTo(out);
        syncDepth();
    }

    /** Counts a shed request of {@code cls}; {@code waitedNs} < 0 for one that never entered the queue. */
    void countShed(PriorityClass cls, long waitedNs) {
        shed.lazySet(cls.ordinal(), shed.get(cls.ordinal()) + 1);
        if (waitedNs >= 0) {
            recordWait(cls, waitedNs);
        }
    }

    private void recordWait(PriorityClass cls, long waitedNs) {
        int i = cls.ordinal();
        waits[i].recordNs(waitedNs);
        if (waitedNs > longestWaitNs.get(i)) {
            longestWaitNs.lazySet(i, waitedNs);
        }
        if (waitedNs > config.maxWaitMs() * 1_000_000L) {
            overdue.lazySet(i, overdue.get(i) + 1);
        }
    }

    /** The longest time a request of {@code cls} spent in the queue so far, ns. */
    public long longestWaitNs(PriorityClass cls) {
        return longestWaitNs.get(cls.ordinal());
    }

    public long overdueCount(PriorityClass cls) {
        return overdue.get(cls.ordinal());
    }

    /** A queue copy is done with: cleared and kept for the next waiting request. */
    void recycle(RouteEvent copy) {
        copy.clear();
        if (spare.size() < 1024) {
            spare.push(copy);
        }
    }

    private void syncDepth() {
        for (int i = 0; i < depth.length(); i++) {
            depth.lazySet(i, queue.size(PriorityClass.of(i)));
        }
    }

    /** {@code Retry-After} of a shed request: the queue's wait bound, whole seconds, at least 1. */
    public static long retryAfterSeconds(RuleConfig.AdmissionConfig c) {
        return Math.max(1, (c.maxWaitMs() + 999) / 1000);
    }

    /** The client-facing message of a shed request. */
    static String shedMessage(String rule, PriorityClass cls, AdmissionQueue.ShedReason reason, RuleConfig.AdmissionConfig c) {
        return switch (reason) {
            case DEADLINE -> "Every endpoint of rule '" + rule + "' stayed saturated for admission.max_wait_ms (" + c.maxWaitMs()
                + " ms) while this " + cls.label + " request waited; retry later.";
            case QUEUE_FULL -> "Every endpoint of rule '" + rule + "' is saturated and its admission queue is full ("
                + c.maxQueue() + " waiting, lower classes shed first); this " + cls.label + " request was shed; retry later.";
        };
    }

    public long depth(PriorityClass cls) {
        return depth.get(cls.ordinal());
    }

    public long shedCount(PriorityClass cls) {
        return shed.get(cls.ordinal());
    }

    /**
     * Registers the admission families (labels: rule and class, both from configuration), read on scrape from the
     * admissions {@code all} supplies then (the current table's).
     */
    static void register(PrometheusRegistry registry, Supplier<Admission[]> all) {
        GaugeWithCallback.builder().name("kvgate_admission_queue_depth")
            .help("Requests waiting for a non-saturated endpoint, by rule and priority class.").labelNames("rule", "class")
            .callback(cb -> each(all, (a, c) -> cb.call(a.depth(c), a.ruleName, c.label))).register(registry);
        CounterWithCallback.builder().name("kvgate_admission_shed_total").help("Requests answered 429 by admission control"
                + " (queue full or waited max_wait_ms), by rule and priority class.").labelNames("rule", "class")
            .callback(cb -> each(all, (a, c) -> cb.call(a.shedCount(c), a.ruleName, c.label))).register(registry);
        GaugeWithCallback.builder().name("kvgate_admission_wait_max_seconds").help("The longest time a request spent in"
                + " the admission queue since start, by rule and priority class.").labelNames("rule", "class")
            .callback(cb -> each(all, (a, c) -> cb.call(a.longestWaitNs(c) / 1e9, a.ruleName, c.label))).register(registry);
        CounterWithCallback.builder().name("kvgate_admission_overdue_total").help("Requests that left the admission queue"
                + " after admission.max_wait_ms (the routing thread's turn came late), by rule and priority class.")
            .labelNames("rule", "class")
            .callback(cb -> each(all, (a, c) -> cb.call(a.overdueCount(c), a.ruleName, c.label))).register(registry);
        HistogramFamily.register(registry, "kvgate_admission_wait_seconds", "Time requests spent in the admission queue"
                + " (dispatched and shed alike), by rule and priority class.", List.of("rule", "class"),
            sink -> each(all, (a, c) -> sink.add(a.waits[c.ordinal()], a.ruleName, c.label)));
    }

    private static void each(Supplier<Admission[]> all, java.util.function.BiConsumer<Admission, PriorityClass> f) {
        for (Admission a : all.get()) {
            for (PriorityClass c : PriorityClass.values()) {
                f.accept(a, c);
            }
        }
    }
}
