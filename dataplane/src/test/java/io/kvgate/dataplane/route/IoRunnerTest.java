package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import io.netty.channel.DefaultEventLoop;
import io.netty.channel.embedded.EmbeddedChannel;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What only {@code router.thread: io} does: the event loop is the routing stage's only runner. It decides each request
 * of its own as it is published and delivers the decision before {@code tryRoute} returns (no drain task, no
 * wake-up), and runs the full housekeeping once at the end of a turn that published; requests
 * from other threads wait in the ring until the loop runs the stage for them; housekeeping (admission shedding at
 * {@code max_wait_ms}, probe verdicts, completions, swaps) runs from the loop's duty-period task without any request;
 * a decision that throws is answered as on the dedicated thread; a round trip allocates nothing.
 *
 * <p>Most tests drive an {@link EmbeddedChannel}'s loop on the test thread with its time frozen, so the duty period
 * passes by {@code advanceTimeBy} and the gateway's clock by {@link ManualClock}: nothing sleeps. The rest run a real
 * {@link DefaultEventLoop}. Every mode-independent contract runs in both modes in {@code RoutingStageTest} and
 * {@code AdmissionStageTest}.
 */
class IoRunnerTest {
    private static final Duration LIMIT = Duration.ofSeconds(10);
    private static final String ADMISSION = "    policy: round_robin\n    admission: {max_outstanding: 1, max_queue: 3, max_wait_ms: 1000}\n";

    private final ManualClock clock = new ManualClock();
    private final List<AutoCloseable> toClose = new ArrayList<>();
    private RoutingStage stage;

    /** Round robin that records the thread it decided on; salt "boom" throws. */
    private static final class RecordingPolicy implements RoutingPolicy {
        private final RoutingPolicy rr = Policies.create("round_robin");
        volatile Thread decidedOn;

