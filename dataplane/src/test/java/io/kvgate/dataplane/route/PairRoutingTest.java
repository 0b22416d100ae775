package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.RouteFixtures.Runner;
import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * ROUTE_PAIR through the real routing stage, in both runner modes: one publish chooses a P/D request's prefill and
 * decode endpoints (SGLang's concurrent legs), both counted in the same decision, or neither when either pool has no
 * endpoint; admission gates the pair once, on the prefill pool.
 */
class PairRoutingTest {
    private static final long LIMIT_NS = 10_000_000_000L;

    private final ManualClock clock = new ManualClock();
    private final RouteFixtures.Stages stages = new RouteFixtures.Stages();
    private RoutingStage stage;

    /** An executor the test drains itself (the request's event loop). */
    private static final class TestLoop implements Executor {
        private final ArrayDeque<Runnable> tasks = new ArrayDeque<>();

        @Override
        public synchronized void execute(Runnable task) {
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

    /** Keeps what the decision said (the Decision itself is valid only during the callback). */
    private static final class Pair implements RouteCallback {
        int answers;
        EndpointState prefill;
        EndpointState decode;
        Role unserved;
        String explanation;
        boolean shed;

        @Override
        public void onDecision(Decision d) {
            answers++;
            prefill = d.endpoint();
            decode = d.decodeEndpoint();
            unserved = d.unserved();
            explanation = d.explanation();
            shed = d.shed();
        }
    }

    @AfterEach
    void close() {
        if (stage != null) {
            stage.close();
        }
        stages.close();
    }

    private Rule start(Runner runner, String settings) {
        String[] eps = {"url: http://127.0.0.1:20000\n        role: prefill", "url: http://127.0.0.1:20001\n        role: prefill",
            "url: http://127.0.0.1:20002\n        role: decode", "url: http://127.0.0.1:20003\n        role: decode"};
        GatewayConfig cfg = config("", RouteFixtures.rule("p", "    policy: pd\n" + settings, eps));
        stage = stages.start(runner, cfg.router(), RouteFixtures.table(cfg, null, clock), clock);
        return stage.table().ruleByName("p");
    }

    private Pair routePair(RouterPort port, TestLoop loop, Rule rule, boolean explain) {
        Pair p = new Pair();
        assertTrue(port.tryRoutePair(port.inputs().rule(rule).role(Role.PREFILL).explain(explain), p));
        long deadline = System.nanoTime() + LIMIT_NS;
        while (p.answers == 0) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("no pair decision within 10 s");
            }
            loop.runAll();
            Thread.onSpinWait();
        }
        assertEquals(1, p.answers);
        return p;
    }

    private static int outstanding(EndpointState[] pool) {
        int n = 0;
        for (EndpointState ep : pool) {
            n += ep.outstanding();
        }
        return n;
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void onePublishChoosesAPrefillAndADecodeAndCountsBoth(Runner runner) {
        Rule r = start(runner, "");
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        Pair p = routePair(port, loop, r, false);
        assertNotNull(p.prefill);
        assertNotNull(p.decode);
        assertEquals("prefill", p.prefill.config().role());
        assertEquals("decode", p.decode.config().role());
        assertNull(p.unserved);
        assertEquals(1, p.prefill.outstanding(), "the prefill counted by the decision itself");
        assertEquals(1, p.decode.outstanding(), "and its decode in the same decision");
        assertEquals(2, stage.routed());
        assertEquals(1, port.delivered(), "one decision delivered for both");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aDecodePoolWithoutEndpointRefusesThePairAndCountsNoPrefill(Runner runner) {
        Rule r = start(runner, "");
        for (EndpointState d : r.candidates(Role.DECODE)) {
            assertTrue(stage.drain(d, true));
        }
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        Pair p = routePair(port, loop, r, false);
        assertNull(p.prefill);
        assertNull(p.decode);
        assertSame(Role.DECODE, p.unserved);
        assertEquals(Decider.NO_HEALTHY_DECODE, p.explanation);
        assertEquals(0, outstanding(r.candidates(Role.PREFILL)), "either refusal fails both: no prefill was charged");
        assertEquals(0, stage.routed());
        assertEquals(1, stage.unroutable());
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aPrefillPoolWithoutEndpointRefusesThePair(Runner runner) {
        Rule r = start(runner, "");
        for (EndpointState d : r.candidates(Role.PREFILL)) {
            assertTrue(stage.drain(d, true));
        }
        TestLoop loop = new TestLoop();
        Pair p = routePair(stage.port(loop), loop, r, false);
        assertNull(p.prefill);
        assertSame(Role.PREFILL, p.unserved);
        assertEquals(Decider.NO_HEALTHY_PREFILL, p.explanation);
        assertEquals(0, outstanding(r.candidates(Role.DECODE)), "the decode pool was not even asked");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void anExplainedPairNamesBothChoices(Runner runner) {
        Rule r = start(runner, "");
        TestLoop loop = new TestLoop();
        Pair p = routePair(stage.port(loop), loop, r, true);
        assertNotNull(p.decode);
        assertTrue(p.explanation.startsWith("prefill: ") && p.explanation.contains("decode: "), p.explanation);
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void admissionGatesThePairOnItsPrefillPoolOnce(Runner runner) {
        Rule r = start(runner, "    admission: {max_outstanding: 1, max_queue: 0}\n");
        TestLoop loop = new TestLoop();
        RouterPort port = stage.port(loop);
        Pair first = routePair(port, loop, r, false);
        Pair second = routePair(port, loop, r, false);
        Pair third = routePair(port, loop, r, false);
        assertNotNull(first.decode);
        assertNotNull(second.decode, "the other prefill endpoint still had room");
        assertTrue(third.shed, "both prefills at max_outstanding and no queue: shed (429)");
        assertNull(third.prefill);
        assertEquals(2, outstanding(r.candidates(Role.DECODE)), "the shed pair charged no decode either");
    }
}
