package io.kvgate.dataplane.route;

import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.EventTranslatorThreeArg;
import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.dataplane.metrics.StageTimers;
import io.netty.util.concurrent.EventExecutor;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BusySpinIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.YieldingIdleStrategy;

/**
 * The single-writer routing stage from the design card, as wiring: a preallocated ring of requests
 * ({@link RouteEvent}), the ports that publish into it and take decisions back ({@link RouterPort}, one per event
 * loop), and the one writer that decides them: the {@link RouterAgent}, an Agrona agent whose duty cycle applies what
 * arrived out of band (swaps, probe verdicts, completion counts, engine readings, admission queues), decides every
 * request with the pure {@link Decider} and hands the decisions back. This class picks the agent's runner
 * ({@code router.thread}) and offers the API other threads use (swap, drain, probe, counters).
 *
 * <p>The runners:
 * <ul>
 *   <li><b>dedicated</b>: an Agrona {@code AgentRunner} on a thread of its own, {@code kvgate-router} (the agent's
 *       role name), serving every event loop. Its idle strategy is {@code router.wait_strategy}: {@code blocking}
 *       (default, {@link RouterIdleStrategy}: sleeps at most until housekeeping is due, one duty period, and is woken
 *       once per publishing loop turn), {@code busy_spin} or {@code yielding} (Agrona's strategies of those names).</li>
 *   <li><b>io</b> (the default when the gateway runs one I/O thread): that event loop invokes the agent through an
 *       {@code AgentInvoker} ({@link EventLoopRunner}) and is its only runner. It decides each of its requests as it
 *       is published ({@link #decideAtOnce}: the completions so far, the request, the decision delivered before the
 *       publish returns), so an upstream write goes out while the loop still reads the rest of its turn; at the end of
 *       a turn that published it runs one full duty cycle (housekeeping, anything left in the ring, hand-back),
 *       without a drain task or a wake-up. A task scheduled on the loop runs the same cycle: every
 *       {@value RouterAgent#DUTY_PERIOD_MS} ms while a request waits for admission, every
 *       {@value RouterAgent#IDLE_DUTY_PERIOD_MS} ms otherwise. Publishers on other threads (admin explain, tests)
 *       leave their events in the ring and ask the loop for a cycle; the agent never runs on their thread.</li>
 * </ul>
 * Everything holds in both modes: one runner at a time, the same decisions, errors, counters and metrics.
 *
 * <p>Data flow, all through preallocated structures and without capturing lambdas:
 * <ol>
 *   <li>an event loop publishes a request through its {@link RouterPort}: the request's routing inputs are copied
 *       into a preallocated ring slot on the I/O thread; the router is woken once per loop turn;</li>
 *   <li>at the start of each batch the agent applies what arrived out of band;</li>
 *   <li>it decides each request and posts the decision to the request's port; at the end of the batch each port
 *       with new decisions gets one drain task on its loop, which invokes {@link RouteCallback#onDecision} there.</li>
 * </ol>
 *
 * <p>Admission control ({@link Admission}, rules with {@code admission.*}): a request whose eligible endpoints are all
 * saturated waits in its rule's queue instead of being answered 503. Waiting requests are dispatched by the agent
 * when capacity frees, which it learns from the completion counts it applies at the start of every batch and on the
 * idle duty cycle: a completion does not wake the router (that would be a futex call per completion, on the hottest
 * path), so a freed slot is used at the next batch, or within one duty period when no request arrives. Under the
 * overload that fills the queue requests arrive continuously, so the next batch comes long before the duty period;
 * the same turns shed requests that would otherwise pass {@code admission.max_wait_ms}.
 *
 * <p>Failures: a decision that throws is counted, its request answered with no endpoint (the exchange answers 503),
 * and routing goes on; the log line is rate limited. Closing stops the runner; the agent answers what is pending.
 */
public final class RoutingStage implements AutoCloseable {
    private static final EventTranslatorThreeArg<RouteEvent, RouteInputs, RouteCallback, RouterPort> ROUTE_TR =
        (e, seq, inputs, callback, port) -> e.copyFrom(inputs, callback, port);
    private static final EventTranslatorThreeArg<RouteEvent, RouteInputs, RouteCallback, RouterPort> ROUTE_PAIR_TR =
        (e, seq, inputs, callback, port) -> {
            e.copyFrom(inputs, callback, port);
            e.type = RouteEvent.ROUTE_PAIR;
        };

