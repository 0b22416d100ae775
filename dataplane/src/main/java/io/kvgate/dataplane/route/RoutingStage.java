package io.kvgate.dataplane.route;

import io.kvgate.control.log.Log;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.EventHandler;
import com.lmax.disruptor.EventPoller;
import com.lmax.disruptor.EventTranslatorTwoArg;
import com.lmax.disruptor.ExceptionHandler;
import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.WaitStrategy;
import com.lmax.disruptor.YieldingWaitStrategy;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.Arrays;
import java.util.HashMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * The single-writer routing stage from the design card. One thread owns endpoint load, health, breakers and every
 * policy's state (session pins, rotations, speculative overlays, counters), and keeps them across configuration swaps.
 *
 * <p>Who that thread is ({@code router.thread}), as Agrona lets an agent run on an {@code AgentRunner} thread or be
 * invoked by a thread the application already has ({@code AgentInvoker}):
 * <ul>
 *   <li><b>dedicated</b>: a Disruptor thread of its own, {@code kvgate-router}, serving every event loop;</li>
 *   <li><b>io</b> (the default when the gateway runs one I/O thread): that event loop is the stage's only runner. It
 *       decides each of its requests as it is published ({@link #decideAtOnce}: the completions so far, the request
 *       through an {@link EventPoller}, the decision delivered before the publish returns), so an upstream write
 *       goes out while the loop still reads the rest of its turn; at the end of a turn that published it runs one
 *       full duty cycle ({@link #runDutyCycle}: housekeeping, anything left in the ring, hand-back), without a drain
 *       task or a wake-up. A task scheduled on the loop runs the same cycle, so housekeeping happens without
 *       requests: every {@value #DUTY_PERIOD_MS} ms while a request waits for admission (its queue is served and shed
 *       on time), every {@value #IDLE_DUTY_PERIOD_MS} ms otherwise, when the cycle only brings state read by metrics
 *       and admin up to date (completions, probe verdicts; every request's batch applies them first anyway).
 *       Publishers on other threads (admin explain, tests) leave their events in the ring and ask the loop for a
 *       cycle; the stage never runs on their thread.</li>
 * </ul>
 * Everything below holds in both modes: one runner at a time, the same decisions, errors, counters and metrics.
 *
 * <p>Data flow, all through preallocated structures and without capturing lambdas:
 * <ol>
 *   <li>an event loop publishes a request through its {@link RouterPort}: the request's routing inputs are copied
 *       into a preallocated ring slot ({@link RouteEvent}) on the I/O thread; the router is woken once per loop
 *       turn;</li>
 *   <li>at the start of each batch the router applies what arrived out of band: a swapped-in table, probe verdicts,
 *       and the completion counts of every port;</li>
 *   <li>it decides each request and posts the decision to the request's port; at the end of the batch each port
 *       with new decisions gets one drain task on its loop, which invokes {@link RouteRequest#onRouted} there.</li>
 * </ol>
 * With the default {@code blocking} wait strategy the router sleeps between batches for at most the duty period
 * ({@value #DUTY_PERIOD_MS} ms), after which it runs the same housekeeping without any request.
 *
 * <p>Admission control ({@link Admission}, rules with {@code admission.*}): a request whose eligible endpoints are all
 * saturated waits in its rule's queue instead of being answered 503. Waiting requests are dispatched by this thread
 * when capacity frees, which it learns from the completion counts it applies at the start of every batch and on the
 * idle duty cycle: a completion does not wake the router (that would be a futex call per completion, on the hottest
 * path), so a freed slot is used at the next batch, or within one duty period when no request arrives. Under the
 * overload that fills the queue requests arrive continuously, so the next batch comes long before the duty period;
 * the same turns shed requests that would otherwise pass {@code admission.max_wait_ms}.
 *
 * <p>Failures: the Disruptor's default handler would kill the routing thread; this stage's handler counts the error,
 * answers the request with no endpoint (the exchange answers 503) and keeps routing; its log line is rate limited.
 */
public final class RoutingStage implements AutoCloseable {
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
    static final String NO_HEALTHY_ENDPOINT = "no healthy endpoint";
    static final String RULE_REMOVED = "the request's rule was removed by a configuration change";
    static final String ROUTING_ERROR = "internal routing error";

    private static final EventTranslatorTwoArg<RouteEvent, RouteRequest, RouterPort> ROUTE_TR =
        (e, seq, request, port) -> e.copyFrom(request, port);
    private static final EventTranslatorTwoArg<RouteEvent, Object, Object> WAKE_TR = (e, seq, a, b) -> e.type = RouteEvent.WAKE;

    /** Dedicated mode: the routing thread's Disruptor (null in io mode). */
    private final Disruptor<RouteEvent> disruptor;
    private final RingBuffer<RouteEvent> ring;
    private final RouterWaitStrategy sleepingWait;
    /** io mode: the event loop that runs this stage, its only runner (null: a dedicated thread runs it). */
    private final EventExecutor invoker;
    /** io mode: drains the ring inside {@link #runDutyCycle}. */
    private final EventPoller<RouteEvent> poller;
    private final EventPoller.Handler<RouteEvent> pollHandler;
    private final ErrorHandler errors = new ErrorHandler();
    /** io mode: a cycle was asked of the loop by another thread and has not started yet. */
    private final AtomicBoolean invocationPending = new AtomicBoolean();
    private final Runnable invocationTask = this::runInvocation;
    private final Runnable dutyTask = this::runScheduledDutyCycle;
    /** io mode: the loop's next scheduled duty cycle (written on the loop, cancelled by {@link #close}). */
    private volatile ScheduledFuture<?> dutyFuture;
    /** io mode, loop only: the scheduled duty cycle is the idle period away. */
    private boolean dutyIdle;
    private volatile boolean closed;
    /** io mode, loop only: a duty cycle is running (a decision's delivery must not start another one inside it). */
    private boolean cycling;
    private final NanoClock clock;
    private final StageTimers stages;
    private final int portCapacity;
    private final ConcurrentHashMap<Executor, RouterPort> portsByExecutor = new ConcurrentHashMap<>();
    private volatile RouterPort[] ports = new RouterPort[0];
    private final AtomicReference<RouteTable> pendingSwap = new AtomicReference<>();
    private volatile boolean probesPending;
    /** The ring sequence of the last operator drain command applied (routing thread writes, the operator waits on it). */
    private volatile long drainAppliedSeq = -1;
    /** The applied table: written by the routing thread (and the constructor), read by I/O threads. */
    private volatile RouteTable table;
    /** LoRA adapters discovered on the endpoints (written by the model probe, read by I/O threads). */
    private final AdapterDirectory adapters = new AdapterDirectory();

    // Routing thread only.
    private final StringBuilder why = new StringBuilder(256);
    private EndpointState[] endpointsById = new EndpointState[64];
    private RouterPort[] dirtyPorts = new RouterPort[8];
    private int dirtyCount;
    /** Admission control by rule name: survives swaps like the rules' other state. */
    private HashMap<String, Admission> admissions = new HashMap<>();
    private final AdmissionQueue.ShedSink<RouteEvent> shedSink = this::shedWaiting;
    /** The admission controls of the applied table, for metrics readers. */
    private volatile Admission[] admissionView = new Admission[0];

    // Counters, any thread.
    private final AtomicLong ringFullRejects = new AtomicLong();
    private final AtomicLong inboxFullRejects = new AtomicLong();
    private final AtomicLong routed = new AtomicLong();
    private final AtomicLong unroutable = new AtomicLong();
    private final AtomicLong handlerErrors = new AtomicLong();
    private final AtomicLong deliveryErrors = new AtomicLong();
    private final AtomicLong undeliverable = new AtomicLong();
    private final AtomicLong batches = new AtomicLong();

    public RoutingStage(GatewayConfig.Router cfg, RouteTable initial, NanoClock clock) {
        this(cfg, initial, clock, new StageTimers());
    }

    /** A stage on its own routing thread ({@code router.thread: dedicated}). */
    public RoutingStage(GatewayConfig.Router cfg, RouteTable initial, NanoClock clock, StageTimers stages) {
        this(cfg, initial, clock, stages, null);
    }

    /**
     * A stage run by {@code loop} ({@code router.thread: io}: the gateway's one I/O event loop), or, with a null
     * {@code loop}, on its own routing thread. {@code router.wait_strategy} applies to the routing thread only.
     */
    public RoutingStage(GatewayConfig.Router cfg, RouteTable initial, NanoClock clock, StageTimers stages, EventExecutor loop) {
        this.clock = clock;
        this.stages = stages;
        this.portCapacity = cfg.ringSize();
        initial.install();
        index(initial);
        this.table = initial;
        attachAdmission(initial, clock.nanoTime()); // before the routing thread starts: nothing waits yet
        this.invoker = loop;
        if (loop != null) {
            // Nobody ever waits on this ring (the loop polls it), so its wait strategy only matters for what a publish
            // signals: busy-spin's signal is a no-op.
            this.disruptor = null;
            this.sleepingWait = null;
            this.ring = RingBuffer.createMultiProducer(RouteEvent::new, cfg.ringSize(), new BusySpinWaitStrategy());
            this.poller = ring.newPoller();
            ring.addGatingSequences(poller.getSequence());
            this.pollHandler = new PollHandler();
            scheduleDutyCycle();
            return;
        }
        this.poller = null;
        this.pollHandler = null;
        WaitStrategy wait = switch (cfg.waitStrategy()) {
            case "busy_spin" -> new BusySpinWaitStrategy();
            case "yielding" -> new YieldingWaitStrategy();
            default -> new RouterWaitStrategy(TimeUnit.MILLISECONDS.toNanos(DUTY_PERIOD_MS));
        };
        this.sleepingWait = wait instanceof RouterWaitStrategy r ? r : null;
        this.disruptor = new Disruptor<>(RouteEvent::new, cfg.ringSize(), r -> {
            Thread t = new Thread(r, "kvgate-router");
            t.setDaemon(true);
            return t;
        }, ProducerType.MULTI, wait);
        disruptor.handleEventsWith(new Handler());
        disruptor.setDefaultExceptionHandler(errors);
        this.ring = disruptor.start();
    }

    /** Whether an event loop runs this stage ({@code router.thread: io}) rather than a routing thread of its own. */
    public boolean runsOnEventLoop() {
        return invoker != null;
    }

    // ---- any thread ---------------------------------------------------------------------------------------------

    /** The current rule set, for I/O threads resolving a model. */
    public RouteTable table() {
        return table;
    }

    /** The LoRA adapters discovered on the current rules' endpoints. */
    public AdapterDirectory adapters() {
        return adapters;
    }

    /** The discovered adapter {@code model} names on the current table, or null (I/O threads, after the table missed). */
    public AdapterDirectory.Served discoveredAdapter(String model) {
        return adapters.lookup(table, model);
    }

    /**
     * The port of an event loop (created on first use; callers keep it). Decisions for requests published through
     * it are delivered by {@code executor.execute}; pass the client connection's event loop.
     */
    public RouterPort port(Executor executor) {
        RouterPort p = portsByExecutor.get(executor);
        return p != null ? p : portsByExecutor.computeIfAbsent(executor, this::newPort);
    }

    private RouterPort newPort(Executor executor) {
        RouterPort p = new RouterPort(this, executor, portCapacity);
        synchronized (portsByExecutor) {
            RouterPort[] next = Arrays.copyOf(ports, ports.length + 1);
            next[next.length - 1] = p;
            ports = next;
        }
        return p;
    }

    /**
     * Swaps in a new rule set and returns once the routing thread applied it (bounded wait; admin thread, never an
     * I/O thread). Policy state of every rule that remains (same name) carries over: session pins, rotation
     * positions, the speculative overlay (when the rule still hashes prompts the same way), counters. Endpoints keep
     * their load, health and breaker by host:port; their changed configuration (weight, role) takes effect here.
     * Requests already in the ring that resolved a rule of the old table are routed by the new table's rule of the
     * same name, or answered "rule removed". In io mode a call on the stage's own loop applies the swap before it
     * returns (never from inside a decision's delivery: refused with IllegalStateException).
     */
    public void swap(RouteTable next) {
        boolean onRunner = invoker != null && invoker.inEventLoop();
        if (onRunner && cycling) {
            throw new IllegalStateException("a rule set cannot be swapped in from inside a routing decision's delivery");
        }
        pendingSwap.set(next);
        if (invoker == null) {
            ring.publishEvent(WAKE_TR, null, null);
            wakeRouter();
        } else if (onRunner) {
            // The stage's own runner asks (io mode): waiting for itself would never end, so it applies the swap now.
            runDutyCycle();
        } else {
            requestInvocation();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (pendingSwap.get() == next) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("the routing stage did not apply the new rule set within 5 s");
            }
            LockSupport.parkNanos(50_000);
        }
    }

    /**
     * An operator's drain ({@code on}) or undrain of {@code ep} (admin thread, never an I/O thread): a command through
     * the ring, applied by the routing thread after every request published before it and before any published after
     * it, so the endpoint has one writer. Returns once it is applied (bounded wait), or false when the ring is full or
     * the stage did not come to it within 5 s (the operator retries). In io mode a call on the stage's own loop applies
     * it before it returns (never from inside a decision's delivery: refused with IllegalStateException).
     */
    public boolean drain(EndpointState ep, boolean on) {
        boolean onRunner = invoker != null && invoker.inEventLoop();
        if (onRunner && cycling) {
            throw new IllegalStateException("an endpoint cannot be drained from inside a routing decision's delivery");
        }
        long seq;
        try {
            seq = ring.tryNext();
        } catch (InsufficientCapacityException full) {
            return false;
        }
        RouteEvent e = ring.get(seq);
        e.type = RouteEvent.DRAIN;
        e.drainTarget = ep;
        e.drainOn = on;
        ring.publish(seq);
        if (onRunner) {
            runDutyCycle();
        } else {
            wakeRouter();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (drainAppliedSeq < seq) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            LockSupport.parkNanos(50_000);
        }
        return true;
    }

    /** A drain command came up in the ring (routing thread). */
    private void applyDrain(RouteEvent e, long sequence) {
        e.drainTarget.drained(e.drainOn);
        drainAppliedSeq = sequence;
    }

    /**
     * An active probe's verdict for {@code ep} (the health checker: one thread). Applied by the routing thread at its
     * next batch or duty cycle; never blocks the caller.
     */
    public void probe(EndpointState ep, boolean healthy) {
        ep.reportProbe(healthy);
        probesPending = true;
    }

    /**
     * Wakes the routing thread if it sleeps (ports do this once per loop turn); in io mode, asks the loop for a duty
     * cycle (at most one task pending, however many threads ask).
     */
    public void wakeRouter() {
        if (invoker != null) {
            requestInvocation();
        } else if (sleepingWait != null) {
            sleepingWait.wake();
        }
    }

    /**
     * The end of an event-loop turn that published requests through one of its ports (that loop's thread). In io mode
     * on the stage's own loop: the loop runs the stage now, and its own decisions are delivered before this returns.
     */
    void endOfTurn() {
        if (invoker != null && invoker.inEventLoop()) {
            runDutyCycle();
        } else {
            wakeRouter();
        }
    }

    /** io mode, any thread: one duty cycle on the loop soon. */
    private void requestInvocation() {
        // getAndSet on both sides (here and in runInvocation): the loop's read of the flag orders every publish made
        // before a caller found a cycle already pending before that cycle's poll of the ring.
        if (!invocationPending.getAndSet(true)) {
            try {
                invoker.execute(invocationTask);
            } catch (RejectedExecutionException e) {
                // The loop is shutting down: the requests of its connections are gone; an admin caller times out.
                invocationPending.set(false);
            }
        }
    }

    private void runInvocation() {
        invocationPending.getAndSet(false);
        runDutyCycle();
    }

    /** Kept for callers that want fresh state now rather than within the duty period. */
    public void wake() {
        wakeRouter();
    }

    boolean publish(RouteRequest request, RouterPort port) {
        if (!ring.tryPublishEvent(ROUTE_TR, request, port)) {
            ringFullRejects.incrementAndGet();
            return false;
        }
        return true;
    }

    void countInboxFull() {
        inboxFullRejects.incrementAndGet();
    }

    void countUndeliverable() {
        undeliverable.incrementAndGet();
    }

    void countDeliveryError(Throwable e) {
        long n = deliveryErrors.incrementAndGet();
        if (Long.bitCount(n) == 1) { // 1st, 2nd, 4th, 8th...: a bug firing on every request must not flood the log
            Log.error("a routing decision's handler failed (" + n + " so far): " + e);
        }
    }

    /** The admission control of rule {@code name} (metrics, tests), or null when it has none. */
    public Admission admission(String ruleName) {
        for (Admission a : admissionView) {
            if (a.ruleName().equals(ruleName)) {
                return a;
            }
        }
        return null;
    }

    /** Requests refused because the ring was full. */
    public long ringFullRejects() {
        return ringFullRejects.get();
    }

    /** Requests refused because their event loop already waited for a full inbox of decisions. */
    public long inboxFullRejects() {
        return inboxFullRejects.get();
    }

    public long routed() {
        return routed.get();
    }

    public long unroutable() {
        return unroutable.get();
    }

    public long handlerErrors() {
        return handlerErrors.get();
    }

    /** Routing batches run (each ends with at most one drain task per port with decisions). */
    public long batches() {
        return batches.get();
    }

    public int ringSize() {
        return ring.getBufferSize();
    }

    public long ringRemaining() {
        return ring.remainingCapacity();
    }

    /** Registers the rule and admission families, read on scrape from the table current then. */
    public void registerMetrics(io.prometheus.metrics.model.registry.PrometheusRegistry registry) {
        RuleStats.register(registry, () -> table.rules());
        Admission.register(registry, () -> admissionView);
    }

    /** The counters of the current table's rule {@code name}, or null. */
    public RuleStats stats(String ruleName) {
        Rule r = table.ruleByName(ruleName);
        return r == null ? null : r.stats();
    }

    // ---- routing thread (io mode: the event loop inside runDutyCycle) -----------------------------------------------

    /**
     * One turn of the stage on its event loop (io mode, loop only): what the dedicated thread does for one batch —
     * housekeeping, every request published so far, then the hand-back — or on its idle duty period when the ring is
     * empty. Never throws. Bounded: a poll takes at most what the ring holds when it starts.
     */
    void runDutyCycle() {
        if (cycling) {
            requestInvocation(); // entered again from a delivery: the loop runs it next, never inside this one
            return;
        }
        cycling = true;
        try {
            housekeeping();
            try {
                poller.poll(pollHandler);
            } catch (Exception | Error ex) {
                countHandlerError(ex); // not expected: the handler catches what a decision throws
            }
            flushPorts();
        } finally {
            cycling = false;
        }
        if (dutyIdle && anyWaiting()) {
            scheduleDutyCycle(); // a request began to wait: its queue is served within one duty period from now
        }
    }

    /**
     * io mode, on the stage's own loop, right after a publish: decides what the ring holds and delivers this loop's
     * decisions now, so a request's upstream write is issued while the loop still reads the rest of its turn. Waiting
     * for the end of the turn held the first request of a burst until the whole burst was read and parsed: on
     * io_uring a turn takes in every completion that arrives while it runs, so the engine started on none of them
     * until the last was in. Only the completions are applied first (nothing to do when none arrived); the rest of
     * the housekeeping (swaps, probe verdicts, engine readings, admission) runs once per turn, in the end-of-turn
     * cycle the port queued. Decides nothing when the stage has its own thread, when the caller is not its loop, or
     * inside a cycle (a publish from a delivery): the end-of-turn cycle decides those, and whatever a failure here
     * left in the ring or undelivered.
     */
    void decideAtOnce() {
        if (invoker == null || cycling || !invoker.inEventLoop()) {
            return;
        }
        cycling = true;
        try {
            applyCompletions(clock.nanoTime());
            poller.poll(pollHandler);
            flushPorts();
        } catch (Exception | Error ex) {
            countHandlerError(ex); // not expected: the handler catches what a decision throws
        } finally {
            cycling = false;
        }
    }

    /** Every port's completion counts since the last call, into endpoint load and breakers (runner only). */
    private void applyCompletions(long now) {
        GatewayConfig.Health h = table.config().health();
        long openNs = h.breakerOpenMs() * 1_000_000L;
        for (RouterPort p : ports) {
            p.applyCompletions(endpointsById, h.breakerFailureThreshold(), openNs, now);
        }
    }

    private void runScheduledDutyCycle() {
        runDutyCycle();
        scheduleDutyCycle();
    }

    /** io mode, loop (or the constructor): replaces the scheduled duty cycle by one at the period that applies now. */
    private void scheduleDutyCycle() {
        boolean idle = !anyWaiting();
        ScheduledFuture<?> previous = dutyFuture;
        if (previous != null) {
            previous.cancel(false); // none, or the one running now, or an idle one a waiting request overtakes
        }
        long delayNs = idle ? IDLE_DUTY_PERIOD_NS : DUTY_PERIOD_NS;
        ScheduledFuture<?> next = invoker.schedule(dutyTask, delayNs, TimeUnit.NANOSECONDS);
        dutyFuture = next;
        dutyIdle = idle;
        if (closed) {
            next.cancel(false); // close() ran on another thread meanwhile and may have cancelled the previous one
        }
    }

    private boolean anyWaiting() {
        for (Admission a : admissionView) {
            if (a.waiting() > 0) {
                return true;
            }
        }
        return false;
    }

    private final class PollHandler implements EventPoller.Handler<RouteEvent> {
        @Override
        public boolean onEvent(RouteEvent e, long sequence, boolean endOfBatch) {
            try {
                if (e.type == RouteEvent.ROUTE) {
                    route(e);
                } else if (e.type == RouteEvent.DRAIN) {
                    applyDrain(e, sequence);
                }
                e.clear();
            } catch (RuntimeException | Error ex) {
                errors.onDecisionFailure(ex, e); // what the Disruptor hands the dedicated thread's exception handler
            }
            return true;
        }
    }

    private final class Handler implements EventHandler<RouteEvent> {
        @Override
        public void onBatchStart(long batchSize, long queueDepth) {
            housekeeping();
        }

        @Override
        public void onEvent(RouteEvent e, long sequence, boolean endOfBatch) {
            if (e.type == RouteEvent.ROUTE) {
                route(e);
            } else if (e.type == RouteEvent.DRAIN) {
                applyDrain(e, sequence);
            }
            e.clear();
            if (endOfBatch) {
                flushPorts();
            }
        }

        @Override
        public void onTimeout(long sequence) {
            housekeeping();
            flushPorts();
        }
    }

    /** Everything that reaches the router out of band, applied before the batch's first decision. Never throws. */
    private void housekeeping() {
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
            admitWaiting(now);
        } catch (RuntimeException | Error ex) {
            // Thrown out of onBatchStart, this would make the Disruptor skip the batch's first request unanswered.
            countHandlerError(ex);
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

    // ---- admission control (routing thread) ---------------------------------------------------------------------

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
                post(w.port, w.request, null, null, RULE_REMOVED);
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
            if (w.request != null && !w.dryRun) {
                w.request.admissionWaited(now - waitedNs, now); // read on its event loop after decide's post
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
            postShed(w.port, w.request, rule, Admission.shedMessage(rule.name(), cls, reason, a.config()));
            a.recycle(w); // always the queue's copy, never a ring slot
        } else {
            unroutable.lazySet(unroutable.get() + 1);
            post(w.port, w.request, null, null, RULE_REMOVED);
            w.clear();
        }
    }

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
                post(e.port, e.request, null, null, RULE_REMOVED);
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
     * Decides {@code e} under {@code rule} now (its admission, if any, already let it through) and posts the decision.
     * A request that reports its prefill's end is charged the uncached prompt tokens the policy found (kv_exact).
     */
    private void decide(Rule rule, RouteEvent e, long now) {
        e.gate = e.needsAdmission ? rule.admission : null;
        e.uncachedTokens = 0;
        e.chosenRank = -1;
        e.tier = null;
        e.reachableTokens = -1;
        e.predictedTokens = -1;
        e.confirmedTokens = -1;
        e.routeLoss = null;
        why.setLength(0);
        EndpointState ep = rule.policyFor(e.role).choose(rule.candidates(e.role), e, now, why);
        if (e.explain && e.serving != null) {
            explainExcluded(rule.candidates(e.role), e);
        }
        stages.recordNs(StageTimers.Stage.DECIDE, clock.nanoTime() - now);
        String explanation = why.length() == 0 ? null : why.toString(); // only explained requests fill it
        if (ep == null) {
            unroutable.lazySet(unroutable.get() + 1);
            post(e.port, e.request, null, rule, explanation != null ? explanation : NO_HEALTHY_ENDPOINT);
            return;
        }
        int charge = e.tracksPrefill && !e.dryRun ? Math.max(0, e.uncachedTokens) : 0;
        int rank = e.sendsDpRank && !e.dryRun ? e.chosenRank : -1;
        if (!e.dryRun) {
            ep.onRouted(now, charge, rank);
            routed.lazySet(routed.get() + 1);
            if (e.tier != null && e.request != null) {
                // read on its event loop after the post below
                e.request.decision(e.tier.label(), e.reachableTokens, e.predictedTokens, e.confirmedTokens, e.routeLoss);
            }
        }
        e.port.post(e.request, ep, rule, explanation, charge, rank);
        markDirty(e.port);
    }

    /**
     * Explained requests only: the candidates the request may not go to because they do not serve its discovered LoRA
     * adapter or do not mount its route (review row 27), whatever the policy said about them.
     */
    private void explainExcluded(EndpointState[] candidates, RouteEvent e) {
        int mark = why.length();
        for (EndpointState c : candidates) {
            if (!e.serves(c)) {
                why.append(why.length() == mark ? (mark == 0 ? "" : "; ") + "excluded (adapter or route not served)=" : ",")
                    .append(c.key());
            }
        }
    }

    private void post(RouterPort port, RouteRequest request, EndpointState ep, Rule rule, String explanation) {
        port.post(request, ep, rule, explanation);
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

    private void postShed(RouterPort port, RouteRequest request, Rule rule, String message) {
        port.postShed(request, rule, message);
        markDirty(port);
    }

    private void flushPorts() {
        int n = dirtyCount;
        if (invoker == null) {
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

    private void countHandlerError(Throwable ex) {
        long n = handlerErrors.incrementAndGet();
        if (Long.bitCount(n) == 1) { // 1st, 2nd, 4th, 8th...: a policy bug firing on every request must not flood the log
            Log.error("routing stage error (" + n + " so far; the request is answered 503): " + ex);
        }
    }

    private final class ErrorHandler implements ExceptionHandler<RouteEvent> {
        @Override
        public void handleEventException(Throwable ex, long sequence, RouteEvent e) {
            onDecisionFailure(ex, e);
            flushPorts(); // the failed event may have ended its batch
        }

        /** A decision threw: counted, the request answered with no endpoint (503), the slot cleared. */
        void onDecisionFailure(Throwable ex, RouteEvent e) {
            countHandlerError(ex);
            if (e != null) {
                if (e.type == RouteEvent.ROUTE && e.request != null && e.port != null) {
                    try {
                        post(e.port, e.request, null, null, ROUTING_ERROR);
                    } catch (RuntimeException again) {
                        countHandlerError(again);
                    }
                }
                e.clear();
            }
        }

        @Override
        public void handleOnStartException(Throwable ex) {
            Log.error("routing stage failed to start: " + ex);
        }

        @Override
        public void handleOnShutdownException(Throwable ex) {
            Log.error("routing stage shutdown error: " + ex);
        }
    }

    @Override
    public void close() {
        if (invoker != null) {
            closed = true;
            dutyFuture.cancel(false);
            return;
        }
        wakeRouter();
        try {
            disruptor.shutdown(2, TimeUnit.SECONDS);
        } catch (com.lmax.disruptor.TimeoutException e) {
            disruptor.halt();
        }
    }
}
