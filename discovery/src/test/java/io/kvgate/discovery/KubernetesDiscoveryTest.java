package io.kvgate.discovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.kvgate.control.config.GatewayConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Kubernetes discovery against fabric8's mock API server in CRUD mode: pods turning ready, unready and terminating,
 * EndpointSlices changing, InferencePools re-selecting, the API server restarting. Each step waits for the set the
 * informer's event produces (the sink's queue, bounded), never for time to pass.
 */
@Tag("system")
class KubernetesDiscoveryTest {
    private static final long AWAIT_MS = 20_000;
    private KubeFixture kube;
    private Discovery discovery;
    private final BlockingQueue<List<DiscoveredEndpoint>> reports = new LinkedBlockingQueue<>();

    @BeforeEach
    void start() {
        kube = new KubeFixture();
    }

    @AfterEach
    void stop() {
        if (discovery != null) {
            discovery.close();
        }
        kube.close();
    }

    private void discover(String rule) throws Exception {
        discovery = new Discovery((r, found) -> reports.add(found), new Discovery.Clients(kube::newClient, null));
        discovery.sync(GatewayConfig.parse(rule));
    }

    /** Endpoint sets as "url" or "url (terminating)" or "url kv=... role=... boot=...", sorted as reported. */
    private static List<String> show(List<DiscoveredEndpoint> found) {
        List<String> out = new ArrayList<>();
        for (DiscoveredEndpoint e : found) {
            var c = e.config();
            out.add(c.url() + (c.kvEvents() == null ? "" : " kv=" + c.kvEvents()) + (c.role() == null ? "" : " role=" + c.role())
                + (c.bootstrapPort() > 0 ? " boot=" + c.bootstrapPort() : "") + (e.terminating() ? " (terminating)" : ""));
        }
        return out;
    }

    /** Waits for the report that equals {@code expected}; earlier (intermediate) reports are skipped. */
    private void await(String... expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(AWAIT_MS);
        List<String> last = null;
        while (System.nanoTime() < deadline) {
            List<DiscoveredEndpoint> r = reports.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (r == null) {
                break;
            }
            last = show(r);
            if (last.equals(List.of(expected))) {
                return;
            }
        }
        fail("no report of " + List.of(expected) + " within " + AWAIT_MS + " ms; last: " + last);
    }

    private static final String PODS = """
        rules:
          - name: chat
            models: [m]
            discovery: {type: kubernetes, namespace: llm, selector: {app: vllm}, ports: [http], kv_events_port: kv-events}
        """;

