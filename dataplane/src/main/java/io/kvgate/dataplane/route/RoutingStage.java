package io.kvgate.dataplane.route;

import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.EventHandler;
import com.lmax.disruptor.EventTranslatorTwoArg;
import com.lmax.disruptor.ExceptionHandler;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.WaitStrategy;
import com.lmax.disruptor.YieldingWaitStrategy;
import com.lmax.disruptor.dsl.Disruptor;
import com.lmax.disruptor.dsl.ProducerType;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The single-writer routing stage from the design card. I/O threads publish parsed requests onto a bounded
 * Disruptor ring; one thread owns endpoint load, health, breakers and policy state, decides, and hands each decision
 * back to the I/O thread that owns the client connection. Completions, probe results and configuration swaps arrive
 * on the same ring, so no routing state is ever shared between threads.
 *
 * <p>Ring entries are preallocated and filled by static translators: publishing allocates nothing. A route request
 * is refused ({@link #tryRoute} returns false → 503 with Retry-After) when less than a quarter of the ring is free,
 * which keeps room for completions: those must never be dropped or an endpoint's load would leak.
 */
public final class RoutingStage implements AutoCloseable {
    static final int ROUTE = 1;
    static final int COMPLETE = 2;
    static final int PROBE = 3;
    static final int SWAP = 4;

    /** One ring slot; fields cleared after handling so the ring does not keep requests alive. */
    static final class Command {
        int type;
        RouteRequest request;
        EndpointState endpoint;
        boolean flag;
        RouteTable table;

        void clear() {
            request = null;
            endpoint = null;
            table = null;
        }
    }

    private static final EventTranslatorTwoArg<Command, RouteRequest, Object> ROUTE_TR = (c, seq, req, unused) -> {
        c.type = ROUTE;
        c.request = req;
    };
    private static final EventTranslatorTwoArg<Command, EndpointState, Boolean> COMPLETE_TR = (c, seq, ep, ok) -> {
        c.type = COMPLETE;
        c.endpoint = ep;
        c.flag = ok;
    };
    private static final EventTranslatorTwoArg<Command, EndpointState, Boolean> PROBE_TR = (c, seq, ep, ok) -> {
        c.type = PROBE;
        c.endpoint = ep;
        c.flag = ok;
    };
    private static final EventTranslatorTwoArg<Command, RouteTable, Object> SWAP_TR = (c, seq, t, unused) -> {
        c.type = SWAP;
        c.table = t;
    };

    private final Disruptor<Command> disruptor;
    private final RingBuffer<Command> ring;
    private final long routeReserve;
    private final boolean quietCompletions;
    private final WaitStrategy waitStrategy;
    private final NanoClock clock;
    private volatile RouteTable table;
    private final StringBuilder why = new StringBuilder(256);
    private final AtomicLong ringFullRejects = new AtomicLong();
    private final AtomicLong routed = new AtomicLong();
    private final AtomicLong unroutable = new AtomicLong();
    private final AtomicLong handlerErrors = new AtomicLong();

    private final StageTimers stages;

    public RoutingStage(GatewayConfig.Router cfg, RouteTable initial, NanoClock clock) {
        this(cfg, initial, clock, new StageTimers());
    }

    public RoutingStage(GatewayConfig.Router cfg, RouteTable initial, NanoClock clock, StageTimers stages) {
        this.clock = clock;
        this.stages = stages;
        this.table = initial;
        WaitStrategy wait = switch (cfg.waitStrategy()) {
            case "busy_spin" -> new BusySpinWaitStrategy();
            case "yielding" -> new YieldingWaitStrategy();
            default -> new RouterWaitStrategy();
        };
        this.disruptor = new Disruptor<>(Command::new, cfg.ringSize(), r -> {
            Thread t = new Thread(r, "kvgate-router");
            t.setDaemon(true);
            return t;
        }, ProducerType.MULTI, wait);
        this.routeReserve = cfg.ringSize() / 4;
        this.quietCompletions = wait instanceof RouterWaitStrategy;
        this.waitStrategy = wait;
        disruptor.handleEventsWith((EventHandler<Command>) this::onCommand);
        disruptor.setDefaultExceptionHandler(new ExceptionHandler<>() {
            // The default handler would kill the routing thread: count, clear and keep routing instead.
            @Override
            public void handleEventException(Throwable ex, long sequence, Command c) {
                handlerErrors.incrementAndGet();
                System.err.println("kvgate: routing stage error (request answered 503): " + ex);
                if (c.type == ROUTE && c.request != null) {
                    c.request.onRouted(null, null, "routing error: " + ex);
                }
                c.clear();
            }

            @Override
            public void handleOnStartException(Throwable ex) {
                System.err.println("kvgate: routing stage failed to start: " + ex);
            }

            @Override
            public void handleOnShutdownException(Throwable ex) {
                System.err.println("kvgate: routing stage shutdown error: " + ex);
            }
        });
        this.ring = disruptor.start();
    }

    /** The current rule set, for I/O threads resolving a model. */
    public RouteTable table() {
        return table;
    }

    /** Publishes a request for routing; false when the ring is (nearly) full and the request must be shed. */
    public boolean tryRoute(RouteRequest request) {
        if (ring.remainingCapacity() <= routeReserve || !ring.tryPublishEvent(ROUTE_TR, request, null)) {
            ringFullRejects.incrementAndGet();
            return false;
        }
        return true;
    }

    /** A request routed to {@code ep} is finished; {@code ok} = the endpoint behaved (any HTTP answer counts). */
    public void complete(EndpointState ep, boolean ok) {
        if (quietCompletions && ring.remainingCapacity() > ring.getBufferSize() / 2) {
            RouterWaitStrategy.quietly(() -> ring.publishEvent(COMPLETE_TR, ep, ok));
        } else {
            ring.publishEvent(COMPLETE_TR, ep, ok);
        }
    }

    public void probe(EndpointState ep, boolean healthy) {
        ring.publishEvent(PROBE_TR, ep, healthy);
    }

    public void swap(RouteTable next) {
        ring.publishEvent(SWAP_TR, next, null);
    }

    public long ringFullRejects() {
        return ringFullRejects.get();
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

    public int ringSize() {
        return ring.getBufferSize();
    }

    public long ringRemaining() {
        return ring.remainingCapacity();
    }

    private void onCommand(Command c, long sequence, boolean endOfBatch) {
        try {
            switch (c.type) {
                case ROUTE -> route(c.request);
                case COMPLETE -> {
                    GatewayConfig.Health h = table.config().health();
                    c.endpoint.onCompleted(c.flag, h.breakerFailureThreshold(), h.breakerOpenMs() * 1_000_000L, clock.nanoTime());
                }
                case PROBE -> c.endpoint.onProbe(c.flag);
                case SWAP -> {
                    c.table.install(); // endpoint configurations change here, between two decisions
                    table = c.table;
                }
                default -> { }
            }
        } finally {
            c.clear();
        }
    }

    private void route(RouteRequest request) {
        Rule rule = table.ruleByName(request.ruleName());
        if (rule == null) {
            unroutable.incrementAndGet();
            request.onRouted(null, null, "rule '" + request.ruleName() + "' was removed by a configuration change");
            return;
        }
        long now = clock.nanoTime();
        why.setLength(0);
        RouteRequest.Role role = request.role();
        EndpointState ep = rule.policyFor(role).choose(rule.candidates(role), request, now, why);
        stages.recordNs(StageTimers.Stage.DECIDE, clock.nanoTime() - now);
        if (ep == null) {
            unroutable.incrementAndGet();
            request.onRouted(null, rule, "no healthy endpoint");
            return;
        }
        if (request.dryRun()) {
            request.onRouted(ep, rule, why.length() == 0 ? null : why.toString());
            return;
        }
        ep.onRouted(now);
        routed.lazySet(routed.get() + 1);
        request.onRouted(ep, rule, why.length() == 0 ? null : why.toString());
    }

    /**
     * Wakes the routing thread so completions published quietly are applied now (before reading load for metrics,
     * admin or drain; they are otherwise applied when the next route request arrives).
     */
    public void wake() {
        waitStrategy.signalAllWhenBlocking();
    }

    @Override
    public void close() {
        wake();
        try {
            disruptor.shutdown(2, java.util.concurrent.TimeUnit.SECONDS);
        } catch (com.lmax.disruptor.TimeoutException e) {
            disruptor.halt();
        }
    }
}
