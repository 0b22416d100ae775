package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Timeout;

/**
 * DP ranks end to end (issue #14 item 3): a simulated engine with two data-parallel ranks, each with its own prefix
 * cache and KV-event publisher (port + rank), behind a kv_exact rule. With {@code kv.dp_rank_hint} (the default for
 * vLLM and SGLang) the gateway scores each rank on its own inventory, sends {@code X-data-parallel-rank} and the
 * engine serves the request from the rank that caches its prefix; with the hint off, the ranks are one endpoint and
 * the engine places the request itself.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class DpRankSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final String ADMIN = "dp-rank-test-admin-token";

    private static String tokens(int from, int count) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < count; i++) {
            sb.append(i == 0 ? "" : ",").append(from + i);
        }
        return sb.append(']').toString();
    }

    private static String yaml(EngineSimulator sim, int kvPort, Dialect dialect, boolean hint) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            rules:
              - name: kv
                models: [m]
                engine: %s
                policy: kv_exact
                %s
                kv: {cold_readmit_every: 0, speculative_ttl_ms: 0, dp_rank_hint: %s}
                endpoints:
                  - url: %s
                    kv_events: tcp://127.0.0.1:%d
                    dp_ranks: 2
            """.formatted(ADMIN, dialect == Dialect.SGLANG ? "sglang" : "vllm",
            dialect == Dialect.SGLANG ? "block_size: 1" : "block_size: 16\n    hash_seed: \"0\"", hint, sim.baseUrl(), kvPort);
    }

    private static HttpResponse<String> viaGateway(Gateway g, String prompt) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.port() + "/v1/completions"))
            .timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
            .header("x-kvgate-explain", "1").header("x-kvgate-admin-token", ADMIN)
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}")).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    private static HttpResponse<String> direct(EngineSimulator sim, String prompt, int rank) throws Exception {
        return SimHttp.post(sim, "/v1/completions", "{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prompt + "}",
            "x-data-parallel-rank", Integer.toString(rank));
    }

    /** The rank and cached tokens of the engine's latest request. */
    private static JsonNode lastServed(EngineSimulator sim) {
        JsonNode recent = sim.stats().toJson().get("recent");
        return recent.get(recent.size() - 1);
    }

    private static long lastSeq(Gateway g, EndpointState ep, int rank) {
        return g.kv().status().stream().filter(s -> s.endpointId() == ep.id() && s.rank() == rank)
            .mapToLong(s -> s.lastSeq()).max().orElse(-1);
    }

    @ParameterizedTest
    @EnumSource(value = Dialect.class, names = {"VLLM", "SGLANG"})
    void requestsArePinnedToTheRankThatCachesTheirPrefix(Dialect dialect) throws Exception {
        int kv = TestPorts.free(2);
        SimulatorConfig c = SimHttp.fast(dialect).dpRanks(2).kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind");
        if (dialect == Dialect.VLLM) {
            c.blockSize(16).hashSeed("0");
        }
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            Gateway g = Gateway.start(GatewayConfig.parse(yaml(sim, kv, dialect, true)));
            try {
                EndpointState ep = g.routeTable().ruleByName("kv").endpoints().get(0);
                for (int n = 0; n < 2; n++) {
                    int rank = n;
                    int[] sent = {0};
                    ZmqHandshake.await("gateway subscribed to rank " + rank, Duration.ofSeconds(30), () -> {
                        assertEquals(200, direct(sim, tokens(900_000 + (rank * 1_000 + sent[0]++) * 16, 16), rank).statusCode());
                        return sim.lastEventSeq(rank);
                    }, () -> lastSeq(g, ep, rank), () -> "status " + g.kv().status());
                }
                sim.resetPrefixCache();
                Await.until(WAIT, "both ranks' caches cleared in the index", () -> g.kv().index().blocks(ep.id()) == 0
                    && lastSeq(g, ep, 0) == sim.lastEventSeq(0) && lastSeq(g, ep, 1) == sim.lastEventSeq(1), () -> "blocks " + g.kv().index().blocks(ep.id()));

                // Rank 1 caches prefix A, rank 0 prefix B (128 tokens each).
                String a = tokens(10_000, 128);
                String b = tokens(20_000, 128);
                assertEquals(200, direct(sim, a, 1).statusCode());
                assertEquals(200, direct(sim, b, 0).statusCode());
                long held = sim.cachedBlocks(0) + sim.cachedBlocks(1);
                Await.until(WAIT, "both prefixes indexed", () -> g.kv().index().blocks(ep.id()) == held, () -> "index " + g.kv().index().blocks(ep.id()) + " engine " + held);

                for (int i = 0; i < 3; i++) {
                    HttpResponse<String> r = viaGateway(g, a.replace("]", "," + (i + 1) + "]"));
                    assertEquals(200, r.statusCode(), r.body());
                    String why = r.headers().firstValue("x-kvgate-route").orElseThrow();
                    assertTrue(why.contains("tier=kv_exact") && why.endsWith("dp_rank=1; attempts=1"), why);
                    assertEquals(1, lastServed(sim).get("rank").asInt(), "the engine honoured the hint: " + why);
                    assertTrue(lastServed(sim).get("cached_tokens").asInt() >= 112, "served from rank 1's cache: " + lastServed(sim));
                    HttpResponse<String> s = viaGateway(g, b.replace("]", "," + (i + 1) + "]"));
                    assertEquals(200, s.statusCode(), s.body());
                    assertEquals(0, lastServed(sim).get("rank").asInt(), s.headers().firstValue("x-kvgate-route").orElse(""));
                    assertTrue(lastServed(sim).get("cached_tokens").asInt() >= 112, lastServed(sim).toString());
                }
                Await.until(WAIT, "pinned requests finished per rank", () -> ep.rankLoad().outstanding(0) == 0 && ep.rankLoad().outstanding(1) == 0, () -> "rank 0 " + ep.rankLoad().outstanding(0) + ", rank 1 " + ep.rankLoad().outstanding(1));
                assertEquals(3, ep.rankLoad().routedTotal(1));
                assertEquals(3, ep.rankLoad().completedTotal(0));
                String metrics = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.port() + "/metrics"))
                    .build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("kvgate_endpoint_rank_outstanding{endpoint=\"" + ep.key() + "\",rank=\"1\"} 0.0\n"), metrics);

                // The hint off: the two ranks are one endpoint, no header goes out, the engine alternates ranks.
                g.applyConfig(GatewayConfig.parse(yaml(sim, kv, dialect, false)));
                HttpResponse<String> first = viaGateway(g, a.replace("]", ",7]"));
                int r1 = lastServed(sim).get("rank").asInt();
                HttpResponse<String> second = viaGateway(g, a.replace("]", ",8]"));
                int r2 = lastServed(sim).get("rank").asInt();
                assertEquals(200, first.statusCode());
                assertEquals(200, second.statusCode());
                assertNotEquals(r1, r2, "the engine's own round robin placed them: no rank hint was sent");
                assertTrue(!first.headers().firstValue("x-kvgate-route").orElseThrow().contains("dp_rank="));
            } finally {
                g.close(100);
            }
        }
    }
}
