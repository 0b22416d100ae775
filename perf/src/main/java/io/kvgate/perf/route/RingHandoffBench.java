package io.kvgate.perf.route;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RouterPort;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import io.netty.channel.embedded.EmbeddedChannel;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Round trip through the real routing stage: the benchmark thread (playing an I/O thread) publishes one
 * reused request's inputs (the port's own {@code RouteInputs}) and its preallocated {@link RouteCallback} through its
 * {@link RouterPort}, the routing thread runs a
 * {@code round_robin} rule and posts the decision to the port, whose drain (a direct executor: it runs on the routing
 * thread at the end of the batch, standing in for the event loop's drain task) calls {@code onDecision}, which raises a
 * volatile flag the benchmark thread spins on; the benchmark thread then reports the completion through the port
 * (per-loop counters, no hand-off). No explanation is asked, so the routing stage passes a null {@code why} string.
 * Baseline in the same run: the same hand-off through a {@link ArrayBlockingQueue} to a plain consumer thread
 * ({@code take()}), which answers the same way.
 *
 * <p>Run with {@code -prof gc}: {@code gc.alloc.rate.norm} is the allocation per round trip of every thread of the
 * JVM (JMH's GC profiler counts all threads), so it covers the routing thread's decision and hand-back too.
 *
 * <p>{@code routingStageOnLoop_roundTrip}: the same round trip with {@code router.thread: io}. The benchmark thread is
 * the event loop (an {@link EmbeddedChannel}'s, whose tasks it runs itself): it publishes, ends its "turn" by running
 * the loop's tasks (the end-of-turn task runs the stage, which decides and delivers to the loop's own port in the same
 * turn), then completes. No second thread is involved, so {@code gc.alloc.rate.norm} is exactly the io mode's
 * allocation per request.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class RingHandoffBench {

    /** A reusable request; onDecision only flips a volatile flag (what eventLoop.execute would publish). */
    static final class Req implements RouteCallback {
        volatile boolean done;
        EndpointState chosen;
        String explanation;

        Rule rule;

        /** Publishes the request as an exchange does: its inputs into the port's reused value. */
        boolean publish(RouterPort port) {
            return port.tryRoute(port.inputs().rule(rule), this);
        }

        @Override
        public void onDecision(Decision d) {
            answer(d.endpoint(), d.explanation());
        }

        void answer(EndpointState endpoint, String why) {
            chosen = endpoint;
            explanation = why;
            done = true;
        }
    }

    static void await(Req r) {
        while (!r.done) {
            Thread.onSpinWait();
        }
    }

    @State(Scope.Benchmark)
    public static class StageState {
        /** blocking = the default; yielding = the routing thread spins then yields (lower latency, burns CPU). */
        @Param({"blocking", "yielding"})
        String waitStrategy;

        RoutingStage stage;
        RouterPort port;
        final Req req = new Req();

        @Setup(Level.Trial)
        public void setup() throws Exception {
            GatewayConfig cfg = GatewayConfig.parse("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\n"
                + "router: {ring_size: 4096, wait_strategy: " + waitStrategy + "}\n"
                + "rules:\n  - name: chat\n    models: [m]\n    engine: vllm\n    policy: round_robin\n"
                + "    endpoints:\n      - url: http://127.0.0.1:20001\n      - url: http://127.0.0.1:20002\n");
            RouteTable table = RouteTable.build(cfg, new EndpointRegistry(),
                ctx -> RulePolicies.create(ctx, null, NanoClock.SYSTEM));
            stage = new RoutingStage(cfg.router(), table, NanoClock.SYSTEM);
            port = stage.port(Runnable::run);
            req.rule = table.ruleByName("chat");
        }

        /** The routing thread's own allocation, measured per iteration (JMH's -prof gc adds every thread's noise). */
        private final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        private long routerThreadId = -1;
        private long bytesAtStart;
        private long decisionsAtStart;

        @Setup(Level.Iteration)
        public void startIteration() {
            if (routerThreadId < 0) {
                for (Thread t : Thread.getAllStackTraces().keySet()) {
                    if (t.getName().equals("kvgate-router")) {
                        routerThreadId = t.threadId();
                    }
                }
            }
            bytesAtStart = threads.getThreadAllocatedBytes(routerThreadId);
            decisionsAtStart = stage.routed();
        }

        @TearDown(Level.Iteration)
        public void endIteration() {
            long bytes = threads.getThreadAllocatedBytes(routerThreadId) - bytesAtStart;
            long decisions = stage.routed() - decisionsAtStart;
            System.out.printf("%n  routing thread (%s): %d bytes allocated over %d decisions = %.4f B/decision%n",
                waitStrategy, bytes, decisions, decisions == 0 ? Double.NaN : (double) bytes / decisions);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            stage.close();
        }
    }

    @State(Scope.Benchmark)
    public static class LoopState {
        RoutingStage stage;
        RouterPort port;
        EmbeddedChannel loop;
        final Req req = new Req();

        @Setup(Level.Trial)
        public void setup() throws Exception {
            GatewayConfig cfg = GatewayConfig.parse("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\n"
                + "io_threads: 1\nrouter: {ring_size: 4096, thread: io}\n"
                + "rules:\n  - name: chat\n    models: [m]\n    engine: vllm\n    policy: round_robin\n"
                + "    endpoints:\n      - url: http://127.0.0.1:20001\n      - url: http://127.0.0.1:20002\n");
            RouteTable table = RouteTable.build(cfg, new EndpointRegistry(),
                ctx -> RulePolicies.create(ctx, null, NanoClock.SYSTEM));
            loop = new EmbeddedChannel();
            stage = new RoutingStage(cfg.router(), table, NanoClock.SYSTEM, new StageTimers(), loop.eventLoop());
            port = stage.port(loop.eventLoop());
            req.rule = table.ruleByName("chat");
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            stage.close();
            loop.finishAndReleaseAll();
        }
    }

    @Benchmark
    public EndpointState routingStageOnLoop_roundTrip(LoopState s) {
        Req r = s.req;
        r.done = false;
        if (!r.publish(s.port)) {
            throw new IllegalStateException("ring full with one request in flight");
        }
        s.loop.runPendingTasks(); // the turn's end: the stage runs and delivers to this loop's port
        if (!r.done) {
            throw new IllegalStateException("the decision did not come back in the turn");
        }
        s.port.complete(r.chosen, Outcome.SUCCESS);
        return r.chosen;
    }

    @Benchmark
    public EndpointState routingStage_roundTrip(StageState s) {
        Req r = s.req;
        r.done = false;
        if (!r.publish(s.port)) {
            throw new IllegalStateException("ring full with one request in flight");
        }
        await(r);
        if (r.explanation != null) {
            throw new IllegalStateException("an explanation was built without being asked: " + r.explanation);
        }
        s.port.complete(r.chosen, Outcome.SUCCESS);
        return r.chosen;
    }

    @State(Scope.Benchmark)
    public static class QueueState {
        ArrayBlockingQueue<Req> queue;
        Thread consumer;
        final Req req = new Req();
        EndpointState ep;

        @Setup(Level.Trial)
        public void setup() throws Exception {
            queue = new ArrayBlockingQueue<>(4096);
            ep = new EndpointState("127.0.0.1:20001", 0,
                GatewayConfig.parse("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\nrules:\n  - name: chat\n"
                    + "    models: [m]\n    engine: vllm\n    policy: round_robin\n    endpoints:\n"
                    + "      - url: http://127.0.0.1:20001\n").rules().get(0).endpoints().get(0));
            consumer = new Thread(() -> {
                try {
                    while (true) {
                        Req r = queue.take();
                        r.answer(ep, null);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "abq-consumer");
            consumer.setDaemon(true);
            consumer.start();
        }

        @TearDown(Level.Trial)
        public void tearDown() throws InterruptedException {
            consumer.interrupt();
            consumer.join(5_000);
        }
    }

    @Benchmark
    public EndpointState baseline_arrayBlockingQueue(QueueState s) {
        Req r = s.req;
        r.done = false;
        if (!s.queue.offer(r)) {
            throw new IllegalStateException("queue full with one request in flight");
        }
        await(r);
        return r.chosen;
    }
}
