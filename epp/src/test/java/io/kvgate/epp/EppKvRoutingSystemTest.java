package io.kvgate.epp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.epp.check.EnvoyEmulator;
import io.kvgate.epp.check.HttpUpstream;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * EPP mode end to end (issue #42 item 4): the Envoy emulator sends each request to the endpoint the picker names in
 * {@code x-gateway-destination-endpoint} (what Envoy's ORIGINAL_DST cluster does), two simulated vLLM engines publish
 * real KV events, and a {@code kv_exact} rule behind the picker sends every request to the engine that caches its
 * prefix — each engine serves its own prefix's requests from its cache.
 */
@Tag("system")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EppKvRoutingSystemTest {
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    private static String tokens(int from, int count) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < count; i++) {
            sb.append(i == 0 ? "" : ",").append(from + i);
        }
        return sb.append(']').toString();
    }

    private static HttpResponse<String> direct(EngineSimulator sim, String prompt) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
                "{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}")).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static long lastSeq(Gateway g, EndpointState ep) {
        return g.kv().status().stream().filter(s -> s.endpointId() == ep.id()).mapToLong(s -> s.lastSeq()).max().orElse(-1);
    }

    private static JsonNode lastServed(EngineSimulator sim) {
        JsonNode recent = sim.stats().toJson().get("recent");
        return recent.get(recent.size() - 1);
    }

    @Test
    void kvExactThroughThePickerSendsEachPrefixToTheEngineCachingIt() throws Exception {
        int kvA = TestPorts.free();
        int kvB = TestPorts.free();
        SimulatorConfig ca = EppCheckSystemTest.fast().blockSize(16).hashSeed("0").kvEvents("tcp://127.0.0.1:" + kvA).kvEventsMode("bind");
        SimulatorConfig cb = EppCheckSystemTest.fast().blockSize(16).hashSeed("0").kvEvents("tcp://127.0.0.1:" + kvB).kvEventsMode("bind");
        try (EngineSimulator a = EngineSimulator.start(ca); EngineSimulator b = EngineSimulator.start(cb)) {
            String yaml = """
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                epp_listen: 127.0.0.1:0
                health: {interval_ms: 60000}
                rules:
                  - name: kv
                    models: [m]
                    engine: vllm
                    policy: kv_exact
                    block_size: 16
                    hash_seed: "0"
                    kv: {cold_readmit_every: 0, speculative_ttl_ms: 0, dp_rank_hint: false}
                    endpoints:
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                      - url: %s
                        kv_events: tcp://127.0.0.1:%d
                """.formatted(a.baseUrl(), kvA, b.baseUrl(), kvB);
            try (Gateway g = Gateway.start(GatewayConfig.parse(yaml));
                 EnvoyEmulator envoy = new EnvoyEmulator("127.0.0.1", g.eppPort(), 30_000)) {
                List<EndpointState> eps = g.routeTable().ruleByName("kv").endpoints();
                EngineSimulator[] sims = {a, b};
                for (int n = 0; n < 2; n++) {
                    EngineSimulator sim = sims[n];
                    EndpointState ep = eps.stream().filter(e -> e.hostHeader().equals("127.0.0.1:" + sim.port())).findFirst().orElseThrow();
                    int[] sent = {0};
                    int base = 900_000 + n * 100_000;
                    ZmqHandshake.await("gateway subscribed to engine " + n, WAIT, () -> {
                        assertEquals(200, direct(sim, tokens(base + sent[0]++ * 16, 16)).statusCode());
                        return sim.lastEventSeq(0);
                    }, () -> lastSeq(g, ep), () -> "status " + g.kv().status());
                    sim.resetPrefixCache();
                    Await.until(WAIT, "engine " + n + "'s cache cleared in the index", () -> g.kv().index().blocks(ep.id()) == 0
                        && lastSeq(g, ep) == sim.lastEventSeq(0), () -> "blocks " + g.kv().index().blocks(ep.id()));
                }
                // Engine a caches prefix P, engine b prefix Q (128 tokens each).
                String p = tokens(10_000, 128);
                String q = tokens(20_000, 128);
                assertEquals(200, direct(a, p).statusCode());
                assertEquals(200, direct(b, q).statusCode());
                for (EngineSimulator sim : sims) {
                    EndpointState ep = eps.stream().filter(e -> e.hostHeader().equals("127.0.0.1:" + sim.port())).findFirst().orElseThrow();
                    long held = sim.cachedBlocks(0);
                    Await.until(WAIT, "prefix indexed for " + ep.hostHeader(), () -> g.kv().index().blocks(ep.id()) == held,
                        () -> "index " + g.kv().index().blocks(ep.id()) + " engine " + held);
                }
                HttpUpstream originalDst = new HttpUpstream(Duration.ofSeconds(30));
                for (int i = 0; i < 3; i++) {
                    for (Object[] c : new Object[][] {{p, a}, {q, b}}) {
                        String prompt = ((String) c[0]).replace("]", "," + (i + 1) + "]");
                        EngineSimulator holder = (EngineSimulator) c[1];
                        EnvoyEmulator.Outcome o = envoy.exchange(EnvoyEmulator.Request.post("/v1/completions",
                            Map.of("content-type", "application/json"), ("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}")
                                .getBytes(StandardCharsets.UTF_8)), originalDst, null);
                        assertTrue(o.violations.isEmpty(), o.violations.toString());
                        assertEquals("127.0.0.1:" + holder.port(), o.endpoint(), "the engine caching the prefix: " + o.destinationHeader);
                        assertEquals(200, o.response.status());
                        assertTrue(lastServed(holder).get("cached_tokens").asInt() >= 112,
                            "served from its cache: " + lastServed(holder));
                        assertTrue(new String(o.echoedResponseBody, StandardCharsets.UTF_8).contains("\"usage\""),
                            "the engine's answer went back through the picker");
                    }
                }
                for (EndpointState ep : eps) {
                    Await.until(WAIT, "load handed back by " + ep.hostHeader(), () -> ep.outstanding() == 0,
                        () -> "outstanding " + ep.outstanding());
                }
            }
        }
    }
}
