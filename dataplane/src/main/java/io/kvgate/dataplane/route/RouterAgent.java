package io.kvgate.dataplane.route;

import com.lmax.disruptor.EventPoller;
import com.lmax.disruptor.RingBuffer;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.metrics.StageTimers;
import java.util.Arrays;
import java.util.HashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.agrona.concurrent.Agent;

/**
 * The routing stage's single writer as an Agrona {@link Agent}: one duty cycle ({@link #doWork}) applies what arrived
 * out of band (a swapped-in table, probe verdicts, every port's completion counts, fresh engine readings, admission
 * control's queues), decides every request in the ring with the pure {@link Decider}, and hands the decisions back to
 * their ports. It owns endpoint load, health, breakers and every policy's state, and keeps them across swaps.
 *
 * <p>Who runs it is {@link RoutingStage}'s wiring, never this class's concern: an {@code AgentRunner} on its own
 * thread ({@code router.thread: dedicated}, idle strategy from {@code router.wait_strategy}), or an
 * {@code AgentInvoker} the gateway's one event loop invokes ({@code router.thread: io}, {@link EventLoopRunner}).
 * Either way there is one runner at a time, and everything below runs on it ("the runner").
 *
 * <p>Housekeeping runs when it is due: a request is in the ring (before its batch's first decision, as the Disruptor's
 * batch start did), a swap or probe verdict is pending, the runner asked for it ({@link #housekeepNextCycle}), or one
 * duty period passed on {@code dutyClock} since the last time. Otherwise {@link #doWork} touches nothing and returns
 * 0, which is what lets an idle strategy sleep.
 *
 * <p>Failures: a decision that throws is counted, its request answered with no endpoint (the exchange answers 503),
 * and routing goes on; the log line is rate limited. {@link #onClose} decides what is still in the ring and answers
 * requests waiting for admission ({@link #CLOSED}), so no published request is left without an answer.
 */
final class RouterAgent implements Agent {
    /** Longest the routing thread sleeps without work before running its housekeeping. */
    static final long DUTY_PERIOD_MS = 10;
    static final long DUTY_PERIOD_NS = DUTY_PERIOD_MS * 1_000_000L;
    /**
     * How far ahead of a waiting request's deadline admission control sheds it: the longest expected gap between two
     * routing turns. One duty period plus as much again for a timed sleep that overslept on a busy machine (measured:
     * with exactly one period, a few requests per thousand left the queue up to 2.4 ms late at load average 3-8).
     */
    static final long ADMISSION_SLACK_NS = 2 * DUTY_PERIOD_NS;
    /**
     * io mode: the loop's duty task period while no request waits for admission. Measured on an idle gateway
     * (perf/idle-cost.sh): at the 10 ms period the I/O thread woke 100 times a second for it.
     */
    static final long IDLE_DUTY_PERIOD_MS = 100;
    static final long IDLE_DUTY_PERIOD_NS = IDLE_DUTY_PERIOD_MS * 1_000_000L;
    static final String RULE_REMOVED = "the request's rule was removed by a configuration change";
    static final String ROUTING_ERROR = "internal routing error";
    static final String CLOSED = "the gateway is shutting down";
    /** The dedicated runner's thread name. */
    static final String ROLE_NAME = "kvgate-router";

    private final RingBuffer<RouteEvent> ring;
    private final EventPoller<RouteEvent> poller;
    private final EventPoller.Handler<RouteEvent> pollHandler = new PollHandler();
    private final NanoClock clock;
    /** Times the duty period (the runner's clock: real time in the gateway, also when decisions use a test clock). */
    private final NanoClock dutyClock;
    private final StageTimers stages;
    /** io mode: decisions for the runner's own loop are delivered in the cycle, not by a drain task. */
    private final boolean deliversInline;
    private final Supplier<RouterPort[]> ports;

    // Written by other threads, consumed by the runner.
    private final AtomicReference<RouteTable> pendingSwap = new AtomicReference<>();
    private volatile boolean probesPending;

    // Written by the runner, read by any thread.
    /** The applied table (the constructor, then the runner). */
    private volatile RouteTable table;
    /** The ring sequence of the last operator drain command applied (the operator waits on it). */
    private volatile long drainAppliedSeq = -1;
    /** The admission controls of the applied table, for metrics readers. */
    private volatile Admission[] admissionView = new Admission[0];
    private final AtomicLong routed = new AtomicLong();
    private final AtomicLong unroutable = new AtomicLong();
    private final AtomicLong handlerErrors = new AtomicLong();
    private final AtomicLong batches = new AtomicLong();

