package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static io.kvgate.dataplane.route.RouteFixtures.endpoints;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import io.kvgate.dataplane.route.RouteFixtures.Runner;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Admission control inside the routing stage (its real runner in both modes of {@code router.thread}: its own thread,
 * or an event loop with the loop's duty-period task; an injected clock): a request whose endpoints
 * are all saturated waits instead of being refused, leaves by class when a completion frees capacity (applied on the
 * router's next turn, no wake-up per completion), is shed with its rule's reason at its deadline, and waiting requests
 * survive or are released by a configuration swap.
 */
class AdmissionStageTest {
    private static final Duration LIMIT = Duration.ofSeconds(10);
    private static final String ADMISSION = "    policy: least_outstanding\n    admission: {max_outstanding: 1, max_queue: 3, max_wait_ms: 1000}\n";

    private final ManualClock clock = new ManualClock();
    private final Loop loop = new Loop();
    private EndpointRegistry registry;
    private final RouteFixtures.Stages stages = new RouteFixtures.Stages();
    private RoutingStage stage;
    private RouterPort port;

    private static final class Loop implements Executor {
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

    private static final class Req implements RouteCallback {
        final Rule rule;
        final PriorityClass cls;
        final long tenant;
        EndpointState endpoint;
        String explanation;
        String shedMessage;
        int answers;
        long queuedAtNs = -1;
        long admittedAtNs = -1;

        Req(Rule rule, PriorityClass cls, long tenant) {
            this.rule = rule;
            this.cls = cls;
            this.tenant = tenant;
        }

        RouteInputs inputs(RouteInputs in) {
            return in.rule(rule).priority(cls).tenant(tenant);
        }

        @Override
        public void onDecision(Decision d) {
            if (d.waitedForAdmission()) {
                queuedAtNs = d.admissionQueuedAtNs();
                admittedAtNs = d.admissionAdmittedAtNs();
            }
            if (d.shed()) {
                shedMessage = d.explanation();
            } else {
                endpoint = d.endpoint();
                explanation = d.explanation();
            }
            answers++;
        }
    }

    /** Publishes {@code q} through {@code port} as an exchange does: its inputs into the port's reused value. */
    private static boolean route(RouterPort port, Req q) {
        return port.tryRoute(q.inputs(port.inputs()), q);
    }

    @AfterEach
    void close() {
        if (stage != null) {
            stage.close();
        }
        stages.close();
    }

    private Rule start(Runner runner, String settings, int endpointCount) {
        GatewayConfig cfg = config("", RouteFixtures.rule("r", settings, endpoints(endpointCount)));
        registry = new EndpointRegistry();
        stage = stages.start(runner, cfg.router(), RouteTable.build(cfg, registry, ctx -> Policies.create("least_outstanding")), clock);
        port = stage.port(loop);
        return stage.table().ruleByName("r");
    }

    private void await(BooleanSupplier condition, String what) {
        long deadline = System.nanoTime() + LIMIT.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out waiting for " + what);
            }
            loop.runAll();
            Thread.onSpinWait();
        }
        loop.runAll();
    }

    private Req route(Rule r, PriorityClass cls, long tenant) {
        Req q = new Req(r, cls, tenant);
        assertTrue(route(port, q));
        return q;
    }

    private long waiting(PriorityClass cls) {
        return stage.admission("r").depth(cls);
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void saturatedRequestsWaitAndLeaveByClassWhenACompletionFreesCapacity(Runner runner) {
        Rule r = start(runner, ADMISSION, 2);
        Req a = route(r, PriorityClass.BATCH, 1);
        Req b = route(r, PriorityClass.BATCH, 1);
        await(() -> a.answers == 1 && b.answers == 1, "two requests routed");
        assertNotNull(a.endpoint);
        assertNotNull(b.endpoint);
        assertTrue(a.endpoint != b.endpoint, "max_outstanding 1: the second request takes the other endpoint");

        Req batch = route(r, PriorityClass.BATCH, 2);
        Req standard = route(r, PriorityClass.STANDARD, 3);
        Req interactive = route(r, PriorityClass.INTERACTIVE, 4);
        await(() -> waiting(PriorityClass.BATCH) + waiting(PriorityClass.STANDARD) + waiting(PriorityClass.INTERACTIVE) == 3,
            "three requests waiting");
        assertEquals(0, batch.answers + standard.answers + interactive.answers, "both endpoints saturated: nobody is answered");

        long queuedAt = clock.nanoTime();
        clock.advance(7, TimeUnit.MILLISECONDS);
        port.complete(a.endpoint, Outcome.SUCCESS); // a counter: the router sees it on its next turn (duty period at most)
        await(() -> interactive.answers == 1, "the interactive request dispatched");
        assertEquals(a.endpoint, interactive.endpoint);
        // Its trace learns when admission control held it: from when it was queued to the turn that admitted it.
        assertEquals(queuedAt, interactive.queuedAtNs);
        assertEquals(queuedAt + TimeUnit.MILLISECONDS.toNanos(7), interactive.admittedAtNs);
        assertEquals(-1, a.admittedAtNs, "a request routed at once never waited");
        assertEquals(0, standard.answers + batch.answers);

        port.complete(b.endpoint, Outcome.SUCCESS);
        await(() -> standard.answers == 1, "the standard request dispatched next");
        assertEquals(b.endpoint, standard.endpoint);
        assertEquals(0, batch.answers);
        assertEquals(1, waiting(PriorityClass.BATCH));

        var registry = new io.prometheus.metrics.model.registry.PrometheusRegistry();
        stage.registerMetrics(registry);
        String m = io.kvgate.dataplane.metrics.MetricsExposition.text(registry);
        assertTrue(m.contains("kvgate_admission_queue_depth{class=\"batch\",rule=\"r\"} 1.0\n"), m);
        assertTrue(m.contains("kvgate_admission_wait_seconds_count{class=\"interactive\",rule=\"r\"} 1\n"), m);
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aWaitingRequestIsShedAtItsDeadlineOnTheInjectedClockAndAFullQueueShedsBatchFirst(Runner runner) {
        Rule r = start(runner, ADMISSION, 1);
        Req busy = route(r, PriorityClass.STANDARD, 1);
        await(() -> busy.answers == 1, "the endpoint taken");
        Req b1 = route(r, PriorityClass.BATCH, 1);
        Req b2 = route(r, PriorityClass.BATCH, 2);
        Req s1 = route(r, PriorityClass.STANDARD, 3);
        await(() -> waiting(PriorityClass.BATCH) == 2 && waiting(PriorityClass.STANDARD) == 1, "queue full");
        Req i1 = route(r, PriorityClass.INTERACTIVE, 4); // full: displaces the newest batch request
        await(() -> b2.answers == 1, "a batch request shed to make room");
        assertNull(b2.endpoint);
        assertTrue(b2.shedMessage.contains("admission queue is full"), b2.shedMessage);
        assertEquals(0, b1.answers + s1.answers + i1.answers);

        clock.advance(979, TimeUnit.MILLISECONDS); // deadline 21 ms away: beyond the slack of two duty periods
        long turns = stage.batches();
        await(() -> stage.batches() >= turns + 3, "routing turns at 979 ms");
        assertEquals(0, b1.answers + s1.answers + i1.answers, "not yet due");

        clock.advance(2, TimeUnit.MILLISECONDS); // 981 ms: the next turn could come after the deadline, so this one sheds
        await(() -> b1.answers == 1 && s1.answers == 1 && i1.answers == 1, "the three shed at their deadline");
        for (Req q : new Req[] {b1, s1, i1}) {
            assertNull(q.endpoint);
            assertTrue(q.shedMessage.contains("admission.max_wait_ms (1000 ms)"), q.shedMessage);
        }
        assertEquals(0, waiting(PriorityClass.BATCH) + waiting(PriorityClass.STANDARD) + waiting(PriorityClass.INTERACTIVE));
        Admission adm = stage.admission("r");
        assertEquals(2, adm.shedCount(PriorityClass.BATCH));
        assertEquals(1, adm.shedCount(PriorityClass.INTERACTIVE));
        assertEquals(0, busy.endpoint.outstanding() - 1, "shed requests never counted load");
        assertEquals(1, adm.shedCount(PriorityClass.STANDARD));
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void withoutAThresholdAndWithNoHealthyEndpointNothingWaits(Runner runner) {
        Rule plain = start(runner, "    policy: least_outstanding\n", 1);
        assertNull(stage.admission("r"));
        for (int i = 0; i < 5; i++) {
            Req q = route(plain, PriorityClass.BATCH, 1);
            await(() -> q.answers == 1, "routed at once");
            assertNotNull(q.endpoint, "no admission control: load is never a reason to hold a request");
        }
        stage.close();
        stage = null;

        Rule r = start(runner, ADMISSION, 1);
        assertTrue(stage.drain(r.endpoints().get(0), true));
        Req q = route(r, PriorityClass.BATCH, 1);
        await(() -> q.answers == 1, "answered at once");
        assertNull(q.endpoint);
        assertNull(q.shedMessage, "no endpoint can take it at all: a 503, not a wait or a 429");
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void aSwapKeepsTheWaitingRequestsAndASwapThatRemovesAdmissionRoutesThem(Runner runner) {
        Rule r = start(runner, ADMISSION, 1);
        Req busy = route(r, PriorityClass.STANDARD, 1);
        await(() -> busy.answers == 1, "the endpoint taken");
        Req w = route(r, PriorityClass.BATCH, 2);
        await(() -> waiting(PriorityClass.BATCH) == 1, "one waiting");

        GatewayConfig bigger = config("", RouteFixtures.rule("r", ADMISSION.replace("max_queue: 3", "max_queue: 5"), endpoints(1)));
        stage.swap(RouteTable.build(bigger, registry, ctx -> Policies.create("least_outstanding"), stage.table()));
        assertEquals(1, waiting(PriorityClass.BATCH), "the same admission control, its queue intact");
        assertEquals(0, w.answers);

        GatewayConfig off = config("", RouteFixtures.rule("r", "    policy: least_outstanding\n", endpoints(1)));
        stage.swap(RouteTable.build(off, registry, ctx -> Policies.create("least_outstanding"), stage.table()));
        await(() -> w.answers == 1, "released by the swap");
        assertNotNull(w.endpoint, "no threshold holds it any more: routed");
        assertNull(stage.admission("r"));
    }

    @ParameterizedTest
    @EnumSource(Runner.class)
    void theInteractiveReserveKeepsHeadroomThatOnlyInteractiveRequestsUse(Runner runner) {
        Rule r = start(runner, "    policy: least_outstanding\n    admission: {max_outstanding: 2, interactive_reserve: 1, max_wait_ms: 1000}\n", 1);
        Req batch = route(r, PriorityClass.BATCH, 1);
        await(() -> batch.answers == 1, "the first batch request routed");
        assertNotNull(batch.endpoint);
        Req standard = route(r, PriorityClass.STANDARD, 2);
        await(() -> waiting(PriorityClass.STANDARD) == 1, "a standard request waits: one slot is kept for interactive");
        Req interactive = route(r, PriorityClass.INTERACTIVE, 3);
        await(() -> interactive.answers == 1, "the interactive request takes the reserved slot at once");
        assertNotNull(interactive.endpoint);
        assertEquals(2, interactive.endpoint.outstanding());
        assertEquals(0, standard.answers);
        port.complete(batch.endpoint, Outcome.SUCCESS);
        long turns = stage.batches();
        await(() -> stage.batches() >= turns + 3, "routing turns after the completion");
        assertEquals(0, standard.answers, "one request in flight is all a standard request may find: the reserve stays free");
        port.complete(interactive.endpoint, Outcome.SUCCESS);
        await(() -> standard.answers == 1, "the standard request goes when the endpoint is below max_outstanding - reserve");
        assertNotNull(standard.endpoint);
    }
}
