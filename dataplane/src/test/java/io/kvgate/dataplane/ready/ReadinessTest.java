package io.kvgate.dataplane.ready;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.Policies;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RoutingStage;
import io.kvgate.ingest.zmq.SubscriberStatus;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * Readiness rules on an injected clock. The fleet's ({@code /ready/engines}): model listing per pool, drained
 * endpoints, KV subscribers and warm-up. The gateway's own ({@code /ready}): started, not shutting down, not draining,
 * every kv_exact rule warm once (an engine lost later is the fleet's problem, not a reason to leave rotation).
 */
class ReadinessTest {
    private final ManualClock clock = new ManualClock();
    private final EndpointRegistry registry = new EndpointRegistry();
    private final List<SubscriberStatus> subs = new CopyOnWriteArrayList<>();
    private final AtomicBoolean draining = new AtomicBoolean();

    private RouteTable table(String yaml) throws Exception {
        return RouteTable.build(GatewayConfig.parse(yaml), registry, ctx -> Policies.create("least_outstanding"));
    }

    private static SubscriberStatus sub(int endpointId, int rank, boolean connected) {
        return new SubscriberStatus(endpointId, rank, "tcp://x", connected, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    }

    @Test
    void waitsForAHealthyEndpointListingEachModelThenForWarmKvSubscribers() throws Exception {
        RouteTable t = table("""
            rules:
              - name: chat
                models: [qwen3, qwen3-alias]
                policy: kv_exact
                kv:
                  warmup_ms: 5000
                endpoints:
                  - url: http://127.0.0.1:9001
                    kv_events: tcp://127.0.0.1:5557
                    dp_ranks: 2
                  - url: http://127.0.0.1:9002
            """);
        Readiness r = new Readiness(() -> t, () -> subs, draining::get, clock);
        Readiness.Report rep = r.evaluateEngines();
        assertFalse(rep.ready());
        assertEquals("rule chat: no healthy endpoint lists model 'qwen3' in /v1/models "
            + "(127.0.0.1:9001: not probed yet; 127.0.0.1:9002: not probed yet)", rep.waitingFor().get(0));
        r.recordModels("127.0.0.1:9001", Set.of("qwen3"), null);
        r.recordModels("127.0.0.1:9002", null, "GET /v1/models answered 404");
        rep = r.evaluateEngines();
        assertEquals(List.of("rule chat: no healthy endpoint lists model 'qwen3-alias' in /v1/models "
            + "(127.0.0.1:9001: lists [qwen3]; 127.0.0.1:9002: GET /v1/models answered 404)",
            "rule chat: KV subscribers not connected: 127.0.0.1:9001 rank 0, 127.0.0.1:9001 rank 1"), rep.waitingFor());
        r.recordModels("127.0.0.1:9002", Set.of("qwen3-alias", "other"), null);
        int id = registry.get("127.0.0.1:9001").id();
        subs.add(sub(id, 0, true));
        subs.add(sub(id, 1, false));
        assertEquals(List.of("rule chat: KV subscribers not connected: 127.0.0.1:9001 rank 1"), r.evaluateEngines().waitingFor());
        clock.advance(3, TimeUnit.SECONDS);
        subs.set(1, sub(id, 1, true)); // the last subscriber connects now: warm-up counts from here
        assertEquals(List.of("rule chat: KV warm-up, 5000 ms left of kv.warmup_ms 5000"), r.evaluateEngines().waitingFor());
        clock.advance(4999, TimeUnit.MILLISECONDS);
        assertFalse(r.evaluateEngines().ready());
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertTrue(r.evaluateEngines().ready(), r.evaluateEngines().waitingFor().toString());
        // A subscriber that drops restarts the warm-up once it is back.
        subs.set(0, sub(id, 0, false));
        assertFalse(r.evaluateEngines().ready());
        subs.set(0, sub(id, 0, true));
        assertEquals(List.of("rule chat: KV warm-up, 5000 ms left of kv.warmup_ms 5000"), r.evaluateEngines().waitingFor());
        clock.advance(5, TimeUnit.SECONDS);
        assertTrue(r.evaluateEngines().ready());
        draining.set(true);
        assertTrue(r.evaluateEngines().ready(), "draining is the gateway's own state, not the fleet's");
        assertEquals(List.of("the gateway is draining (undo: ctl undrain)"), r.evaluate().waitingFor());
    }

    @Test
    void theGatewaysOwnReadinessWaitsForStartAndWarmKvOnceAndEndsWithShutdown() throws Exception {
        RouteTable t = table("""
            rules:
              - name: chat
                models: [qwen3]
                policy: kv_exact
                kv:
                  warmup_ms: 1000
                endpoints:
                  - url: http://127.0.0.1:9201
                    kv_events: tcp://127.0.0.1:5557
              - name: plain
                models: [other]
                endpoints:
                  - url: http://127.0.0.1:9202
            """);
        AtomicBoolean started = new AtomicBoolean();
        AtomicBoolean shuttingDown = new AtomicBoolean();
        Readiness r = new Readiness(() -> t, () -> subs, draining::get, shuttingDown::get, started::get, clock);
        assertEquals(List.of("the gateway is starting (configuration not applied or listeners not bound yet)",
            "rule chat: KV subscribers not connected: 127.0.0.1:9201 rank 0"), r.evaluate().waitingFor());
        started.set(true);
        int id = registry.get("127.0.0.1:9201").id();
        subs.add(sub(id, 0, true));
        assertEquals(List.of("rule chat: KV warm-up, 1000 ms left of kv.warmup_ms 1000"), r.evaluate().waitingFor());
        clock.advance(1000, TimeUnit.MILLISECONDS);
        Readiness.Report rep = r.evaluate();
        assertTrue(rep.ready(), rep.waitingFor().toString());
        assertFalse(r.evaluateEngines().ready(), "no engine lists the models: the fleet is not ready, the gateway is");
        // The engine goes away: the fleet answer says so, the gateway stays in rotation and answers 503 itself.
        subs.set(0, sub(id, 0, false));
        assertTrue(r.evaluate().ready(), r.evaluate().waitingFor().toString());
        assertTrue(r.evaluateEngines().waitingFor().contains("rule chat: KV subscribers not connected: 127.0.0.1:9201 rank 0"));
        shuttingDown.set(true);
        assertEquals(List.of("the gateway is shutting down (serving until shutdown.drain_delay_ms ends, then draining)"),
            r.evaluate().waitingFor());
    }

    @Test
    void drainedEndpointsDoNotCountAndPdNeedsBothPools() throws Exception {
        RouteTable t = table("""
            rules:
              - name: pd
                models: [m]
                policy: pd
                pd:
                  prefill_policy: least_outstanding
                endpoints:
                  - url: http://127.0.0.1:9101
                    role: prefill
                  - url: http://127.0.0.1:9102
                    role: decode
            """);
        Readiness r = new Readiness(() -> t, () -> subs, draining::get, clock);
        r.recordModels("127.0.0.1:9101", Set.of("m"), null);
        assertEquals(List.of("rule pd: no healthy endpoint in the decode pool lists model 'm' in /v1/models "
            + "(127.0.0.1:9102: not probed yet)"), r.evaluateEngines().waitingFor());
        r.recordModels("127.0.0.1:9102", Set.of("m"), null);
        assertTrue(r.evaluateEngines().ready());
        try (RoutingStage router = new RoutingStage(t.config().router(), t, clock)) {
            assertTrue(router.drain(registry.get("127.0.0.1:9102"), true)); // operator drain: a command through the router
        }
        assertEquals(List.of("rule pd: no healthy endpoint in the decode pool lists model 'm' in /v1/models "
            + "(127.0.0.1:9102: drained)"), r.evaluateEngines().waitingFor());
    }
}