    @Test
    void podsAreRoutedWhileReadyDrainedWhileTerminatingAndGoneWhenDeleted() throws Exception {
        discover(PODS);
        await(); // the first list: nothing yet
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
        kube.create(KubeFixture.pod("other", "10.0.0.9", true, Map.of("app", "sglang"), "http", 8000));
        kube.create(KubeFixture.pod("b", "10.0.0.2", false, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        kube.ready("b", true);
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557", "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
        kube.terminating("a");
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557 (terminating)", "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
        kube.delete("a");
        await("http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
        kube.ready("b", false);
        await();
    }

    @Test
    void a410GoneErrorEventInsideAnOpenWatchIsFollowedByAFreshListThatConverges() throws Exception {
        discover(PODS);
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000));
        await("http://10.0.0.1:8000");
        // The open watch stops hearing of changes (its events compacted away), pod b appears meanwhile, then the
        // watch gets an ERROR event with a 410 Gone Status: only a fresh list can see b.
        List<Object> watches = kube.detachOpenWatches();
        assertTrue(!watches.isEmpty(), "the informer's watch is open");
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm"), "http", 8000));
        kube.expireInsideWatches(watches);
        await("http://10.0.0.1:8000", "http://10.0.0.2:8000");
        // And the new watch follows what changes after it.
        kube.delete("a");
        await("http://10.0.0.2:8000");
        assertEquals(0.0, discovery.metrics().errorCount("chat", "kubernetes"), "a 410 is followed by a list, not an error");
    }

    @Test
    void theMetricsFollowEventsEndpointsAndApplies() throws Exception {
        discover(PODS);
        await();
        DiscoveryMetrics m = discovery.metrics();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000));
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm"), "http", 8000));
        await("http://10.0.0.1:8000", "http://10.0.0.2:8000");
        kube.terminating("a");
        await("http://10.0.0.1:8000 (terminating)", "http://10.0.0.2:8000");
        awaitMetric(() -> m.endpointCount("chat", "kubernetes", "terminating") == 1.0, "one terminating");
        assertEquals(1.0, m.endpointCount("chat", "kubernetes", "ready"));
        assertEquals(2.0, m.endpointCount("chat", "kubernetes", "serving"));
        assertEquals(1.0, m.eventCount("chat", "kubernetes", "list"), "the first list");
        assertTrue(m.eventCount("chat", "kubernetes", "add") >= 2, "two pods added");
        assertTrue(m.eventCount("chat", "kubernetes", "update") >= 1, "a pod turned terminating");
        assertTrue(m.applyCount("chat", "kubernetes") >= 3, "the empty set, two pods, one terminating");
        assertEquals(0.0, m.errorCount("chat", "kubernetes"));
    }

    @Test
    void theApplyTimeRunsFromTheSourcesReportToTheAppliedSetOnTheInjectedClock() throws Exception {
        // The clock moves only inside the sink (as a reload takes time): every apply is timed at exactly 7 ms.
        java.util.concurrent.atomic.AtomicLong now = new java.util.concurrent.atomic.AtomicLong(1_000_000);
        discovery = new Discovery((r, found) -> {
            now.addAndGet(7_000_000);
            reports.add(found);
        }, new Discovery.Clients(kube::newClient, null), DiscoveryMetrics.unregistered(), now::get);
        discovery.sync(GatewayConfig.parse(PODS));
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000));
        await("http://10.0.0.1:8000");
        DiscoveryMetrics m = discovery.metrics();
        awaitMetric(() -> m.applyCount("chat", "kubernetes") == 2, "two applies timed");
        assertEquals(0.014, m.applySumSeconds("chat", "kubernetes"), 1e-9);
    }

    /** The metrics are set on the report thread after the sink's report: wait for them (bounded). */
    private static void awaitMetric(java.util.function.BooleanSupplier ok, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(AWAIT_MS);
        while (!ok.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within " + AWAIT_MS + " ms: " + what);
            }
            Thread.sleep(10);
        }
    }

    @Test
    void annotationsWinOverConfiguredPortsAndSeveralPortsAreDpRanks() throws Exception {
        discover("""
            rules:
              - name: dp
                models: [m]
                discovery: {type: kubernetes, namespace: llm, selector: {app: vllm}, ports: [rank0, 8101], kv_events_port: 5557}
            """);
        await();
        var p = KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "rank0", 8100, "rank1", 8101);
        p.getMetadata().setAnnotations(Map.of("kvgate.io/kv-events-port", "6000"));
        kube.create(p);
        await("http://10.0.0.1:8100 kv=tcp://10.0.0.1:6000", "http://10.0.0.1:8101 kv=tcp://10.0.0.1:6001");
        // A pod without the named port is left out (warned), the others stay.
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm"), "http", 8000));
        kube.create(KubeFixture.pod("c", "10.0.0.3", true, Map.of("app", "vllm"), "rank0", 8100));
        await("http://10.0.0.1:8100 kv=tcp://10.0.0.1:6000", "http://10.0.0.1:8101 kv=tcp://10.0.0.1:6001",
            "http://10.0.0.3:8100 kv=tcp://10.0.0.3:5557", "http://10.0.0.3:8101 kv=tcp://10.0.0.3:5558");
    }

    @Test
    void prefillAndDecodeSelectorsGiveRolesAndSglangBootstrapPorts() throws Exception {
        discover("""
            rules:
              - name: pd
                models: [m]
                engine: sglang
                policy: pd
                discovery: {type: kubernetes, namespace: llm, prefill_selector: {role: prefill}, decode_selector: {role: decode}}
            """);
        await();
        var p = KubeFixture.pod("p1", "10.0.1.1", true, Map.of("role", "prefill"), "http", 30000);
        kube.create(p);
        kube.create(KubeFixture.pod("d1", "10.0.2.1", true, Map.of("role", "decode"), "http", 30000));
        var p2 = KubeFixture.pod("p2", "10.0.1.2", true, Map.of("role", "prefill"), "http", 30000);
        p2.getMetadata().setAnnotations(Map.of("kvgate.io/bootstrap-port", "9000"));
        kube.create(p2);
        await("http://10.0.1.1:30000 role=prefill boot=8998", "http://10.0.1.2:30000 role=prefill boot=9000",
            "http://10.0.2.1:30000 role=decode");
    }

    @Test
    void endpointSlicesOfAServiceFollowTheirConditions() throws Exception {
        discover("""
            rules:
              - name: chat
                models: [m]
                discovery: {type: kubernetes, namespace: llm, service: vllm, kv_events_port: kv-events}
            """);
        await();
        kube.apply(KubeFixture.slice("vllm-abc", "vllm", List.of("10.0.0.1", true, false, "10.0.0.2", false, false),
            "http", 8000, "kv-events", 5557));
        kube.apply(KubeFixture.slice("sglang-x", "sglang", List.of("10.0.0.9", true, false), "http", 8000));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
        kube.apply(KubeFixture.slice("vllm-abc", "vllm", List.of("10.0.0.1", false, true, "10.0.0.2", true, false),
            "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557 (terminating)", "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
        // A second slice of the same Service (the controller splits at 100 endpoints) adds to the set.
        kube.apply(KubeFixture.slice("vllm-def", "vllm", List.of("10.0.0.3", true, false), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557 (terminating)", "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557",
            "http://10.0.0.3:8000 kv=tcp://10.0.0.3:5557");
        kube.client().discovery().v1().endpointSlices().inNamespace(KubeFixture.NS).withName("vllm-abc").delete();
        await("http://10.0.0.3:8000 kv=tcp://10.0.0.3:5557");
    }

    @Test
    void anInferencePoolsSelectorAndTargetPortsPickThePods() throws Exception {
        discover("""
            rules:
              - name: pool
                models: [m]
                discovery: {type: inference_pool, namespace: llm, pool: vllm-pool}
            """);
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000));
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm", "tier", "big"), "http", 8000));
        kube.apply(KubeFixture.pool("vllm-pool", Map.of("app", "vllm"), 8000, 8001));
        await("http://10.0.0.1:8000", "http://10.0.0.1:8001", "http://10.0.0.2:8000", "http://10.0.0.2:8001");
        kube.apply(KubeFixture.pool("vllm-pool", Map.of("tier", "big"), 8000));
        await("http://10.0.0.2:8000");
        kube.deletePool("vllm-pool");
        await();
    }

    @Test
    void theWatchResumesAfterTheApiServerRestarts() throws Exception {
        discover(PODS);
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
        kube.restartApiServer();
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557", "http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
    }

    @Test
    void anExpiredWatch410GoneIsFollowedByAFreshListThatSeesWhatChangedMeanwhile() throws Exception {
        discover(PODS);
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
        // The watch breaks (API server restart) and, while it is away, its resource version expires: resuming it is
        // answered 410 Gone, and only a new list sees the pod that changed meanwhile.
        kube.stopApiServer();
        kube.expireNextWatches(1);
        kube.startApiServer();
        kube.create(KubeFixture.pod("b", "10.0.0.2", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        kube.ready("a", false);
        await("http://10.0.0.2:8000 kv=tcp://10.0.0.2:5557");
        assertEquals(1, kube.watchesExpired(), "the informer's resumed watch was answered 410 Gone");
    }

    @Test
    void anApiServerNotReachableAtStartIsRetriedUntilItIs() throws Exception {
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        kube.stopApiServer();
        // In the API server's place, a socket that drops the first connection: the first list certainly fails (fabric8
        // alone would then give the informer up); the real server comes back after it.
        try (java.net.ServerSocket broken = new java.net.ServerSocket(kube.port(), 50, java.net.InetAddress.getLoopbackAddress())) {
            broken.setSoTimeout((int) AWAIT_MS);
            discover(PODS);
            broken.accept().close();
        }
        kube.startApiServer();
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
    }

    @Test
    void aChangedDiscoveryRestartsTheSourceAndAStaticRuleStopsIt() throws Exception {
        discover(PODS);
        await();
        kube.create(KubeFixture.pod("a", "10.0.0.1", true, Map.of("app", "vllm"), "http", 8000, "kv-events", 5557));
        kube.create(KubeFixture.pod("s", "10.0.0.5", true, Map.of("app", "sglang"), "http", 8000, "kv-events", 5557));
        await("http://10.0.0.1:8000 kv=tcp://10.0.0.1:5557");
        discovery.sync(GatewayConfig.parse(PODS.replace("app: vllm", "app: sglang")));
        await("http://10.0.0.5:8000 kv=tcp://10.0.0.5:5557");
        discovery.sync(GatewayConfig.parse("rules:\n  - name: chat\n    models: [m]\n    endpoints: [{url: \"http://127.0.0.1:9\"}]\n"));
        assertEquals(false, discovery.discovers("chat"));
    }
}