        @Override
        public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
            decidedOn = Thread.currentThread();
            if ("boom".equals(r.cacheSalt())) {
                throw new IllegalStateException("policy bug");
            }
            return rr.choose(c, r, nowNs, why);
        }
    }

    private final RecordingPolicy policy = new RecordingPolicy();

    private static final class Req implements RouteCallback {
        final Rule rule;
        String salt;
        volatile EndpointState endpoint;
        volatile String explanation;
        volatile String shedMessage;
        volatile Thread deliveredOn;
        final AtomicInteger answers = new AtomicInteger();
        /** Run inside onDecision (a retry publishing again from the delivery), or null. */
        Runnable onDelivery;

        Req(Rule rule, String salt) {
            this.rule = rule;
            this.salt = salt;
        }

        RouteInputs inputs(RouteInputs in) {
            return in.rule(rule).cacheSalt(salt);
        }

        @Override
        public void onDecision(Decision d) {
            if (d.shed()) {
                onShed(d.explanation());
                return;
            }
            endpoint = d.endpoint();
            explanation = d.explanation();
            deliveredOn = Thread.currentThread();
            answers.incrementAndGet();
            Runnable then = onDelivery;
            if (then != null) {
                onDelivery = null;
                then.run();
            }
        }

        private void onShed(String message) {
            shedMessage = message;
            deliveredOn = Thread.currentThread();
            answers.incrementAndGet();
        }
    }

    /** Publishes {@code q} through {@code port} as an exchange does: its inputs into the port's reused value. */
    private static boolean route(RouterPort port, Req q) {
        return port.tryRoute(q.inputs(port.inputs()), q);
    }

    /** A DefaultEventLoop counting the tasks handed to it (drain tasks and invocations are tasks; in-turn delivery is not). */
    private static final class CountingLoop extends DefaultEventLoop {
        final AtomicInteger executes = new AtomicInteger();

        @Override
        public void execute(Runnable task) {
            executes.incrementAndGet();
            super.execute(task);
        }
    }

    @AfterEach
    void close() throws Exception {
        if (stage != null) {
            stage.close();
        }
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    private Rule rule(String settings, int endpointCount, io.netty.util.concurrent.EventExecutor loop) {
        GatewayConfig cfg = config("", RouteFixtures.rule("r", settings, endpoints(endpointCount)));
        stage = new RoutingStage(cfg.router(), RouteTable.build(cfg, new EndpointRegistry(), ctx -> policy), clock,
            new StageTimers(), loop);
        return stage.table().ruleByName("r");
    }

    private EmbeddedChannel embedded() {
        EmbeddedChannel ch = new EmbeddedChannel();
        ch.freezeTime();
        toClose.add(() -> ch.finishAndReleaseAll());
        return ch;
    }

    private static void await(BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + LIMIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.onSpinWait();
        }
    }

    /** One duty period passes on the loop (its clock only): the scheduled duty cycle runs if a request waits. */
    private static void dutyPeriod(EmbeddedChannel ch) {
        ch.advanceTimeBy(RouterAgent.DUTY_PERIOD_MS, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
    }

    /** The rest of the idle duty period passes on the loop: the scheduled duty cycle runs when nothing waits. */
    private static void restOfIdleDutyPeriod(EmbeddedChannel ch) {
        ch.advanceTimeBy(RouterAgent.IDLE_DUTY_PERIOD_MS - RouterAgent.DUTY_PERIOD_MS, TimeUnit.MILLISECONDS);
        ch.runScheduledPendingTasks();
    }

    @Test
    void theLoopDecidesEachRequestAsItIsPublishedAndKeepsHousekeepingForTheEndOfItsTurn() throws Exception {
        CountingLoop loop = new CountingLoop();
        toClose.add(() -> loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly());
        Rule r = rule("    policy: round_robin\n", 2, loop);
        assertTrue(stage.runsOnEventLoop());
        RouterPort port = stage.port(loop);
        Req[] reqs = new Req[30];
        CompletableFuture<String> inTurn = new CompletableFuture<>();
        CompletableFuture<long[]> nextTask = new CompletableFuture<>();
        loop.execute(() -> {
            int tasksBefore = loop.executes.get();
            long batchesBefore = stage.batches();
            for (int i = 0; i < reqs.length; i++) {
                reqs[i] = new Req(r, null);
                if (!route(port, reqs[i])) {
                    inTurn.complete("refused");
                    return;
                }
                if (reqs[i].answers.get() != 1) {
                    inTurn.complete("request " + i + " not delivered inside its tryRoute");
                    return;
                }
            }
            long housekeepingInTurn = stage.batches() - batchesBefore;
            // Queued after the end-of-turn task the turn's first publish queued: it sees what that task did.
            loop.execute(() -> nextTask.complete(new long[] {loop.executes.get() - tasksBefore, port.drains(),
                stage.batches() - batchesBefore, port.delivered(), housekeepingInTurn}));
            inTurn.complete("published and delivered");
        });
        assertEquals("published and delivered", inTurn.get(10, TimeUnit.SECONDS));
        long[] seen = nextTask.get(10, TimeUnit.SECONDS);
        assertEquals(30, seen[3], "every decision delivered");
        assertEquals(2, seen[0], "two tasks: the one end-of-turn task of 30 publishes, and the test's own; no drain task");
        assertEquals(30, seen[1], "one in-turn delivery per request");
        assertEquals(0, seen[4], "no full housekeeping inside the turn: deciding a request costs no walk over the endpoints");
        assertTrue(seen[2] >= 1, "the end-of-turn cycle ran the housekeeping");
        Thread loopThread = loop.submit(Thread::currentThread).get(10, TimeUnit.SECONDS);
        for (Req q : reqs) {
            assertEquals(1, q.answers.get());
            assertNotNull(q.endpoint);
            assertSame(loopThread, q.deliveredOn);
        }
        assertSame(loopThread, policy.decidedOn, "the loop decided");
    }

    @Test
    void aCompletionEarlierInTheTurnCountsForTheNextRequestDecidedInIt() {
        EmbeddedChannel ch = embedded();
        Rule r = rule(ADMISSION, 1, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        Req first = new Req(r, null);
        assertTrue(route(port, first));
        assertSame(r.endpoints().get(0), first.endpoint);
        port.complete(first.endpoint, Outcome.SUCCESS); // its answer relayed, same turn
        Req second = new Req(r, null);
        assertTrue(route(port, second));
        assertEquals(1, second.answers.get(), "max_outstanding 1 and the endpoint freed: admitted at once, not queued");
        assertSame(first.endpoint, second.endpoint);
        Req third = new Req(r, null);
        assertTrue(route(port, third));
        assertEquals(0, third.answers.get(), "the endpoint is busy again: it waits");
        assertEquals(1, stage.admission("r").depth(PriorityClass.STANDARD));
        ch.runPendingTasks(); // the end-of-turn housekeeping: still busy, still waiting
        assertEquals(0, third.answers.get());
        port.complete(second.endpoint, Outcome.SUCCESS);
        Req fourth = new Req(r, null);
        assertTrue(route(port, fourth));
        assertSame(first.endpoint, third.endpoint, "the freed slot goes to the request already waiting");
        assertEquals(0, fourth.answers.get(), "behind it");
        ch.checkException();
    }

    @Test
    void aForeignThreadsPublishWaitsInTheRingAndIsDecidedOnTheLoop() throws Exception {
        DefaultEventLoop loop = new DefaultEventLoop();
        toClose.add(() -> loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly());
        Rule r = rule("    policy: round_robin\n", 2, loop);
        Thread loopThread = loop.submit(Thread::currentThread).get(10, TimeUnit.SECONDS);
        // As the admin explain route does: a direct executor, published from the admin thread (here the test's).
        RouterPort direct = stage.port(Runnable::run);
        Req explain = new Req(r, null);
        assertTrue(route(direct, explain));
        await(() -> explain.answers.get() == 1, "the explain decision");
        assertSame(loopThread, policy.decidedOn, "decided on the loop, never on the publishing thread");
        assertSame(loopThread, explain.deliveredOn, "a direct executor's decision is delivered by the stage's runner");
        // A plain executor's port: its decisions come back through one drain task on that executor.
        List<Runnable> tasks = new ArrayList<>();
        Executor queue = task -> {
            synchronized (tasks) {
                tasks.add(task);
            }
        };
        RouterPort queued = stage.port(queue);
        Req[] reqs = new Req[10];
        for (int i = 0; i < reqs.length; i++) {
            reqs[i] = new Req(r, null);
            assertTrue(route(queued, reqs[i]));
        }
        await(() -> queued.published() == 10, "10 decisions published");
        await(() -> {
            synchronized (tasks) {
                return !tasks.isEmpty();
            }
        }, "a drain task");
        for (Req q : reqs) {
            assertEquals(0, q.answers.get(), "delivered by the executor's drain task, not by the loop");
        }
        await(() -> {
            List<Runnable> run;
            synchronized (tasks) {
                run = new ArrayList<>(tasks);
                tasks.clear();
            }
            run.forEach(Runnable::run);
            return queued.delivered() == 10;
        }, "10 delivered");
        for (Req q : reqs) {
            assertSame(Thread.currentThread(), q.deliveredOn);
        }
        assertSame(loopThread, policy.decidedOn);
    }

    @Test
    void housekeepingRunsFromTheLoopsDutyTaskWithoutAnyRequest() {
        EmbeddedChannel ch = embedded();
        Rule r = rule(ADMISSION, 1, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        EndpointState ep = r.endpoints().get(0);
        Req busy = new Req(r, null);
        assertTrue(route(port, busy));
        assertSame(ep, busy.endpoint, "decided and delivered as it was published");
        Req waiting = new Req(r, null);
        assertTrue(route(port, waiting));
        assertEquals(1, stage.admission("r").depth(PriorityClass.STANDARD), "max_outstanding 1: it waits");
        ch.runPendingTasks(); // the turn's end: its housekeeping

        // Admission shedding: no request arrives, the gateway clock moves, the loop's duty task sheds at the deadline.
        clock.advance(979, TimeUnit.MILLISECONDS); // deadline 21 ms away: beyond the slack of two duty periods
        long turns = stage.batches();
        dutyPeriod(ch);
        assertEquals(turns + 1, stage.batches(), "one duty cycle per duty period");
        assertEquals(0, waiting.answers.get(), "not yet due");
        clock.advance(2, TimeUnit.MILLISECONDS);
        ch.runPendingTasks();
        assertEquals(0, waiting.answers.get(), "no request, no duty period: nothing runs the stage");
        dutyPeriod(ch);
        assertEquals(1, waiting.answers.get(), "shed by the duty cycle");
        assertNull(waiting.endpoint);
        assertTrue(waiting.shedMessage.contains("admission.max_wait_ms (1000 ms)"), waiting.shedMessage);

        // A probe verdict and a completion, applied by the next duty cycle: with nothing waiting any more, that is
        // the idle period away.
        stage.probe(ep, false);
        port.complete(busy.endpoint, Outcome.SUCCESS);
        assertTrue(ep.probeHealthy());
        assertEquals(1, ep.outstanding());
        long beforeIdle = stage.batches();
        dutyPeriod(ch);
        assertEquals(beforeIdle, stage.batches(), "nothing waits: no duty cycle one busy period later");
        assertTrue(ep.probeHealthy());
        restOfIdleDutyPeriod(ch);
        assertEquals(beforeIdle + 1, stage.batches(), "one duty cycle per idle period");
        assertFalse(ep.probeHealthy(), "the probe verdict applied without a request");
        assertEquals(0, ep.outstanding(), "the completion applied without a request");

        // A swap asked on the loop itself is applied at once (waiting for its own loop would never end).
        GatewayConfig bigger = config("", RouteFixtures.rule("r", ADMISSION.replace("max_queue: 3", "max_queue: 2"), endpoints(1)));
        RouteTable next = RouteTable.build(bigger, new EndpointRegistry(), ctx -> policy, stage.table());
        stage.swap(next);
        assertSame(next, stage.table());
        assertEquals(2, stage.admission("r").config().maxQueue());
        ch.checkException();
    }

    @Test
    void aDecisionThatThrowsIsAnsweredWithNoEndpointAndTheLoopKeepsRouting() {
        EmbeddedChannel ch = embedded();
        Rule r = rule("    policy: round_robin\n", 1, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        Req bad = new Req(r, "boom");
        Req good = new Req(r, null);
        assertTrue(route(port, bad));
        assertTrue(route(port, good));
        ch.runPendingTasks();
        ch.checkException(); // nothing escaped into the event loop
        assertEquals(1, bad.answers.get());
        assertNull(bad.endpoint);
        assertEquals(RouterAgent.ROUTING_ERROR, bad.explanation);
        assertNotNull(good.endpoint, "the request behind it in the same batch is decided");
        assertEquals(1, stage.handlerErrors());
        Req after = new Req(r, null);
        assertTrue(route(port, after));
        ch.runPendingTasks();
        assertNotNull(after.endpoint, "routing goes on");
        assertEquals(stage.ringSize(), stage.ringRemaining(), "every slot released, the failed one too");
    }

    @Test
    void aRequestPublishedFromInsideADeliveryIsDecidedByALaterCycleOfTheSameTurn() {
        EmbeddedChannel ch = embedded();
        Rule r = rule("    policy: round_robin\n", 2, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        Req retry = new Req(r, null);
        Req first = new Req(r, null);
        first.onDelivery = () -> assertTrue(route(port, retry)); // a connect retry asks again from its callback
        assertTrue(route(port, first));
        ch.runPendingTasks();
        ch.checkException();
        assertEquals(1, first.answers.get());
        assertEquals(1, retry.answers.get(), "decided by the end-of-turn task its publish queued");
        assertTrue(first.endpoint != retry.endpoint, "round robin moved on: two decisions of one stage");
        assertEquals(2, port.drains(), "two in-turn deliveries, no drain task");
    }

    @Test
    void aSwapFromInsideADeliveryIsRefusedRatherThanRunningTheStageInsideItself() {
        EmbeddedChannel ch = embedded();
        Rule r = rule("    policy: round_robin\n", 1, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        GatewayConfig same = config("", RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(1)));
        RouteTable next = RouteTable.build(same, new EndpointRegistry(), ctx -> policy, stage.table());
        AtomicInteger refused = new AtomicInteger();
        Req q = new Req(r, null);
        q.onDelivery = () -> {
            assertThrows(IllegalStateException.class, () -> stage.swap(next));
            refused.incrementAndGet();
        };
        assertTrue(route(port, q));
        ch.runPendingTasks();
        assertEquals(1, refused.get(), "the swap was refused inside the delivery (an assertion failing there would not count)");
        assertTrue(stage.table() != next, "and not applied later either");
        dutyPeriod(ch);
        assertTrue(stage.table() != next);
    }

    /**
     * A round trip in io mode — publish, decided and delivered at once, the turn's end housekeeping, the completion — on
     * one thread, so the thread's own allocation counter sees all of it: the least of five runs of 10,000 (one run
     * can catch the JIT's one-off allocation; an allocation per request would show in every run).
     */
    @Test
    void aRoundTripOnTheLoopAllocatesNothing() {
        EmbeddedChannel ch = embedded();
        Rule r = rule("    policy: round_robin\n", 2, ch.eventLoop());
        RouterPort port = stage.port(ch.eventLoop());
        Req q = new Req(r, null);
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        for (int i = 0; i < 50_000; i++) {
            roundTrip(ch, port, q);
        }
        long best = Long.MAX_VALUE;
        for (int run = 0; run < 5; run++) {
            long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 10_000; i++) {
                roundTrip(ch, port, q);
            }
            best = Math.min(best, threads.getCurrentThreadAllocatedBytes() - before);
        }
        assertEquals(0, best, "bytes allocated over 10,000 round trips");
        assertEquals(0, stage.handlerErrors());
    }

    private static void roundTrip(EmbeddedChannel ch, RouterPort port, Req q) {
        if (!route(port, q)) {
            throw new AssertionError("refused");
        }
        ch.runPendingTasks();
        port.complete(q.endpoint, Outcome.SUCCESS);
    }
}
