package io.kvgate.tools.kubernetes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.discovery.DiscoveredEndpoint;
import io.kvgate.discovery.Discovery;
import io.kvgate.discovery.KubeFixture;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A gateway whose rule discovers its engines from Kubernetes pods (fabric8's mock API server in CRUD mode) routes real
 * requests to simulated engines as their pods appear, turn ready, terminate and leave: nothing before the first
 * pod (503, an OpenAI error), each ready pod routed to once the gateway applied its event, a terminating pod no new
 * request after its event, a deleted one gone. Every step awaits the gateway's "applied" hook, never a sleep.
 */
@Timeout(120)
@Tag("system")
class KubernetesDiscoverySystemTest {
    private static final String CHAT = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}";
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5)).build();
    private final BlockingQueue<List<DiscoveredEndpoint>> applied = new LinkedBlockingQueue<>();
    /** Every applied set's ports with when the hook ran (System.nanoTime), for the ready -> applied figure. */
    private final java.util.concurrent.ConcurrentLinkedQueue<Applied> appliedAt = new java.util.concurrent.ConcurrentLinkedQueue<>();

    private record Applied(long ns, List<String> ports) {}

    private int chat(int port) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(), HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    /** Waits until the gateway applied a set equal to {@code expected} ("port" or "port terminating"). Returns ms waited. */
    private long awaitApplied(String... expected) throws InterruptedException {
        long t0 = System.nanoTime();
        long deadline = t0 + TimeUnit.SECONDS.toNanos(30);
        List<String> last = null;
        while (System.nanoTime() < deadline) {
            List<DiscoveredEndpoint> set = applied.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (set == null) {
                break;
            }
            last = labels(set);
            if (last.equals(java.util.Arrays.stream(expected).sorted().toList())) {
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            }
        }
        throw new AssertionError("the gateway did not apply " + List.of(expected) + " within 30 s; last applied: " + last);
    }

    @Test
    void podsAreRoutedToAsTheyBecomeReadyAndATerminatingPodGetsNoNewRequest() throws Exception {
        SimulatorConfig sim = new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(1).itlMs(1)
            .prefillUsPerToken(0);
        try (KubeFixture kube = new KubeFixture(); EngineSimulator a = EngineSimulator.start(sim);
             EngineSimulator b = EngineSimulator.start(sim)) {
            GatewayConfig cfg = chatRuleOverPods("round_robin");
            try (Gateway gw = Gateway.start(Gateway.Options.of(cfg).withDiscovery(new Discovery.Clients(kube::newClient, null)))) {
                gw.onDiscoveryApplied((rule, set) -> applied.add(set));
                assertEquals(503, chat(gw.port()), "no endpoint discovered yet: 503, not a hang or a 404");

                kube.create(KubeFixture.pod("a", "127.0.0.1", false, Map.of("app", "engine"), "http", a.port()));
                kube.ready("a", true);
                long readyToApplied = awaitApplied(String.valueOf(a.port()));
                long before = a.stats().get("chat_requests");
                assertEquals(200, chat(gw.port()), "the ready pod serves");
                assertEquals(before + 1, a.stats().get("chat_requests"));

                kube.create(KubeFixture.pod("b", "127.0.0.1", true, Map.of("app", "engine"), "http", b.port()));
                awaitApplied(String.valueOf(a.port()), String.valueOf(b.port()));
                for (int i = 0; i < 6; i++) {
                    assertEquals(200, chat(gw.port()));
                }
                assertTrue(b.stats().get("chat_requests") >= 1, "the second pod takes requests");

                kube.terminating("a");
                awaitApplied(a.port() + " terminating", String.valueOf(b.port()));
                long aBefore = a.stats().get("chat_requests");
                long bBefore = b.stats().get("chat_requests");
                for (int i = 0; i < 10; i++) {
                    assertEquals(200, chat(gw.port()), "the terminating pod's peer serves everything");
                }
                assertEquals(aBefore, a.stats().get("chat_requests"), "a terminating pod gets no new request after its event");
                assertEquals(bBefore + 10, b.stats().get("chat_requests"));

                kube.delete("a");
                awaitApplied(String.valueOf(b.port()));
                assertEquals(200, chat(gw.port()));
                String endpoints = gw.config().rules().get(0).endpoints().stream().map(e -> e.key())
                    .collect(Collectors.joining(","));
                assertEquals("127.0.0.1:" + b.port(), endpoints, "the applied configuration carries the discovered endpoint");
                System.out.println("discovery: after the API server took the ready update, the gateway's applied event came "
                    + readyToApplied + " ms later (0 = it was in already)");
            }
        }
    }

    private HttpResponse<String> chatTo(int port, String model) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(CHAT.replace("\"m\"", "\"" + model + "\""))).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    /** Every policy routes a discovered rule that has found nothing yet: 503 no_healthy_endpoint, an OpenAI error. */
    @Test
    void everyPolicyAnswers503WhileItsDiscoveredRuleHasNoEndpoint() throws Exception {
        try (KubeFixture kube = new KubeFixture()) {
            StringBuilder rules = new StringBuilder();
            List<String> policies = List.of("round_robin", "least_outstanding", "weighted", "kv_exact", "chwbl", "session");
            for (String p : policies) {
                rules.append("  - name: ").append(p).append("\n    models: [").append(p).append("]\n    policy: ").append(p)
                    .append("\n    discovery: {type: kubernetes, namespace: llm, selector: {app: none}}\n");
            }
            rules.append("""
                  - name: pd
                    models: [pd]
                    policy: pd
                    discovery: {type: kubernetes, namespace: llm, prefill_selector: {role: p}, decode_selector: {role: d}}
                """);
            GatewayConfig cfg = GatewayConfig.parse("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ncontrol_socket: off\nrules:\n"
                + rules);
            try (Gateway gw = Gateway.start(Gateway.Options.of(cfg).withDiscovery(new Discovery.Clients(kube::newClient, null)))) {
                for (String model : new java.util.ArrayList<String>(policies) {{ add("pd"); }}) {
                    HttpResponse<String> r = chatTo(gw.port(), model);
                    assertEquals(503, r.statusCode(), model + ": " + r.body());
                    assertTrue(r.body().contains("\"error\""), model + " answers an OpenAI error object: " + r.body());
                }
            }
        }
    }

    /**
     * 2 of 4 engine pods roll under load (each old pod terminates, its replacement turns ready, the old one is deleted
     * and its engine stopped): no request fails, no terminating pod gets a request after its event, and each new pod
     * is routed to soon after it turns ready (printed: the figure is 1 s).
     */
    @Test
    void twoOfFourEnginePodsRollUnderLoadAndNoRequestFails() throws Exception {
        SimulatorConfig sim = new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(2).itlMs(1)
            .prefillUsPerToken(0);
        List<EngineSimulator> sims = new java.util.ArrayList<>();
        try (KubeFixture kube = new KubeFixture()) {
            for (int i = 0; i < 6; i++) {
                sims.add(EngineSimulator.start(sim));
            }
            GatewayConfig cfg = chatRuleOverPods("least_outstanding");
            try (Gateway gw = Gateway.start(Gateway.Options.of(cfg).withDiscovery(new Discovery.Clients(kube::newClient, null)))) {
                gw.onDiscoveryApplied((rule, set) -> applied.add(set));
                for (int i = 0; i < 4; i++) {
                    kube.create(KubeFixture.pod("e" + i, "127.0.0.1", true, Map.of("app", "engine"), "http", sims.get(i).port()));
                }
                awaitApplied(ports(sims, 0, 1, 2, 3));
                int threads = 4;
                java.util.concurrent.atomic.AtomicLongArray done = new java.util.concurrent.atomic.AtomicLongArray(threads);
                java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
                java.util.concurrent.ConcurrentLinkedQueue<String> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
                java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
                List<Thread> clients = new java.util.ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    int id = t;
                    clients.add(Thread.ofPlatform().name("client-" + t).start(() -> {
                        // Bounded: at most 20,000 requests per thread, whatever happens to the roll.
                        for (int n = 0; n < 20_000 && !stop.get(); n++) {
                            try {
                                int status = chat(gw.port());
                                if (status != 200) {
                                    failed.incrementAndGet();
                                    failures.add("status " + status);
                                }
                            } catch (Exception e) {
                                failed.incrementAndGet();
                                failures.add(e.toString());
                            }
                            done.incrementAndGet(id);
                        }
                    }));
                }
                List<Long> readyToRouted = new java.util.ArrayList<>();
                for (int k = 0; k < 2; k++) {
                    EngineSimulator old = sims.get(k);
                    EngineSimulator next = sims.get(4 + k);
                    kube.terminating("e" + k);
                    awaitAppliedContaining(old.port() + " terminating");
                    long oldServed = old.stats().get("chat_requests");
                    long[] mark = snapshot(done);
                    awaitEveryThreadPast(done, mark); // every request in flight at the drain has ended
                    long oldAfterInFlight = old.stats().get("chat_requests");
                    kube.create(KubeFixture.pod("n" + k, "127.0.0.1", false, Map.of("app", "engine"), "http", next.port()));
                    long t0 = System.nanoTime();
                    kube.ready("n" + k, true);
                    long served = next.stats().get("chat_requests");
                    long deadline = t0 + TimeUnit.SECONDS.toNanos(30);
                    while (next.stats().get("chat_requests") == served && System.nanoTime() < deadline) {
                        Thread.onSpinWait(); // the clients' requests are the event awaited: the first one the new pod serves
                    }
                    readyToRouted.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
                    assertTrue(next.stats().get("chat_requests") > served, "the new pod n" + k + " is routed to");
                    kube.delete("e" + k);
                    awaitAppliedWithout(old.port());
                    assertEquals(oldAfterInFlight, old.stats().get("chat_requests"),
                        "the terminating pod e" + k + " got no new request after its event (in flight at the event: "
                            + (oldAfterInFlight - oldServed) + ")");
                    old.close(); // the old engine exits once its pod is gone
                }
                stop.set(true);
                for (Thread c : clients) {
                    c.join(30_000);
                }
                long total = 0;
                for (int t = 0; t < threads; t++) {
                    total += done.get(t);
                }
                System.out.println("discovery roll: " + total + " requests, " + failed.get() + " failed; pod ready -> first"
                    + " request served by it: " + readyToRouted + " ms");
                assertEquals(0, failed.get(), "no request fails while 2 of 4 engine pods roll: " + failures);
                assertTrue(readyToRouted.stream().allMatch(ms -> ms < 10_000), "new pods routed to within 10 s: " + readyToRouted);
            }
        } finally {
            sims.forEach(EngineSimulator::close);
        }
    }

    /**
     * The figure "a pod turning ready is routed to within 1 s of the API server's event", measured for
     * {@link #READY_SAMPLES} pods one after another under a steady load (two sequential clients on round robin over an
     * always-ready pod and the new one): from just before the ready condition is written to the mock API server to the
     * first request the new pod serves, and to the gateway's applied event (kvgate's own share). Printed as one line
     * ({@code discovery ready->routed ms: ...}) for the lead to quote from a quiet-host run:
     * {@code ./mvnw -o -B -q -pl tools -am verify -Dsurefire.failIfNoSpecifiedTests=false
     * -Dtest='KubernetesDiscoverySystemTest#aPodTurningReadyIsRoutedToSoonAfterItsEvent' | grep 'ready->routed'}
     * (also in {@code tools/target/failsafe-reports/TEST-*KubernetesDiscoverySystemTest.xml}).
     * The assertion's bound is 10 s, not the 1 s: the shared test host is loaded (a 4.7 s sample was seen);
     * the quiet-host figure is the printed one.
     */
    @Test
    void aPodTurningReadyIsRoutedToSoonAfterItsEvent() throws Exception {
        SimulatorConfig sim = new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("m").ttftMs(1).itlMs(1)
            .prefillUsPerToken(0);
        List<EngineSimulator> sims = new java.util.ArrayList<>();
        try (KubeFixture kube = new KubeFixture()) {
            for (int i = 0; i <= READY_SAMPLES; i++) {
                sims.add(EngineSimulator.start(sim));
            }
            GatewayConfig cfg = chatRuleOverPods("round_robin");
            try (Gateway gw = Gateway.start(Gateway.Options.of(cfg).withDiscovery(new Discovery.Clients(kube::newClient, null)))) {
                gw.onDiscoveryApplied((rule, set) -> {
                    appliedAt.add(new Applied(System.nanoTime(), labels(set)));
                    applied.add(set);
                });
                kube.create(KubeFixture.pod("base", "127.0.0.1", true, Map.of("app", "engine"), "http", sims.get(0).port()));
                awaitApplied(String.valueOf(sims.get(0).port()));
                java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
                java.util.concurrent.atomic.AtomicInteger failed = new java.util.concurrent.atomic.AtomicInteger();
                List<Thread> clients = new java.util.ArrayList<>();
                for (int t = 0; t < 2; t++) {
                    clients.add(Thread.ofPlatform().name("client-" + t).start(() -> {
                        // Bounded: at most 20,000 requests per client, whatever happens.
                        for (int n = 0; n < 20_000 && !stop.get(); n++) {
                            try {
                                if (chat(gw.port()) != 200) {
                                    failed.incrementAndGet();
                                }
                            } catch (Exception e) {
                                failed.incrementAndGet();
                            }
                        }
                    }));
                }
                List<Long> routed = new java.util.ArrayList<>();
                List<Long> appliedAfter = new java.util.ArrayList<>();
                try {
                    for (int k = 1; k <= READY_SAMPLES; k++) {
                        EngineSimulator pod = sims.get(k);
                        kube.create(KubeFixture.pod("p" + k, "127.0.0.1", false, Map.of("app", "engine"), "http", pod.port()));
                        applied.clear();
                        long served = pod.stats().get("chat_requests");
                        long t0 = System.nanoTime();
                        kube.ready("p" + k, true);
                        long deadline = t0 + TimeUnit.SECONDS.toNanos(30);
                        while (pod.stats().get("chat_requests") == served && System.nanoTime() < deadline) {
                            Thread.onSpinWait(); // the clients' requests are the event awaited: the first one the pod serves
                        }
                        long t1 = System.nanoTime();
                        assertTrue(pod.stats().get("chat_requests") > served, "pod p" + k + " is routed to once ready");
                        routed.add(TimeUnit.NANOSECONDS.toMillis(t1 - t0));
                        appliedAfter.add(awaitAppliedSince(t0, String.valueOf(sims.get(0).port()), String.valueOf(pod.port())));
                        kube.delete("p" + k);
                        awaitApplied(String.valueOf(sims.get(0).port()));
                    }
                } finally {
                    stop.set(true);
                    for (Thread c : clients) {
                        c.join(30_000);
                    }
                }
                List<Long> sorted = routed.stream().sorted().toList();
                System.out.println("discovery ready->routed ms: median " + sorted.get(sorted.size() / 2) + ", max "
                    + sorted.getLast() + ", samples " + routed + "; ready->applied (the gateway's share) ms: " + appliedAfter
                    + "; failed requests: " + failed.get());
                assertEquals(0, failed.get(), "no request fails while pods come and go");
                assertTrue(sorted.getLast() < 10_000, "every pod routed to within 10 s of turning ready: " + routed);
            }
        } finally {
            sims.forEach(EngineSimulator::close);
        }
    }

    private static final int READY_SAMPLES = 5;

    /**
     * Waits until the gateway applied a set equal to {@code expected} (as {@link #awaitApplied}); returns the ms from
     * {@code t0Ns} to the moment the hook ran with the first such set after {@code t0Ns}.
     */
    private long awaitAppliedSince(long t0Ns, String... expected) throws InterruptedException {
        awaitApplied(expected);
        List<String> want = java.util.Arrays.stream(expected).sorted().toList();
        for (Applied a : appliedAt) {
            if (a.ns() - t0Ns >= 0 && a.ports().equals(want)) {
                return TimeUnit.NANOSECONDS.toMillis(a.ns() - t0Ns);
            }
        }
        throw new AssertionError("no applied set " + want + " recorded after the ready event");
    }

    /** A gateway whose one rule ({@code chat}, model {@code m}) discovers pods labelled {@code app: engine} in {@code llm}. */
    private static GatewayConfig chatRuleOverPods(String policy) throws io.kvgate.control.config.ConfigException {
        return GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: off
            rules:
              - name: chat
                models: [m]
                policy: %s
                discovery: {type: kubernetes, namespace: llm, selector: {app: engine}}
            """.formatted(policy));
    }

    /** An applied set as the assertions name it: each endpoint's port, with " terminating" when it is, sorted. */
    private static List<String> labels(List<DiscoveredEndpoint> set) {
        return set.stream().map(e -> e.config().port() + (e.terminating() ? " terminating" : "")).sorted().toList();
    }

    private static String[] ports(List<EngineSimulator> sims, int... idx) {
        return java.util.Arrays.stream(idx).mapToObj(i -> String.valueOf(sims.get(i).port())).toArray(String[]::new);
    }

    private static long[] snapshot(java.util.concurrent.atomic.AtomicLongArray a) {
        long[] out = new long[a.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i);
        }
        return out;
    }

    /** Each client thread is sequential: once each completed one more request, none of those in flight at the mark remains. */
    private static void awaitEveryThreadPast(java.util.concurrent.atomic.AtomicLongArray done, long[] mark) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (int i = 0; i < mark.length; i++) {
            while (done.get(i) <= mark[i]) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("client " + i + " completed no request within 30 s");
                }
                Thread.onSpinWait();
            }
        }
    }

    private void awaitAppliedContaining(String entry) throws InterruptedException {
        awaitAppliedMatching(set -> set.contains(entry), "a set with " + entry);
    }

    private void awaitAppliedWithout(int port) throws InterruptedException {
        awaitAppliedMatching(set -> set.stream().noneMatch(e -> e.startsWith(port + "")), "a set without " + port);
    }

    private void awaitAppliedMatching(java.util.function.Predicate<List<String>> ok, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<String> last = null;
        while (System.nanoTime() < deadline) {
            List<DiscoveredEndpoint> set = applied.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (set == null) {
                break;
            }
            last = labels(set);
            if (ok.test(last)) {
                return;
            }
        }
        throw new AssertionError("the gateway did not apply " + what + " within 30 s; last applied: " + last);
    }
}