    // The runner only.
    private final Decider decider = new Decider();
    /** Each rule's fleet TTFT onto its endpoints' estimates, at every housekeeping (routing thread). */
    private final TtftFleets ttftFleets = new TtftFleets();
    private EndpointState[] endpointsById = new EndpointState[64];
    private RouterPort[] dirtyPorts = new RouterPort[8];
    private int dirtyCount;
    /** Admission control by rule name: survives swaps like the rules' other state. */
    private HashMap<String, Admission> admissions = new HashMap<>();
    private final AdmissionQueue.ShedSink<RouteEvent> shedSink = this::shedWaiting;
    private long lastHousekeepingNs;
    private boolean housekeepingAsked;
    /** A cycle is running: a decision's delivery must not start another one inside it. */
    private boolean cycling;
    private boolean closed;
    /** Events the current poll handled. */
    private int polled;

    /**
     * @param ring the stage's ring (nobody waits on it: this agent polls it)
     * @param deliversInline io mode: the decisions of the runner's own loop are delivered inside the cycle
     * @param ports the stage's ports, read at each cycle (ports are added by I/O threads)
     */
    RouterAgent(RingBuffer<RouteEvent> ring, RouteTable initial, NanoClock clock, NanoClock dutyClock, StageTimers stages,
                boolean deliversInline, Supplier<RouterPort[]> ports) {
        this.ring = ring;
        this.poller = ring.newPoller();
        ring.addGatingSequences(poller.getSequence());
        this.clock = clock;
        this.dutyClock = dutyClock;
        this.stages = stages;
        this.deliversInline = deliversInline;
        this.ports = ports;
        initial.install();
        index(initial);
        this.table = initial;
        attachAdmission(initial, clock.nanoTime()); // before the runner starts: nothing waits yet
        this.lastHousekeepingNs = dutyClock.nanoTime();
    }

    @Override
    public String roleName() {
        return ROLE_NAME;
    }

    // ---- any thread ---------------------------------------------------------------------------------------------

    RouteTable table() {
        return table;
    }

    /** Hands {@code next} to the runner's next housekeeping (a later offer replaces one not yet applied). */
    void offerSwap(RouteTable next) {
        pendingSwap.set(next);
    }

    /** Whether {@code next} is offered and not applied yet. */
    boolean swapPending(RouteTable next) {
        return pendingSwap.get() == next;
    }

    /** A probe verdict was reported on an endpoint: applied at the next housekeeping. */
    void probeReported() {
        probesPending = true;
    }

    long drainAppliedSeq() {
        return drainAppliedSeq;
    }

    Admission[] admissionView() {
        return admissionView;
    }

    long routed() {
        return routed.get();
    }

    long unroutable() {
        return unroutable.get();
    }

    long handlerErrors() {
        return handlerErrors.get();
    }

    long batches() {
        return batches.get();
    }

    // ---- the runner ---------------------------------------------------------------------------------------------

    /** Whether a cycle is running on the calling runner (a delivery inside it is calling back). */
    boolean inCycle() {
        return cycling;
    }

    /** The next cycle runs housekeeping even if nothing else makes it due (io mode: every loop-driven cycle). */
    void housekeepNextCycle() {
        housekeepingAsked = true;
    }

    /** How long an idle runner may sleep before housekeeping is due (never negative). */
    long nanosUntilHousekeeping() {
        return Math.max(0, lastHousekeepingNs + DUTY_PERIOD_NS - dutyClock.nanoTime());
    }

    /** Whether a request waits in an admission queue (io mode: the duty task's period is the short one). */
    boolean anyWaiting() {
        for (Admission a : admissionView) {
            if (a.waiting() > 0) {
                return true;
            }
        }
        return false;
    }

    /**
     * One duty cycle: housekeeping when due, every request published so far, then the hand-back. Returns the work
     * done: the requests and commands taken from the ring, plus one when housekeeping ran; 0 when idle, closed, or
     * entered again from a delivery inside a cycle. Never throws. Bounded: a poll takes at most what the ring holds
     * when it starts.
     */
    @Override
    public int doWork() {
        if (cycling || closed) {
            return 0;
        }
        cycling = true;
        try {
            int work = 0;
            if (housekeepingDue()) {
                housekeeping();
                work = 1;
            }
            work += pollRing();
            flushPorts();
            return work;
        } finally {
            cycling = false;
        }
    }

