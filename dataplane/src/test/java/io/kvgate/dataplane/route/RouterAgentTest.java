package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.RingBuffer;
import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.metrics.StageTimers;
import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The routing agent's duty-cycle contract, driven by hand with no runner and an injected duty clock: {@code doWork}
 * returns 0 and touches nothing when idle, counts what it decided, runs housekeeping when due (a batch, a swap, a
 * probe verdict, one duty period on its clock); {@code onClose} releases what it holds. The runners themselves are
 * covered by {@code RoutingStageTest} (AgentRunner) and {@code IoRunnerTest} (AgentInvoker on an event loop).
 */
class RouterAgentTest {
    private static final String ADMISSION = "    policy: least_outstanding\n    admission: {max_outstanding: 1, max_queue: 3, max_wait_ms: 1000}\n";

    private final ManualClock clock = new ManualClock();
    private final ManualClock dutyClock = new ManualClock();
    private final Loop loop = new Loop();
    private RingBuffer<RouteEvent> ring;
    private RouterPort port;
    private RouterAgent agent;

    /** An executor the test drains itself. */
    private static final class Loop implements Executor {
        final ArrayDeque<Runnable> tasks = new ArrayDeque<>();

        @Override
        public void execute(Runnable task) {
            tasks.add(task);
        }

        void runAll() {
            Runnable r;
            while ((r = tasks.poll()) != null) {
                r.run();
            }
        }
    }

    private static final class Req implements RouteCallback {
        EndpointState endpoint;
        String explanation;
        int answers;

        @Override
        public void onDecision(Decision d) {
            endpoint = d.endpoint();
            explanation = d.explanation();
            answers++;
        }
    }

    private Rule start(String settings, int endpointCount) {
        GatewayConfig cfg = config("", RouteFixtures.rule("r", settings, endpoints(endpointCount)));
        RouteTable table = RouteTable.build(cfg, new EndpointRegistry(), ctx -> Policies.create("least_outstanding"));
        ring = RingBuffer.createMultiProducer(RouteEvent::new, 64, new BusySpinWaitStrategy());
        RouterPort[][] ports = {new RouterPort[0]};
        agent = new RouterAgent(ring, table, clock, dutyClock, new StageTimers(), false, () -> ports[0]);
        port = new RouterPort(null, loop, 64); // no stage: this test publishes into the ring itself
        ports[0] = new RouterPort[] {port};
        return agent.table().ruleByName("r");
    }

    /** What {@code RoutingStage.publish} does for a request, without a runner to wake. */
    private Req publish(Rule r) {
        Req q = new Req();
        RouteInputs in = new RouteInputs().rule(r);
        assertTrue(ring.tryPublishEvent((e, seq) -> e.copyFrom(in, q, port)));
        return q;
    }

    @Test
    void idleCyclesReturnZeroAndHousekeepingComesOncePerDutyPeriodOfItsClock() {
        start("    policy: least_outstanding\n", 2);
        long batches = agent.batches();
        assertEquals(0, agent.doWork(), "nothing published, nothing pending, the period not over");
        assertEquals(0, agent.doWork());
        assertEquals(batches, agent.batches(), "an idle cycle runs no housekeeping");
        assertEquals(RouterAgent.DUTY_PERIOD_NS, agent.nanosUntilHousekeeping());

        dutyClock.advanceNs(RouterAgent.DUTY_PERIOD_NS - 1);
        assertEquals(0, agent.doWork());
        assertEquals(1, agent.nanosUntilHousekeeping(), "what an idle runner may sleep");
        dutyClock.advanceNs(1);
        assertEquals(1, agent.doWork(), "one duty period on the agent's clock: housekeeping, counted as work");
        assertEquals(batches + 1, agent.batches());
        assertEquals(0, agent.doWork(), "and idle again for the next period");
        assertEquals(batches + 1, agent.batches());
        assertTrue(loop.tasks.isEmpty(), "nothing to hand back");
    }

    @Test
    void aCycleDecidesWhatWasPublishedAfterItsHousekeepingAndHandsItBackInOneDrain() {
        Rule r = start("    policy: least_outstanding\n", 2);
        Req a = publish(r);
        Req b = publish(r);
        Req c = publish(r);
        long batches = agent.batches();
        assertEquals(1 + 3, agent.doWork(), "the batch's housekeeping and its three requests");
        assertEquals(batches + 1, agent.batches());
        assertEquals(3, agent.routed());
        assertEquals(1, loop.tasks.size(), "one drain task for the port's three decisions");
        assertEquals(0, a.answers + b.answers + c.answers, "delivered on the port's executor, not in the cycle");
        loop.runAll();
        assertEquals(1, a.answers);
        assertEquals(1, b.answers);
        assertEquals(1, c.answers);
        assertNotNull(a.endpoint);
        assertTrue(a.endpoint != b.endpoint, "least outstanding spreads the batch");
        assertEquals(0, agent.doWork(), "the ring is empty again");
    }