    /** Preallocated request slots; nobody waits on the ring (the agent polls it), so busy-spin's signal, a no-op. */
    private final RingBuffer<RouteEvent> ring;
    /** The single writer of everything routing: decisions, load, health, breakers, admission. */
    private final RouterAgent agent;
    /** Dedicated mode: the routing thread's runner (null in io mode). */
    private final AgentRunner runner;
    /** Dedicated mode: the thread the runner was started on (null in io mode). */
    private final Thread routingThread;
    /** Dedicated mode with {@code wait_strategy: blocking}: what the stage wakes once per loop turn (else null). */
    private final RouterIdleStrategy sleepingIdle;
    /** io mode: the event loop that invokes the agent, its only runner (null: a dedicated thread runs it). */
    private final EventLoopRunner loopRunner;
    private final int portCapacity;
    private final ConcurrentHashMap<Executor, RouterPort> portsByExecutor = new ConcurrentHashMap<>();
    private volatile RouterPort[] ports = new RouterPort[0];
    /** LoRA adapters discovered on the endpoints (written by the model probe, read by I/O threads). */
    private final AdapterDirectory adapters = new AdapterDirectory();

    // Counters written by I/O threads.
    private final AtomicLong ringFullRejects = new AtomicLong();
    private final AtomicLong inboxFullRejects = new AtomicLong();
    private final AtomicLong deliveryErrors = new AtomicLong();
    private final AtomicLong undeliverable = new AtomicLong();

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
        this.portCapacity = cfg.ringSize();
        this.ring = RingBuffer.createMultiProducer(RouteEvent::new, cfg.ringSize(), new BusySpinWaitStrategy());
        // The duty period is real time (the runner's sleep and the loop's scheduler), also under a test's clock.
        this.agent = new RouterAgent(ring, initial, clock, NanoClock.SYSTEM, stages, loop != null, () -> ports);
        if (loop != null) {
            this.runner = null;
            this.routingThread = null;
            this.sleepingIdle = null;
            this.loopRunner = new EventLoopRunner(loop, agent);
            return;
        }
        this.loopRunner = null;
        IdleStrategy idle = switch (cfg.waitStrategy()) {
            case "busy_spin" -> new BusySpinIdleStrategy();
            case "yielding" -> new YieldingIdleStrategy();
            default -> new RouterIdleStrategy(agent::nanosUntilHousekeeping);
        };
        this.sleepingIdle = idle instanceof RouterIdleStrategy r ? r : null;
        this.runner = new AgentRunner(idle, agent::countHandlerError, null, agent);
        this.routingThread = AgentRunner.startOnThread(runner, r -> {
            Thread t = new Thread(r); // named by the agent's roleName
            t.setDaemon(true);
            return t;
        });
    }

    /** Whether an event loop runs this stage ({@code router.thread: io}) rather than a routing thread of its own. */
    public boolean runsOnEventLoop() {
        return loopRunner != null;
    }

    /** Dedicated mode: the AgentRunner's thread (tests; null in io mode). */
    Thread routingThread() {
        return routingThread;
    }

    // ---- any thread ---------------------------------------------------------------------------------------------

    /** The current rule set, for I/O threads resolving a model. */
    public RouteTable table() {
        return agent.table();
    }

    /** The LoRA adapters discovered on the current rules' endpoints. */
    public AdapterDirectory adapters() {
        return adapters;
    }

    /** The discovered adapter {@code model} names on the current table, or null (I/O threads, after the table missed). */
    public AdapterDirectory.Served discoveredAdapter(String model) {
        return adapters.lookup(agent.table(), model);
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
     * Swaps in a new rule set and returns once the routing agent applied it (bounded wait; admin thread, never an
     * I/O thread). Policy state of every rule that remains (same name) carries over: session pins, rotation
     * positions, the speculative overlay (when the rule still hashes prompts the same way), counters. Endpoints keep
     * their load, health and breaker by host:port; their changed configuration (weight, role) takes effect here.
     * Requests already in the ring that resolved a rule of the old table are routed by the new table's rule of the
     * same name, or answered "rule removed". In io mode a call on the stage's own loop applies the swap before it
     * returns (never from inside a decision's delivery: refused with IllegalStateException).
     */
    public void swap(RouteTable next) {
        boolean onRunner = loopRunner != null && loopRunner.onRunner();
        if (onRunner && agent.inCycle()) {
            throw new IllegalStateException("a rule set cannot be swapped in from inside a routing decision's delivery");
        }
        agent.offerSwap(next);
        if (onRunner) {
            // The stage's own runner asks (io mode): waiting for itself would never end, so it applies the swap now.
            loopRunner.runCycle();
        } else {
            wakeRouter();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (agent.swapPending(next)) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("the routing stage did not apply the new rule set within 5 s");
            }
            LockSupport.parkNanos(50_000);
        }
    }

    /**
     * An operator's drain ({@code on}) or undrain of {@code ep} (admin thread, never an I/O thread): a command through
     * the ring, applied by the routing agent after every request published before it and before any published after
     * it, so the endpoint has one writer. Returns once it is applied (bounded wait), or false when the ring is full or
     * the stage did not come to it within 5 s (the operator retries). In io mode a call on the stage's own loop applies
     * it before it returns (never from inside a decision's delivery: refused with IllegalStateException).
     */
    public boolean drain(EndpointState ep, boolean on) {
        boolean onRunner = loopRunner != null && loopRunner.onRunner();
        if (onRunner && agent.inCycle()) {
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
            loopRunner.runCycle();
        } else {
            wakeRouter();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (agent.drainAppliedSeq() < seq) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            LockSupport.parkNanos(50_000);
        }
        return true;
    }

    /**
     * An active probe's verdict for {@code ep} (the health checker: one thread). Applied by the routing agent at its
     * next housekeeping; never blocks the caller.
     */
    public void probe(EndpointState ep, boolean healthy) {
        ep.reportProbe(healthy);
        agent.probeReported();
    }

    /**
     * Wakes the routing thread if it sleeps (ports do this once per loop turn); in io mode, asks the loop for a duty
     * cycle (at most one task pending, however many threads ask).
     */
    public void wakeRouter() {
        if (loopRunner != null) {
            loopRunner.requestCycle();
        } else if (sleepingIdle != null) {
            sleepingIdle.wake();
        }
    }

    /**
     * The end of an event-loop turn that published requests through one of its ports (that loop's thread). In io mode
     * on the stage's own loop: the loop runs the agent now, and its own decisions are delivered before this returns.
     */
    void endOfTurn() {
        if (loopRunner != null && loopRunner.onRunner()) {
            loopRunner.runCycle();
        } else {
            wakeRouter();
        }
    }

    /**
     * io mode, on the stage's own loop, right after a publish: the agent decides what the ring holds and delivers this
     * loop's decisions now ({@link RouterAgent#decideAtPublish}). Waiting for the end of the turn held the first
     * request of a burst until the whole burst was read and parsed: on io_uring a turn takes in every completion that
     * arrives while it runs, so the engine started on none of them until the last was in. Decides nothing when the
     * stage has its own thread, when the caller is not its loop, or inside a cycle (a publish from a delivery): the
     * end-of-turn cycle decides those.
     */
    void decideAtOnce() {
        if (loopRunner != null && loopRunner.onRunner()) {
            agent.decideAtPublish();
        }
    }

    /** Kept for callers that want fresh state now rather than within the duty period. */
    public void wake() {
        wakeRouter();
    }

    boolean publish(RouteInputs inputs, RouteCallback callback, RouterPort port, boolean pair) {
        if (!ring.tryPublishEvent(pair ? ROUTE_PAIR_TR : ROUTE_TR, inputs, callback, port)) {
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
        for (Admission a : agent.admissionView()) {
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
        return agent.routed();
    }

    public long unroutable() {
        return agent.unroutable();
    }

    public long handlerErrors() {
        return agent.handlerErrors();
    }

    /** Routing turns with housekeeping run (each ends with at most one drain task per port with decisions). */
    public long batches() {
        return agent.batches();
    }

    public int ringSize() {
        return ring.getBufferSize();
    }

    public long ringRemaining() {
        return ring.remainingCapacity();
    }

    /**
     * Registers the rule and admission families, read on scrape from the table current then, and the ring's and the
     * runner's own counters.
     */
    public void registerMetrics(io.prometheus.metrics.model.registry.PrometheusRegistry registry) {
        RuleStats.register(registry, () -> agent.table().rules());
        Admission.register(registry, agent::admissionView);
        counter(registry, "kvgate_router_ring_full_total", "Requests shed because the routing ring was full.", this::ringFullRejects);
        counter(registry, "kvgate_router_inbox_full_total",
            "Requests shed because their event loop already waited for a ring's worth of routing decisions.", this::inboxFullRejects);
        io.prometheus.metrics.core.metrics.GaugeWithCallback.builder().name("kvgate_router_ring_free").help("Free slots in the routing ring.")
            .callback(cb -> cb.call(ringRemaining())).register(registry);
        counter(registry, "kvgate_router_errors_total", "Routing stage handler errors.", this::handlerErrors);
    }

    private static void counter(io.prometheus.metrics.model.registry.PrometheusRegistry registry, String name, String help,
                                java.util.function.LongSupplier value) {
        io.prometheus.metrics.core.metrics.CounterWithCallback.builder().name(name).help(help)
            .callback(cb -> cb.call(value.getAsLong())).register(registry);
    }

    /** The counters of the current table's rule {@code name}, or null. */
    public RuleStats stats(String ruleName) {
        Rule r = agent.table().ruleByName(ruleName);
        return r == null ? null : r.stats();
    }

    /**
     * Stops the runner; the agent's {@link RouterAgent#onClose} decides what is still in the ring and answers requests
     * waiting for admission (503), on the runner.
     */
    @Override
    public void close() {
        if (loopRunner != null) {
            loopRunner.close();
            return;
        }
        if (sleepingIdle != null) {
            sleepingIdle.wake();
        }
        runner.close();
    }
}