    /**
     * io mode, on the runner's loop right after a publish: decides what the ring holds and delivers this loop's
     * decisions now, so a request's upstream write is issued while the loop still reads the rest of its turn. Only
     * the completions are applied first; the rest of the housekeeping runs in the end-of-turn cycle. Returns the
     * requests decided (0 inside a cycle: the end-of-turn cycle decides those).
     */
    int decideAtPublish() {
        if (cycling || closed) {
            return 0;
        }
        cycling = true;
        try {
            try {
                applyCompletions(clock.nanoTime());
            } catch (RuntimeException | Error ex) {
                countHandlerError(ex);
            }
            int n = pollRing();
            flushPorts();
            return n;
        } finally {
            cycling = false;
        }
    }

    /**
     * Releases what the agent holds: decides what is still in the ring (as the Disruptor's shutdown waited for its
     * backlog), answers every request waiting for admission with no endpoint ({@link #CLOSED}: 503), delivers, and
     * runs no cycle after. Runs on the runner (AgentRunner: its thread as it exits; AgentInvoker: the loop).
     */
    @Override
    public void onClose() {
        if (closed) {
            return;
        }
        cycling = true;
        try {
            pollRing();
            for (Admission a : admissionView) {
                a.drainTo(w -> {
                    unroutable.lazySet(unroutable.get() + 1);
                    post(w.port, w.callback, null, null, CLOSED);
                    w.clear();
                });
            }
            flushPorts();
        } catch (RuntimeException | Error ex) {
            countHandlerError(ex);
        } finally {
            cycling = false;
            closed = true;
        }
    }

    private boolean housekeepingDue() {
        return housekeepingAsked || probesPending || pendingSwap.get() != null
            || ring.getCursor() > poller.getSequence().get() // a batch starts (claimed at least; cheap either way)
            || dutyClock.nanoTime() - lastHousekeepingNs >= DUTY_PERIOD_NS;
    }

    private int pollRing() {
        polled = 0;
        try {
            poller.poll(pollHandler);
        } catch (Exception | Error ex) {
            countHandlerError(ex); // not expected: the handler catches what a decision throws
        }
        return polled;
    }

    private final class PollHandler implements EventPoller.Handler<RouteEvent> {
        @Override
        public boolean onEvent(RouteEvent e, long sequence, boolean endOfBatch) {
            polled++;
            try {
                if (e.type == RouteEvent.ROUTE || e.type == RouteEvent.ROUTE_PAIR) {
                    route(e);
                } else if (e.type == RouteEvent.DRAIN) {
                    applyDrain(e, sequence);
                }
                e.clear();
            } catch (RuntimeException | Error ex) {
                onDecisionFailure(ex, e);
            }
            return true;
        }
    }

    /** Everything that reaches the router out of band, applied before the batch's first decision. Never throws. */
    private void housekeeping() {
        housekeepingAsked = false;
        lastHousekeepingNs = dutyClock.nanoTime();
        try {
            batches.lazySet(batches.get() + 1);
            RouteTable next = pendingSwap.get();
            if (next != null) {
                applySwap(next);
                pendingSwap.compareAndSet(next, null);
            }
            if (probesPending) {
                probesPending = false;
                for (EndpointState ep : table.endpointArray()) {
                    ep.breaker().applyProbeReport();
                }
            }
            long now = clock.nanoTime();
            applyCompletions(now);
            long staleNs = table.config().load().staleMs() * 1_000_000L;
            boolean peerDecay = table.config().load().decaysPeers();
            for (EndpointState ep : table.endpointArray()) {
                ep.loadEstimate().refresh(now, staleNs, peerDecay); // the scraper's newest reading, if fresh
            }
            ttftFleets.apply(table, now);
            admitWaiting(now);
        } catch (RuntimeException | Error ex) {
            countHandlerError(ex); // the batch's requests are still decided
        }
    }

    /** Every port's completion counts since the last call, into endpoint load and breakers. */
    private void applyCompletions(long now) {
        GatewayConfig.Health h = table.config().health();
        long openNs = h.breakerOpenMs() * 1_000_000L;
        for (RouterPort p : ports.get()) {
            p.applyCompletions(endpointsById, h.breakerFailureThreshold(), openNs, now);
        }
    }

