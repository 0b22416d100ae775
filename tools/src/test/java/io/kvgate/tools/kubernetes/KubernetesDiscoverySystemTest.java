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
            last = set.stream().map(e -> e.config().port() + (e.terminating() ? " terminating" : "")).sorted().toList();
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
            GatewayConfig cfg = GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                control_socket: off
                rules:
                  - name: chat
                    models: [m]
                    policy: round_robin
                    discovery: {type: kubernetes, namespace: llm, selector: {app: engine}}
                """);
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
                System.out.println("discovery: pod ready -> applied by the gateway in " + readyToApplied + " ms");
            }
        }
    }
}
