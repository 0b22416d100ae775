package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.load.EngineLoadScraper.Result;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.LoadEstimate;
import io.kvgate.testkit.Await;
import io.kvgate.testkit.TestPorts;
import io.kvgate.testkit.ZmqHandshake;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Engine-reported load end to end (issue #14 items 1-2): two gateways in front of the same simulated engines, one of
 * them loading an engine the other cannot see through its own in-flight counts. The second gateway's scraper reads
 * the engine's {@code /metrics}, and its least_outstanding and kv_exact decisions leave the busy engine; an engine
 * without a metrics page is routed on local counts, flagged stale; the uncached prompt tokens charged to an
 * endpoint return at the engine's first response bytes.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("system")
class EngineLoadSystemTest {
    /** Bound of the waits for real engines and gateways (never a timeout under test). */
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final String ADMIN = "engine-load-test-admin-token";
    private final List<AutoCloseable> closing = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (int i = closing.size() - 1; i >= 0; i--) {
            closing.get(i).close();
        }
    }

    private EngineSimulator sim(SimulatorConfig c) {
        EngineSimulator s = EngineSimulator.start(c);
        closing.add(s);
        return s;
    }

    private Gateway gateway(String rules) throws Exception {
        Gateway g = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            load: {scrape_interval_ms: 50, stale_ms: 2000}
            rules:
            %s""".formatted(ADMIN, rules)));
        closing.add(() -> g.close(100));
        return g;
    }

    private static String rule(String policy, String extra, String... endpointLines) {
        StringBuilder y = new StringBuilder("  - name: chat\n    models: [m]\n    policy: " + policy + "\n" + extra + "    endpoints:\n");
        for (String e : endpointLines) {
            y.append("      - ").append(e).append('\n');
        }
        return y.toString();
    }

    private static String tokens(int from, int count) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < count; i++) {
            sb.append(i == 0 ? "" : ",").append(from + i);
        }
        return sb.append(']').toString();
    }

    private static HttpRequest.Builder completion(Gateway g, String prompt, int maxTokens, boolean stream) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.port() + "/v1/completions"))
            .timeout(Duration.ofSeconds(60)).header("content-type", "application/json")
            .header("x-kvgate-explain", "1").header("x-kvgate-admin-token", ADMIN)
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"prompt\":" + prompt + ",\"max_tokens\":" + maxTokens
                + (stream ? ",\"stream\":true" : "") + "}"));
    }

    /** Sends one completion through {@code g} and returns its {@code X-Kvgate-Route}. */
    private static String route(Gateway g, String prompt) throws Exception {
        HttpResponse<String> r = SimHttp.CLIENT.send(completion(g, prompt, 1, false).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return r.headers().firstValue("x-kvgate-route").orElseThrow();
    }

    private static List<CompletableFuture<HttpResponse<String>>> load(Gateway g, int requests, int maxTokens) {
        List<CompletableFuture<HttpResponse<String>>> out = new ArrayList<>();
        for (int i = 0; i < requests; i++) {
            out.add(SimHttp.CLIENT.sendAsync(completion(g, tokens(50_000 + 100 * i, 20), maxTokens, false).build(),
                HttpResponse.BodyHandlers.ofString()));
        }
        return out;
    }

    private static EndpointState endpoint(Gateway g, EngineSimulator sim) {
        for (EndpointState ep : g.routeTable().ruleByName("chat").endpoints()) {
            if (ep.config().port() == sim.port()) {
                return ep;
            }
        }
        throw new AssertionError("no endpoint for " + sim.baseUrl());
    }

    private static String metrics(Gateway g) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + g.port() + "/metrics")).build(),
            HttpResponse.BodyHandlers.ofString()).body();
    }

    @Test
    void leastOutstandingRoutesAwayFromAnEngineBusyWithAnotherGatewaysTraffic() throws Exception {
        EngineSimulator a = sim(SimHttp.fast(Dialect.VLLM).itlMs(25));
        EngineSimulator b = sim(SimHttp.fast(Dialect.VLLM).itlMs(25));
        Gateway loader = gateway(rule("least_outstanding", "", "url: " + a.baseUrl()));
        Gateway router = gateway(rule("least_outstanding", "", "url: " + a.baseUrl(), "url: " + b.baseUrl()));
        EndpointState ra = endpoint(router, a);

        // Without load, this gateway shares evenly between the two.
        List<String> idle = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            idle.add(route(router, tokens(10 * i, 8)));
        }
        assertEquals(2, idle.stream().filter(x -> x.startsWith("endpoint=" + ra.key() + ";")).count(), idle.toString());

        // Another gateway keeps six long requests running on a: this gateway has none there.
        List<CompletableFuture<HttpResponse<String>>> busy = load(loader, 6, 160); // ~4 s each
        Await.until(WAIT, "the router's scrape shows a's six requests", () -> ra.load() >= 6, () -> "a: load " + ra.load() + " " + ra.loadEstimate().loadSource() + " reading " + ra.loadEstimate().lastReading());
        assertEquals(0, ra.outstanding(), "none of them is this gateway's");
        for (int i = 0; i < 6; i++) {
            String why = route(router, tokens(1_000 + 10 * i, 8));
            assertTrue(why.startsWith("endpoint=" + endpoint(router, b).key() + ";"), "request " + i + ": " + why);
            assertTrue(why.contains(ra.key() + ":") && why.contains("(engine=6 local="), why);
        }
        String m = metrics(router);
        assertTrue(m.contains("kvgate_engine_load_running{endpoint=\"" + ra.key() + "\",rank=\"0\"} 6.0\n"), m);
        assertTrue(m.contains("kvgate_engine_load_stale{endpoint=\"" + ra.key() + "\",rule=\"chat\"} 0.0\n"), m);
        assertTrue(m.contains("kvgate_endpoint_load{endpoint=\"" + ra.key() + "\",rule=\"chat\"} 6.0\n"), m);
        for (CompletableFuture<HttpResponse<String>> f : busy) {
            assertEquals(200, f.get().statusCode());
        }
        Await.until(WAIT, "a idle again in the router's eyes", () -> ra.load() == 0, () -> "a: " + ra.loadEstimate().lastReading());
    }

    @Test
    void theOtherGatewaysPartOfAReadingAgesOverTheMeasuredRequestLifetime() throws Exception {
        EngineSimulator a = sim(SimHttp.fast(Dialect.VLLM));
        Gateway g = gateway(rule("least_outstanding", "", "url: " + a.baseUrl()));
        EndpointState ep = endpoint(g, a);
        // Short requests one after the other until the gateway has measured how long they live on a (Little's law
        // over its own requests, folded in as it takes up readings): at most 200 of them.
        int sent = 0;
        while (ep.loadEstimate().lifetimeSeconds() < 0 && sent < 200) {
            route(g, tokens(10 * sent, 8));
            sent++;
        }
        assertTrue(ep.loadEstimate().lifetimeSeconds() > 0 && ep.loadEstimate().lifetimeSeconds() < 5, "lifetime " + ep.loadEstimate().lifetimeSeconds() + " after " + sent);
        String m = metrics(g);
        assertTrue(m.contains("kvgate_endpoint_lifetime_seconds{endpoint=\"" + ep.key() + "\"} "), m);
        // Explain shows the peers' part of the reading as predicted: the sample, the prediction, their mean, its weight.
        String why = route(g, tokens(5_000, 8));
        assertTrue(why.contains(ep.key() + ":") && why.contains("(engine=") && why.contains(" peers=") && why.contains(" weight="), why);
    }

    @Test
    void withPeerDecayNoneTheReadingCountsInFull() throws Exception {
        EngineSimulator a = sim(SimHttp.fast(Dialect.VLLM));
        Gateway g = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            load: {scrape_interval_ms: 50, stale_ms: 2000, peer_decay: none}
            rules:
            %s""".formatted(ADMIN, rule("least_outstanding", "", "url: " + a.baseUrl()))));
        closing.add(() -> g.close(100));
        EndpointState ep = endpoint(g, a);
        int sent = 0;
        while (ep.loadEstimate().loadSource() != LoadEstimate.LoadSource.ENGINE && sent < 200) {
            route(g, tokens(10 * sent, 8));
            sent++;
        }
        for (int i = 0; i < 10; i++) {
            String why = route(g, tokens(3_000 + 10 * i, 8));
            assertTrue(why.contains("(engine=") && !why.contains(" peers="), why);
        }
        assertEquals(-1, ep.loadEstimate().lifetimeSeconds(), "nothing measured: the readings' peers' part is not aged");
    }

    @Test
    void kvExactLeavesTheEngineHoldingThePrefixWhileAnotherGatewaySaturatesIt() throws Exception {
        int kvA = TestPorts.free();
        int kvB = TestPorts.free();
        SimulatorConfig base = SimHttp.fast(Dialect.VLLM).itlMs(25).blockSize(16).hashSeed("0");
        EngineSimulator a = sim(base.kvEvents("tcp://127.0.0.1:" + kvA).kvEventsMode("bind"));
        EngineSimulator b = sim(SimHttp.fast(Dialect.VLLM).itlMs(25).blockSize(16).hashSeed("0")
            .kvEvents("tcp://127.0.0.1:" + kvB).kvEventsMode("bind"));
        Gateway loader = gateway(rule("least_outstanding", "", "url: " + a.baseUrl()));
        Gateway router = gateway(rule("kv_exact", "    block_size: 16\n    hash_seed: \"0\"\n"
                + "    kv: {cold_readmit_every: 0, speculative_ttl_ms: 0, load_cap_factor: 1.5, load_slack: 2}\n",
            "url: " + a.baseUrl() + "\n        kv_events: tcp://127.0.0.1:" + kvA,
            "url: " + b.baseUrl() + "\n        kv_events: tcp://127.0.0.1:" + kvB));
        EndpointState ra = endpoint(router, a);
        EndpointState rb = endpoint(router, b);
        List<EngineSimulator> sims = List.of(a, b);
        List<EndpointState> eps = List.of(ra, rb);
        for (int n = 0; n < 2; n++) {
            int i = n;
            EngineSimulator s = sims.get(i);
            EndpointState ep = eps.get(i);
            int[] sent = {0};
            ZmqHandshake.await("router subscribed to engine " + i, Duration.ofSeconds(30), () -> {
                HttpResponse<String> r = SimHttp.post(s, "/v1/completions", "{\"model\":\"m\",\"max_tokens\":1,\"prompt\":"
                    + tokens(900_000 + (i * 1_000 + sent[0]++) * 16, 16) + "}");
                assertEquals(200, r.statusCode(), r.body());
                return s.lastEventSeq(0);
            }, () -> lastSeq(router, ep), () -> "status " + router.kv().status());
            s.resetPrefixCache();
            Await.until(WAIT, "engine " + i + "'s cache cleared in the index", () -> router.kv().index().blocks(ep.id()) == 0
                && lastSeq(router, ep) == s.lastEventSeq(0), () -> "blocks " + router.kv().index().blocks(ep.id()));
        }
        // a caches an 8-block prefix; b holds nothing.
        String prefix = tokens(7_000, 128);
        assertEquals(200, SimHttp.post(a, "/v1/completions", "{\"model\":\"m\",\"max_tokens\":1,\"prompt\":" + prefix + "}").statusCode());
        Await.until(WAIT, "a's blocks indexed", () -> router.kv().index().blocks(ra.id()) == 8, () -> "blocks " + router.kv().index().blocks(ra.id()));
        String sibling = tokens(7_000, 128).replace("]", ",1,2,3]");
        String idle = route(router, sibling);
        assertTrue(idle.startsWith("endpoint=" + ra.key() + ";") && idle.contains("tier=kv_exact"), idle);

        List<CompletableFuture<HttpResponse<String>>> busy = load(loader, 8, 160);
        Await.until(WAIT, "the router's scrape shows a's eight requests", () -> ra.load() >= 8, () -> "a: " + ra.loadEstimate().lastReading());
        String away = route(router, sibling);
        assertTrue(away.startsWith("endpoint=" + rb.key() + ";"), away);
        assertTrue(away.contains("tier=fallback(over_load_bound)"), away);
        assertTrue(away.contains(ra.key() + ":8@GPU"), "a still holds all 8 blocks: " + away);
        assertTrue(away.contains("(engine=8 local="), away);
        for (CompletableFuture<HttpResponse<String>> f : busy) {
            assertEquals(200, f.get().statusCode());
        }
        Await.until(WAIT, "a idle again in the router's eyes", () -> ra.load() == 0, () -> "a: " + ra.loadEstimate().lastReading());
        // b cached the prefix too when it served the request sent away, so both hold 8 blocks at equal load: kv_exact
        // decides again, and the draw among equal candidates (kv_exact's anti-herding) may pick either.
        String back = route(router, sibling);
        assertTrue(back.contains("tier=kv_exact") && back.contains("longest cached prefix 8/8"), back);
    }

    private static long lastSeq(Gateway g, EndpointState ep) {
        return g.kv().status().stream().filter(s -> s.endpointId() == ep.id()).mapToLong(s -> s.lastSeq()).max().orElse(-1);
    }

    @Test
    void anEngineWithoutMetricsIsRoutedOnLocalCountsAndFlaggedStale() throws Exception {
        EngineSimulator withMetrics = sim(SimHttp.fast(Dialect.SGLANG).enableMetrics(true));
        EngineSimulator without = sim(SimHttp.fast(Dialect.SGLANG)); // no --enable-metrics: /metrics is a 404
        Gateway g = gateway(rule("least_outstanding", "    engine: sglang\n", "url: " + withMetrics.baseUrl(),
            "url: " + without.baseUrl()));
        EndpointState w = endpoint(g, withMetrics);
        EndpointState n = endpoint(g, without);
        Await.until(WAIT, "both scraped", () -> g.loadScraper().scrapes(n.key(), Result.NOT_FOUND) >= 2
            && w.loadEstimate().loadSource() == LoadEstimate.LoadSource.ENGINE, () -> "w " + w.loadEstimate().loadSource() + " n " + n.loadEstimate().loadSource());
        assertEquals(LoadEstimate.LoadSource.UNKNOWN, n.loadEstimate().loadSource());
        String m = metrics(g);
        assertTrue(m.contains("kvgate_engine_load_stale{endpoint=\"" + n.key() + "\",rule=\"chat\"} 1.0\n"), m);
        assertTrue(m.contains("kvgate_engine_load_stale{endpoint=\"" + w.key() + "\",rule=\"chat\"} 0.0\n"), m);
        assertTrue(m.contains("kvgate_engine_load_scrapes_total{endpoint=\"" + n.key() + "\",result=\"not_found\"} "), m);
        for (int i = 0; i < 4; i++) {
            String why = route(g, tokens(100 * i, 8));
            assertTrue(why.contains(n.key() + ":0(engine=unknown local=0)"), why);
            assertTrue(why.contains(w.key() + ":0(engine=0 local="), why);
        }
    }

    @Test
    void theUncachedPromptTokensChargedToAnEndpointReturnAtItsFirstResponseBytes() throws Exception {
        // kv_exact without KV events: every prompt token is uncached (the whole prompt is charged).
        EngineSimulator a = sim(SimHttp.fast(Dialect.VLLM).ttftMs(600).itlMs(100));
        Gateway g = gateway(rule("kv_exact", "    block_size: 16\n", "url: " + a.baseUrl()));
        EndpointState ep = endpoint(g, a);
        HttpResponse<InputStream> r = SimHttp.CLIENT.send(completion(g, tokens(3_000, 1_000), 12, true).build(),
            HttpResponse.BodyHandlers.ofInputStream());
        assertEquals(200, r.statusCode());
        assertEquals(1_000, ep.loadEstimate().prefillTokens(), "charged while the engine prefills (the head came before the first token)");
        assertEquals(1, ep.outstanding());
        try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
            String first = in.readLine();
            assertTrue(first != null && first.startsWith("data: "), first);
            Await.until(WAIT, "the charge handed back", () -> ep.loadEstimate().prefillTokens() == 0, () -> "prefill " + ep.loadEstimate().prefillTokens());
            assertEquals(1, ep.outstanding(), "the stream is still going: only its prefill is over");
            String line;
            String last = null;
            while ((line = in.readLine()) != null) {
                if (!line.isEmpty()) {
                    last = line;
                }
            }
            assertEquals("data: [DONE]", last);
        }
        Await.until(WAIT, "the request finished", () -> ep.outstanding() == 0, () -> "outstanding " + ep.outstanding());
        assertEquals(0, ep.loadEstimate().prefillTokens());
    }
}