    private void applySwap(RouteTable next) {
        RouteTable prev = table;
        next.install(); // endpoint configurations change here, between two decisions
        for (Rule r : next.rules()) {
            Rule old = prev.ruleByName(r.name());
            if (old == null || old == r) {
                continue;
            }
            r.policy().carryOver(old.policy());
            if (r.decodePolicy() != r.policy()) {
                r.decodePolicy().carryOver(old.decodePolicy());
            }
            r.stats().carryFrom(old.stats());
        }
        index(next);
        table = next;
        attachAdmission(next, clock.nanoTime());
    }

    /** A drain command came up in the ring. */
    private void applyDrain(RouteEvent e, long sequence) {
        e.drainTarget.drained(e.drainOn);
        drainAppliedSeq = sequence;
    }

    // ---- admission control --------------------------------------------------------------------------------------

    /**
     * Gives each rule of {@code t} its admission control: the same object as before for a rule name that keeps one
     * (waiting requests and metrics carry over, new bounds apply), a new one for a rule that gains it. Requests
     * waiting for a rule that lost its admission control are routed now (no threshold holds them any more); those of
     * a removed rule are answered "rule removed".
     */
    private void attachAdmission(RouteTable t, long now) {
        HashMap<String, Admission> previous = admissions;
        HashMap<String, Admission> next = new HashMap<>();
        for (Rule r : t.rules()) {
            var cfg = r.config().admission();
            Admission a = previous.remove(r.name());
            if (cfg.enabled()) {
                if (a == null) {
                    a = new Admission(r.name(), cfg);
                    // Saturation (admission.max_waiting, max_kv_usage) is judged on the load scraper's fresh
                    // readings; an endpoint without one can only be saturated by admission.max_outstanding.
                    a.engineLoad = EngineLoad.SCRAPED;
                } else {
                    a.reconfigure(cfg, now, shedSink);
                }
                r.admission = a;
                next.put(r.name(), a);
            } else {
                r.admission = null;
                if (a != null) {
                    a.drainTo(w -> {
                        decide(r, w, now);
                        w.clear();
                    });
                }
            }
        }
        for (Admission gone : previous.values()) {
            gone.drainTo(w -> {
                unroutable.lazySet(unroutable.get() + 1);
                post(w.port, w.callback, null, null, RULE_REMOVED);
                w.clear();
            });
        }
        admissions = next;
        admissionView = next.values().toArray(Admission[]::new);
    }

    /**
     * Housekeeping: sheds waiting requests that could pass their deadline before the next turn, then dispatches
     * waiting requests while their rule has a non-saturated endpoint (the completions just applied freed some).
     */
    private void admitWaiting(long now) {
        Admission[] all = admissionView;
        for (Admission a : all) {
            if (a.hasWaiting()) {
                a.expire(now, ADMISSION_SLACK_NS, shedSink);
                Rule r = table.ruleByName(a.ruleName());
                if (r != null) {
                    dispatchWaiting(r, a, now);
                }
            }
        }
    }

    /** Dispatches waiting requests in queue order while the next one has a non-saturated endpoint. */
    private void dispatchWaiting(Rule rule, Admission a, long now) {
        RouteEvent w;
        while ((w = a.peek()) != null) {
            if (a.mustWait(rule.candidates(w.role), w, now)) {
                return;
            }
            long waitedNs = a.take(now);
            if (!w.dryRun) {
                w.waitedForAdmission = true; // decide hands the wait to the request with its decision
                w.admissionQueuedAtNs = now - waitedNs;
                w.admissionAdmittedAtNs = now;
            }
            decide(rule, w, now);
            a.recycle(w);
        }
    }

    /** Admission control gave up on a request (queue full or deadline): 429 on its loop. */
    private void shedWaiting(RouteEvent w, PriorityClass cls, AdmissionQueue.ShedReason reason, long waitedNs) {
        Rule rule = table.ruleByName(w.rule.name());
        Admission a = rule == null ? null : rule.admission;
        if (a != null) {
            a.countShed(cls, waitedNs);
            postShed(w.port, w.callback, rule, Admission.shedMessage(rule.name(), cls, reason, a.config()));
            a.recycle(w); // always the queue's copy, never a ring slot
        } else {
            unroutable.lazySet(unroutable.get() + 1);
            post(w.port, w.callback, null, null, RULE_REMOVED);
            w.clear();
        }
    }

    // ---- deciding -----------------------------------------------------------------------------------------------