    @Test
    void aSwapOrAProbeVerdictMakesHousekeepingDueWithoutARequest() {
        start("    policy: least_outstanding\n", 2);
        GatewayConfig cfg = config("", RouteFixtures.rule("r2", "    policy: round_robin\n", endpoints(3)));
        RouteTable next = RouteTable.build(cfg, new EndpointRegistry(), ctx -> Policies.create("round_robin"));
        agent.offerSwap(next);
        assertTrue(agent.swapPending(next));
        assertEquals(1, agent.doWork());
        assertFalse(agent.swapPending(next));
        assertSame(next, agent.table());
        assertNull(agent.table().ruleByName("r"));

        assertEquals(0, agent.doWork());
        agent.probeReported();
        assertEquals(1, agent.doWork(), "a probe verdict is applied at once");
        assertEquals(0, agent.doWork());
        agent.housekeepNextCycle();
        assertEquals(1, agent.doWork(), "the runner asked (io mode's loop-driven cycles)");
    }

    @Test
    void aRequestForARuleASwapRemovedIsAnsweredRuleRemoved() {
        Rule r = start("    policy: least_outstanding\n", 1);
        Req q = publish(r);
        GatewayConfig cfg = config("", RouteFixtures.rule("other", "    policy: round_robin\n", endpoints(1)));
        agent.offerSwap(RouteTable.build(cfg, new EndpointRegistry(), ctx -> Policies.create("round_robin")));
        assertEquals(1 + 1, agent.doWork(), "the swap is applied before the batch's request is decided");
        loop.runAll();
        assertEquals(1, q.answers);
        assertNull(q.endpoint);
        assertEquals(RouterAgent.RULE_REMOVED, q.explanation);
        assertEquals(1, agent.unroutable());
    }

    @Test
    void onCloseDecidesTheBacklogAnswersRequestsWaitingForAdmissionAndRunsNoMoreCycles() {
        Rule r = start(ADMISSION, 1);
        Req first = publish(r);
        Req waiting = publish(r);
        assertEquals(1 + 2, agent.doWork());
        loop.runAll();
        assertNotNull(first.endpoint, "max_outstanding 1: the first request takes the endpoint");
        assertEquals(0, waiting.answers, "the second waits for admission");
        assertEquals(1, agent.admissionView()[0].waiting());

        Req backlog = publish(r); // in the ring when the runner stops
        agent.onClose();
        loop.runAll();
        assertEquals(1, waiting.answers);
        assertNull(waiting.endpoint);
        assertEquals(RouterAgent.CLOSED, waiting.explanation);
        assertEquals(1, backlog.answers, "a request published before the close is answered, as the Disruptor's shutdown did");
        assertEquals(RouterAgent.CLOSED, backlog.explanation, "it had to wait for admission too");
        assertEquals(0, agent.admissionView()[0].waiting(), "nothing held any more");

        Req late = publish(r);
        dutyClock.advance(1, TimeUnit.SECONDS);
        assertEquals(0, agent.doWork(), "a closed agent runs no cycle");
        loop.runAll();
        assertEquals(0, late.answers);
    }

    @Test
    void aDecisionThatThrowsIsAnsweredWithoutAnEndpointAndTheCycleGoesOn() {
        GatewayConfig cfg = config("", RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(2)));
        RoutingPolicy boom = (c, e, now, why) -> {
            throw new IllegalStateException("policy bug");
        };
        RouteTable table = RouteTable.build(cfg, new EndpointRegistry(), ctx -> boom);
        ring = RingBuffer.createMultiProducer(RouteEvent::new, 64, new BusySpinWaitStrategy());
        port = new RouterPort(null, loop, 64);
        RouterPort[] ports = {port};
        agent = new RouterAgent(ring, table, clock, dutyClock, new StageTimers(), false, () -> ports);
        Rule r = agent.table().ruleByName("r");
        Req a = publish(r);
        Req b = publish(r);
        assertEquals(1 + 2, agent.doWork(), "never throws");
        loop.runAll();
        assertEquals(RouterAgent.ROUTING_ERROR, a.explanation);
        assertEquals(RouterAgent.ROUTING_ERROR, b.explanation);
        assertEquals(2, agent.handlerErrors());
    }

    @Test
    void theDedicatedRunnerIsAnAgentRunnerThreadNamedByTheAgentAndEndsOnClose() throws InterruptedException {
        GatewayConfig cfg = config("", RouteFixtures.rule("r", "    policy: round_robin\n", endpoints(1)));
        RoutingStage stage = new RoutingStage(cfg.router(), RouteTable.build(cfg, new EndpointRegistry(), ctx -> Policies.create("round_robin")), clock);
        Thread t = stage.routingThread();
        assertNotNull(t);
        assertEquals(RouterAgent.ROLE_NAME, t.getName());
        assertTrue(t.isDaemon());
        stage.close(); // the runner's loop has ended when this returns; the thread itself exits right after
        t.join(10_000);
        assertFalse(t.isAlive(), "the runner thread ends on close");
    }
}
