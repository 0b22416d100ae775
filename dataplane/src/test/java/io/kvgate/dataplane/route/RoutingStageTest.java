package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.RuleStats.Tier;
import io.netty.channel.DefaultEventLoop;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import io.kvgate.dataplane.route.RouteFixtures.Runner;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The routing stage with its real runner, in both modes ({@code router.thread}): its own Disruptor thread, and an event
 * loop running it (io mode; the test thread then publishes as a foreign thread, which the loop serves): batched
 * hand-back, ring and inbox bounds, the exception handler, completions that never touch the ring (M14), state kept
 * across a swap. The runner is held inside a decision with a latch (a "gate" request) wherever a test needs a
 * deterministic batch. What only io mode does (the loop's own port served in its turn) is {@code IoRunnerTest}.
 */
class RoutingStageTest {
    private static final Duration LIMIT = Duration.ofSeconds(10);

    private final ManualClock clock = new ManualClock();
    private final CountDownLatch gateEntered = new CountDownLatch(1);
    private final CountDownLatch gateOpen = new CountDownLatch(1);
    private final RouteFixtures.Stages stages = new RouteFixtures.Stages();
    private RoutingStage stage;

    /** Round robin, except: salt "gate" holds the routing thread until the test opens it; salt "boom" throws. */
    private final class ScriptedPolicy implements RoutingPolicy {
        private final RoutingPolicy rr = Policies.create("round_robin");

        @Override
        public EndpointState choose(EndpointState[] c, RouteEvent r, long nowNs, StringBuilder why) {
            if ("gate".equals(r.cacheSalt())) {
                gateEntered.countDown();
                try {
                    gateOpen.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            if ("boom".equals(r.cacheSalt())) {
                throw new IllegalStateException("policy bug");
            }
            return rr.choose(c, r, nowNs, why);
        }
    }

    /** An executor the test drains itself, counting how often the stage scheduled a drain. */
    private static final class TestLoop implements Executor {
        final ArrayDeque<Runnable> tasks = new ArrayDeque<>();
        final AtomicInteger executes = new AtomicInteger();

        @Override
        public synchronized void execute(Runnable task) {
            executes.incrementAndGet();
            tasks.add(task);
        }

        void runAll() {
            while (true) {
                Runnable r;
                synchronized (this) {
                    r = tasks.poll();
                }
                if (r == null) {
                    return;
                }
                r.run();
            }
        }
    }

    private static final class Req implements RouteCallback {
        final Rule rule;
        final String salt;
        final long session;
        volatile EndpointState endpoint;
        volatile String explanation;
        volatile Thread deliveredOn;
        final AtomicInteger decisions = new AtomicInteger();

        Req(Rule rule, String salt, long session) {
            this.rule = rule;
            this.salt = salt;
            this.session = session;
        }

        RouteInputs inputs(RouteInputs in) {
            return in.rule(rule).cacheSalt(salt).sessionKeyHash(session);
        }

        @Override
        public void onDecision(Decision d) {
            endpoint = d.endpoint();
            explanation = d.explanation();
            deliveredOn = Thread.currentThread();
            decisions.incrementAndGet();
        }
    }

    /** Publishes {@code q} through {@code port} as an exchange does: its inputs into the port's reused value. */
    private static boolean route(RouterPort port, Req q) {
        return port.tryRoute(q.inputs(port.inputs()), q);
    }

    @AfterEach
    void close() {
        gateOpen.countDown();
        if (stage != null) {
            stage.close();
        }
        stages.close();
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

    /**
     * Runs the loop's tasks until {@code n} decisions were delivered through {@code port} (the drain task is queued
     * just after the decisions become visible, so waiting for visibility alone is not enough).
     */
    private static void deliver(TestLoop loop, RouterPort port, long n) {
        await(() -> {
            loop.runAll();
            return port.delivered() >= n;
        }, n + " decisions delivered");
        assertEquals(n, port.delivered());
    }

    private Rule start(Runner runner, String extraConfig, int endpointCount) {
        GatewayConfig cfg = config(extraConfig, RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(endpointCount)));
        stage = stages.start(runner, cfg.router(), RouteTable.build(cfg, new EndpointRegistry(), ctx -> new ScriptedPolicy()), clock);
        return stage.table().ruleByName("r");
    }

    private void holdRouter(RouterPort port, Rule r) throws InterruptedException {
        assertTrue(route(port, new Req(r, "gate", SessionKeys.NONE)));
        assertTrue(gateEntered.await(LIMIT.toSeconds(), TimeUnit.SECONDS), "the routing thread entered the gate");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void decisionsComeBackOnThePortsExecutorOneDrainPerBatch(Runner runner) throws Exception {
        Rule r = start(runner, "", 2);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        holdRouter(port, r);
        List<Req> batch = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            Req q = new Req(r, null, SessionKeys.NONE);
            batch.add(q);
            assertTrue(route(port, q));
        }
        gateOpen.countDown();
        await(() -> port.published() == 51, "51 decisions published");
        assertEquals(1, loop.executes.get(), "one drain scheduled for the gate's batch and the 50 behind it (still pending)");
        for (Req q : batch) {
            assertNull(q.endpoint, "nothing is delivered before the loop runs its drain task");
        }
        loop.runAll();
        assertEquals(1, port.drains());
        for (Req q : batch) {
            assertEquals(1, q.decisions.get());
            assertNotNull(q.endpoint);
            assertSame(Thread.currentThread(), q.deliveredOn, "the decision runs on the port's executor, not the routing thread");
        }
        // The next batch gets exactly one new drain task.
        for (int i = 0; i < 20; i++) {
            assertTrue(route(port, new Req(r, null, SessionKeys.NONE)));
        }
        await(() -> port.published() == 71, "71 decisions published");
        await(() -> loop.executes.get() >= 2, "a second drain");
        loop.runAll();
        assertEquals(71, port.delivered());
        assertTrue(loop.executes.get() <= 21, "at most one drain per routing batch");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void onANettyEventLoopTheDecisionArrivesOnThatLoop(Runner runner) throws Exception {
        Rule r = start(runner, "", 1);
        DefaultEventLoop loop = new DefaultEventLoop();
        try {
            RouterPort port = stage.port(loop);
            Req[] reqs = new Req[30];
            CompletableFuture<Boolean> published = new CompletableFuture<>();
            loop.execute(() -> { // one loop turn publishes all 30: one wake-up of the router at its end
                boolean all = true;
                for (int i = 0; i < reqs.length; i++) {
                    reqs[i] = new Req(r, null, SessionKeys.NONE);
                    all &= route(port, reqs[i]);
                }
                published.complete(all);
            });
            assertTrue(published.get(10, TimeUnit.SECONDS));
            await(() -> port.delivered() == 30, "30 decisions delivered");
            Thread loopThread = loop.submit(Thread::currentThread).get(10, TimeUnit.SECONDS);
            for (Req q : reqs) {
                assertSame(loopThread, q.deliveredOn);
            }
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aFullRingIsRefusedAndCountedThenAcceptsAgain(Runner runner) throws Exception {
        Rule r = start(runner, "router: {ring_size: 16}\n", 1);
        TestLoop a = new TestLoop();
        TestLoop b = new TestLoop();
        RouterPort portA = stage.port(a);
        RouterPort portB = stage.port(b);
        holdRouter(portA, r);
        for (int i = 0; i < 7; i++) {
            assertTrue(route(portA, new Req(r, null, SessionKeys.NONE)));
        }
        for (int i = 0; i < 8; i++) {
            assertTrue(route(portB, new Req(r, null, SessionKeys.NONE)));
        }
        assertFalse(route(portB, new Req(r, null, SessionKeys.NONE)), "16 slots taken: the 17th request is shed");
        assertEquals(1, stage.ringFullRejects());
        gateOpen.countDown();
        await(() -> portA.published() == 8 && portB.published() == 8 && stage.ringRemaining() == 16, "all 16 decided, ring free");
        assertTrue(route(portB, new Req(r, null, SessionKeys.NONE)));
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aLoopThatDoesNotDrainItsDecisionsIsRefusedBeforeItsInboxCouldOverflow(Runner runner) throws Exception {
        Rule r = start(runner, "router: {ring_size: 16}\n", 1);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        for (int i = 0; i < 16; i++) {
            assertTrue(route(port, new Req(r, null, SessionKeys.NONE)));
        }
        await(() -> port.published() == 16 && stage.ringRemaining() == 16, "16 decided, the ring empty again");
        assertFalse(route(port, new Req(r, null, SessionKeys.NONE)), "16 decisions wait in the inbox: refused");
        assertEquals(1, stage.inboxFullRejects());
        assertEquals(0, stage.ringFullRejects());
        deliver(loop, port, 16);
        assertTrue(route(port, new Req(r, null, SessionKeys.NONE)));
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void anExceptionInAPolicyAnswersThatRequestWithNoEndpointAndRoutingGoesOn(Runner runner) {
        Rule r = start(runner, "", 1);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        Req bad = new Req(r, "boom", SessionKeys.NONE);
        Req good = new Req(r, null, SessionKeys.NONE);
        assertTrue(route(port, bad));
        assertTrue(route(port, good));
        deliver(loop, port, 2);
        assertNull(bad.endpoint);
        assertEquals(RouterAgent.ROUTING_ERROR, bad.explanation);
        assertNotNull(good.endpoint);
        assertEquals(1, stage.handlerErrors());
    }

    /**
     * Regression for reliability review M14: completions used to be published into the routing ring with a blocking
     * publish, so a stalled routing thread with a full ring froze every I/O thread that finished a request. Now a
     * completion is a counter on the loop's port: it returns at once with the router stalled and the ring full, and
     * the load returns when the router runs again.
     */
    @ParameterizedTest
    @EnumSource(Runner.class)
    void completionsNeverWaitForTheRoutingThreadOrTheRing(Runner runner) throws Exception {
        Rule r = start(runner, "router: {ring_size: 16}\n", 2);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        List<Req> routed = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            Req q = new Req(r, null, SessionKeys.NONE);
            routed.add(q);
            assertTrue(route(port, q));
        }
        deliver(loop, port, 10);
        EndpointState a = r.endpoints().get(0);
        EndpointState b = r.endpoints().get(1);
        await(() -> a.outstanding() + b.outstanding() == 10, "load counted");
        TestLoop other = new TestLoop();
        RouterPort filler = stage.port(other);
        holdRouter(filler, r);
        while (route(filler, new Req(r, null, SessionKeys.NONE))) {
            // fill the ring behind the stalled router
        }
        assertEquals(0, stage.ringRemaining());
        assertTimeoutPreemptively(Duration.ofSeconds(2), () -> {
            for (Req q : routed) {
                port.complete(q.endpoint, Outcome.SUCCESS);
            }
        }, "completing must not wait for ring space");
        gateOpen.countDown();
        await(() -> filler.published() == 16, "the router ran again");
        await(() -> a.outstanding() + b.outstanding() == 16, "the 10 completions returned their load (16 filler requests remain)");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void completionCountersGrowPastTheFirstEndpointIds(Runner runner) {
        Rule r = start(runner, "", 150); // ids 0..149: the port's counters start with room for 64
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        List<Req> reqs = new ArrayList<>();
        for (int i = 0; i < 150; i++) {
            Req q = new Req(r, null, SessionKeys.NONE);
            reqs.add(q);
            assertTrue(route(port, q));
        }
        deliver(loop, port, 150);
        await(() -> r.endpoints().stream().allMatch(e -> e.outstanding() == 1), "one request on each of 150 endpoints");
        for (int i = reqs.size() - 1; i >= 0; i--) { // the highest id first: the counters grow once, then fit
            port.complete(reqs.get(i).endpoint, i % 2 == 0 ? Outcome.SUCCESS : Outcome.RELEASED);
        }
        assertTrue(route(port, new Req(r, null, SessionKeys.NONE))); // a batch start applies the completions
        await(() -> r.endpoints().stream().mapToInt(EndpointState::outstanding).sum() == 1, "all 150 returned");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void failuresReportedThroughThePortOpenTheBreakerAtTheNextBatch(Runner runner) throws Exception {
        Rule r = start(runner, "health: {breaker_failure_threshold: 2, breaker_open_ms: 1000}\n", 2);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        EndpointState a = r.endpoints().get(0);
        Req first = new Req(r, null, SessionKeys.NONE);
        Req second = new Req(r, null, SessionKeys.NONE);
        Req third = new Req(r, null, SessionKeys.NONE);
        route(port, first);
        route(port, second);
        route(port, third);
        deliver(loop, port, 3);
        assertSame(a, first.endpoint);
        assertSame(a, third.endpoint);
        port.complete(first.endpoint, Outcome.FAILURE);
        port.complete(third.endpoint, Outcome.FAILURE);
        port.complete(second.endpoint, Outcome.SUCCESS);
        List<Req> next = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Req q = new Req(r, null, SessionKeys.NONE);
            next.add(q);
            route(port, q);
        }
        deliver(loop, port, 7);
        assertEquals(Breaker.State.OPEN, a.breaker().state());
        for (Req q : next) {
            assertSame(r.endpoints().get(1), q.endpoint, "the open endpoint gets nothing");
        }
        clock.advance(1, TimeUnit.SECONDS);
        Req trial = new Req(r, null, SessionKeys.NONE);
        Req afterTrial = new Req(r, null, SessionKeys.NONE);
        route(port, trial);
        route(port, afterTrial);
        deliver(loop, port, 9);
        assertTrue(trial.endpoint == a || afterTrial.endpoint == a, "after the open period one trial goes to the endpoint");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void anOperatorDrainIsARingCommandAppliedBetweenTheRequestsPublishedAroundIt(Runner runner) throws Exception {
        Rule r = start(runner, "", 1);
        EndpointState ep = r.endpoints().get(0);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        holdRouter(port, r);
        Req before = new Req(r, null, SessionKeys.NONE);
        assertTrue(route(port, before));
        long remaining = stage.ringRemaining();
        CompletableFuture<Boolean> drained = CompletableFuture.supplyAsync(() -> stage.drain(ep, true));
        await(() -> stage.ringRemaining() == remaining - 1, "the drain command in the ring");
        assertFalse(ep.drained(), "the command waits its turn behind the held routing thread");
        assertFalse(drained.isDone(), "the operator's call returns once the command is applied, not before");
        Req after = new Req(r, null, SessionKeys.NONE);
        assertTrue(route(port, after));
        gateOpen.countDown();
        assertTrue(drained.get(LIMIT.toSeconds(), TimeUnit.SECONDS));
        assertTrue(ep.drained());
        deliver(loop, port, 3);
        assertSame(ep, before.endpoint, "published before the drain: routed to the endpoint");
        assertNull(after.endpoint, "published after the drain: the only endpoint takes no new request");
        assertEquals(Decider.NO_HEALTHY_ENDPOINT, after.explanation);

        assertTrue(stage.drain(ep, false));
        assertFalse(ep.drained());
        Req undrained = new Req(r, null, SessionKeys.NONE);
        assertTrue(route(port, undrained));
        deliver(loop, port, 4);
        assertSame(ep, undrained.endpoint);
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aDrainThatFindsTheRingFullIsRefusedAndChangesNothing(Runner runner) throws Exception {
        Rule r = start(runner, "router: {ring_size: 16}\n", 1);
        EndpointState ep = r.endpoints().get(0);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        holdRouter(port, r);
        for (int i = 0; i < 15; i++) {
            assertTrue(route(port, new Req(r, null, SessionKeys.NONE)));
        }
        assertEquals(0, stage.ringRemaining());
        assertFalse(stage.drain(ep, true), "no slot for the command: refused at once (the admin API answers 503)");
        gateOpen.countDown();
        deliver(loop, port, 16);
        assertFalse(ep.drained());
        assertTrue(stage.drain(ep, true), "room again: applied");
        assertTrue(ep.drained());
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aSwapKeepsSessionPinsAndCountersOfRulesThatRemain(Runner runner) throws Exception {
        GatewayConfig cfg = config("", RouteFixtures.rule("chat", "    policy: session\n    session: {mode: table, ttl_ms: 60000}\n", endpoints(3)));
        EndpointRegistry registry = new EndpointRegistry();
        stage = stages.start(runner, cfg.router(), RouteTable.build(cfg, registry, ctx -> RulePolicies.create(ctx, null, clock)), clock);
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        long alice = SessionKeys.hash("alice");
        Rule before = stage.table().ruleByName("chat");
        route(port, new Req(before, null, SessionKeys.hash("bob")));
        Req first = new Req(before, null, alice);
        route(port, first);
        deliver(loop, port, 2);

        // A changed rule (other TTL, other fallback): new policy objects, same name.
        GatewayConfig next = config("", RouteFixtures.rule("chat",
            "    policy: session\n    fallback: round_robin\n    session: {mode: table, ttl_ms: 120000}\n", endpoints(3)));
        RouteTable table = RouteTable.build(next, registry, ctx -> RulePolicies.create(ctx, null, clock), stage.table());
        stage.swap(table);
        Rule after = stage.table().ruleByName("chat");
        assertTrue(after != before, "the rule was rebuilt");
        Req again = new Req(after, null, alice);
        route(port, again);
        Req stale = new Req(before, null, alice); // resolved by an I/O thread before the swap
        route(port, stale);
        deliver(loop, port, 4);
        assertSame(first.endpoint, again.endpoint, "the conversation keeps its endpoint across the reload");
        assertSame(first.endpoint, stale.endpoint, "a request resolved against the old table is routed by the new rule");
        assertEquals(2, after.stats().tierCount(Tier.SESSION_NEW), "counters carried over");
        assertEquals(2, after.stats().tierCount(Tier.SESSION_PINNED));

        GatewayConfig removed = config("", RouteFixtures.rule("other", "    policy: round_robin\n", endpoints(1)));
        stage.swap(RouteTable.build(removed, registry, ctx -> RulePolicies.create(ctx, null, clock), stage.table()));
        Req orphan = new Req(after, null, alice);
        route(port, orphan);
        deliver(loop, port, 5);
        assertNull(orphan.endpoint);
        assertEquals(RouterAgent.RULE_REMOVED, orphan.explanation);
    }
}