    /** Remembers every endpoint by id, so completions for endpoints a swap removed still return their load. */
    private void index(RouteTable t) {
        for (EndpointState ep : t.endpointArray()) {
            if (ep.id() >= endpointsById.length) {
                endpointsById = Arrays.copyOf(endpointsById, Math.max(ep.id() + 1, endpointsById.length * 2));
            }
            endpointsById[ep.id()] = ep;
        }
    }

    private void route(RouteEvent e) {
        Rule rule = e.rule;
        if (rule.table != table) {
            rule = table.ruleByName(rule.name());
            if (rule == null) {
                unroutable.lazySet(unroutable.get() + 1);
                post(e.port, e.callback, null, null, RULE_REMOVED);
                return;
            }
        }
        long now = clock.nanoTime();
        Admission a = e.needsAdmission ? rule.admission : null; // a later P/D leg's request was admitted already
        if (a != null && !e.dryRun && (a.hasWaiting() || a.mustWait(rule.candidates(e.role), e, now))) {
            // Behind those already waiting (or first in line); the highest-priority waiter goes if there is room.
            a.enqueue(e, now, shedSink);
            dispatchWaiting(rule, a, now);
            return;
        }
        decide(rule, e, now);
    }

    /**
     * Decides {@code e} under {@code rule} now (its admission, if any, already let it through) with the
     * {@link Decider}, straight into the request's decision slot on its port, and queues the decision.
     */
    private void decide(Rule rule, RouteEvent e, long now) {
        Decision d = e.port.next(e.callback);
        int counted = decider.decide(rule, e, now, d);
        stages.recordNs(StageTimers.Stage.DECIDE, clock.nanoTime() - now);
        if (d.endpoint == null) {
            unroutable.lazySet(unroutable.get() + 1);
        } else if (counted > 0) {
            routed.lazySet(routed.get() + counted); // a pair counts two endpoints, as two decisions would
        }
        e.port.commit();
        markDirty(e.port);
    }

    private void post(RouterPort port, RouteCallback callback, EndpointState ep, Rule rule, String explanation) {
        port.post(callback, ep, rule, explanation);
        markDirty(port);
    }

    private void postShed(RouterPort port, RouteCallback callback, Rule rule, String message) {
        port.postShed(callback, rule, message);
        markDirty(port);
    }

    private void markDirty(RouterPort port) {
        if (!port.dirty) {
            port.dirty = true;
            if (dirtyCount == dirtyPorts.length) {
                dirtyPorts = Arrays.copyOf(dirtyPorts, dirtyCount * 2);
            }
            dirtyPorts[dirtyCount++] = port;
        }
    }

    /** Hands the batch's decisions back: one drain task per port; in io mode this loop's own ones delivered now. */
    private void flushPorts() {
        int n = dirtyCount;
        if (!deliversInline) {
            for (int i = 0; i < n; i++) {
                dirtyPorts[i].flush();
                dirtyPorts[i] = null;
            }
            dirtyCount = 0;
            return;
        }
        // io mode: other executors' drain tasks first, then this loop's own decisions, delivered here and now.
        for (int i = 0; i < n; i++) {
            RouterPort p = dirtyPorts[i];
            if (!p.onCurrentLoop()) {
                p.flush();
                dirtyPorts[i] = null;
            }
        }
        dirtyCount = 0;
        for (int i = 0; i < n; i++) {
            RouterPort p = dirtyPorts[i];
            if (p != null) {
                dirtyPorts[i] = null;
                p.deliverNow();
            }
        }
    }

    // ---- failures -----------------------------------------------------------------------------------------------

    /** A decision threw: counted, the request answered with no endpoint (503), the slot cleared. */
    private void onDecisionFailure(Throwable ex, RouteEvent e) {
        countHandlerError(ex);
        if ((e.type == RouteEvent.ROUTE || e.type == RouteEvent.ROUTE_PAIR) && e.callback != null && e.port != null) {
            try {
                post(e.port, e.callback, null, null, ROUTING_ERROR);
            } catch (RuntimeException again) {
                countHandlerError(again);
            }
        }
        e.clear();
    }

    /** Counts an error of the stage (also the runner's error handler); logs the 1st, 2nd, 4th, 8th... */
    void countHandlerError(Throwable ex) {
        long n = handlerErrors.incrementAndGet();
        if (Long.bitCount(n) == 1) { // a policy bug firing on every request must not flood the log
            Log.error("routing stage error (" + n + " so far; the request is answered 503): " + ex);
        }
    }
}
