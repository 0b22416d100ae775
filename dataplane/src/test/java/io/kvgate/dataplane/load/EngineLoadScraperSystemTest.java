package io.kvgate.dataplane.load;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.load.EngineLoadScraper.Result;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineReading;
import io.kvgate.dataplane.route.Policies;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.testkit.TestPorts;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The load scraper against stand-in engines on loopback: pages read per rank and published to the endpoints, a
 * malformed page read around its bad lines, an engine without {@code /metrics} (404), an oversized page, a refused
 * connection, a page without load families, the kept-alive connection, and scraping turned off by a reload.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
@Tag("system")
class EngineLoadScraperSystemTest {
    private static final String VLLM_PAGE = """
        # HELP vllm:num_requests_running Number of requests in model execution batches.
        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{engine="0",model_name="m"} 3.0
        vllm:num_requests_running{engine="1",model_name="m"} 1.0
        # TYPE vllm:num_requests_waiting gauge
        vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
        vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
        # TYPE vllm:kv_cache_usage_perc gauge
        vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
        vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
        """;

    private final ConcurrentHashMap<Integer, String> pages = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, Integer> statuses = new ConcurrentHashMap<>();
    private final Set<Integer> clientPorts = ConcurrentHashMap.newKeySet();
    private final AtomicInteger served = new AtomicInteger();
    private final Set<String> paths = ConcurrentHashMap.newKeySet();
    private HttpServer a;
    private HttpServer b;
    private EngineLoadScraper scraper;
    private AutoCloseable refused;

    private HttpServer engine() throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
        int port = s.getAddress().getPort();
        com.sun.net.httpserver.HttpHandler page = ex -> {
            served.incrementAndGet();
            paths.add(ex.getRequestURI().getPath());
            clientPorts.add(ex.getRemoteAddress().getPort());
            byte[] body = pages.getOrDefault(port, "").getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("content-type", "text/plain; version=0.0.4; charset=utf-8");
            ex.sendResponseHeaders(statuses.getOrDefault(port, 200), body.length == 0 ? -1 : body.length);
            if (body.length > 0) {
                try (OutputStream o = ex.getResponseBody()) {
                    o.write(body);
                }
            }
            ex.close();
        };
        s.createContext("/metrics", page);
        s.createContext("/prometheus/metrics", page);
        s.start();
        return s;
    }

    @AfterEach
    void stop() throws Exception {
        if (scraper != null) {
            scraper.close();
        }
        for (HttpServer s : new HttpServer[] {a, b}) {
            if (s != null) {
                s.stop(0);
            }
        }
        if (refused != null) {
            refused.close();
        }
    }

    private static GatewayConfig.Load load(boolean enabled, int maxBody) {
        return new GatewayConfig.Load(enabled, 20, 2_000, 2_000, maxBody, "/metrics");
    }

    private List<Rule> rules(int... ports) throws Exception {
        return rules("", ports);
    }

    /** @param extra rule keys, each line indented as a rule's ("    engine: trtllm\n") */
    private List<Rule> rules(String extra, int... ports) throws Exception {
        StringBuilder y = new StringBuilder("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nrules:\n  - name: r\n    models: [m]\n"
            + extra + "    policy: least_outstanding\n    endpoints:\n");
        for (int p : ports) {
            y.append("      - url: http://127.0.0.1:").append(p).append('\n');
        }
        GatewayConfig cfg = GatewayConfig.parse(y.toString());
        return RouteTable.build(cfg, new EndpointRegistry(), ctx -> Policies.create("least_outstanding")).rules();
    }

    private EngineLoadScraper start(List<Rule> rules, AtomicReference<GatewayConfig.Load> cfg) {
        return start(rules, cfg, null);
    }

    private EngineLoadScraper start(List<Rule> rules, AtomicReference<GatewayConfig.Load> cfg, SteppedRounds rounds) {
        MultiThreadIoEventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        if (rounds != null) {
            rounds.group = group;
        }
        scraper = new EngineLoadScraper(group, NioSocketChannel.class, () -> rules, cfg::get, NanoClock.SYSTEM,
            new io.kvgate.dataplane.tls.UpstreamTls(), rounds);
        scraper.start();
        return scraper;
    }

    /** Rounds that run only when the test steps them (the first runs at start), each to its end on the scraper's loop. */
    private static final class SteppedRounds implements EngineLoadScraper.RoundTimer {
        private final LinkedBlockingQueue<Runnable> due = new LinkedBlockingQueue<>();
        MultiThreadIoEventLoopGroup group;

        @Override
        public void schedule(Runnable round, long delayMs) {
            due.add(round);
        }

        void step() throws Exception {
            Runnable round = due.poll(20, TimeUnit.SECONDS);
            assertNotNull(round, "the scraper scheduled its next round");
            group.submit(round).get(20, TimeUnit.SECONDS);
        }
    }

    private static void await(String what, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out waiting for " + what);
            }
            TimeUnit.MILLISECONDS.sleep(5);
        }
    }

    @Test
    void pagesArePublishedPerRankOverOneKeptAliveConnection() throws Exception {
        a = engine();
        b = engine();
        int pa = a.getAddress().getPort();
        int pb = b.getAddress().getPort();
        pages.put(pa, VLLM_PAGE);
        pages.put(pb, "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"} 7\n"
            + "sglang:num_queue_reqs{model_name=\"m\",tp_rank=\"0\",pp_rank=\"0\"} 1\n");
        List<Rule> rules = rules(pa, pb);
        EndpointState ea = rules.get(0).endpoints().get(0);
        EndpointState eb = rules.get(0).endpoints().get(1);
        start(rules, new AtomicReference<>(load(true, 1 << 20)));
        await("five scrapes of each", () -> scraper.scrapes(ea.key(), Result.OK) >= 5 && scraper.scrapes(eb.key(), Result.OK) >= 5);
        EngineReading r = ea.loadEstimate().lastReading();
        assertNotNull(r);
        assertEquals(2, r.ranks());
        assertEquals(3, r.running(0));
        assertEquals(2, r.waiting(0));
        assertEquals(0.25, r.kvUsage(1));
        assertEquals(8, eb.loadEstimate().lastReading().runningTotal() + eb.loadEstimate().lastReading().waitingTotal());
        assertEquals(2, clientPorts.size(), "one kept-alive connection per endpoint for all its scrapes: " + clientPorts);

        pages.put(pa, VLLM_PAGE.replace("} 3.0", "} 9.0"));
        await("the new value", () -> ea.loadEstimate().lastReading().running(0) == 9);

        String text = scrape(scraper);
        assertTrue(text.contains("kvgate_engine_load_running{endpoint=\"" + ea.key() + "\",rank=\"0\"} 9.0\n"), text);
        assertTrue(text.contains("kvgate_engine_load_waiting{endpoint=\"" + ea.key() + "\",rank=\"1\"} 0.0\n"), text);
        assertTrue(text.contains("kvgate_engine_load_kv_usage{endpoint=\"" + ea.key() + "\",rank=\"0\"} 0.5\n"), text);
        assertTrue(text.contains("kvgate_engine_load_age_seconds{endpoint=\"" + eb.key() + "\"} "), text);
        assertTrue(text.contains("kvgate_engine_load_malformed_lines_total{endpoint=\"" + ea.key() + "\"} 0.0\n"), text);
        assertTrue(text.contains("kvgate_engine_load_scrapes_total{endpoint=\"" + ea.key() + "\",result=\"ok\"} "), text);
    }

    @Test
    void trtllmIsScrapedAtPrometheusMetricsAndItsBlockSizeIsCheckedAgainstTheRules() throws Exception {
        a = engine();
        int pa = a.getAddress().getPort();
        pages.put(pa, """
            # TYPE trtllm_num_requests_running gauge
            trtllm_num_requests_running{engine_type="undefined",model_name="undefined",pid="77"} 4.0
            # TYPE trtllm_num_requests_waiting gauge
            trtllm_num_requests_waiting{engine_type="undefined",model_name="undefined",pid="77"} 6.0
            # TYPE trtllm_kv_cache_utilization gauge
            trtllm_kv_cache_utilization{engine_type="undefined",model_name="undefined",pid="77"} 0.5
            # TYPE trtllm_kv_cache_tokens_per_block gauge
            trtllm_kv_cache_tokens_per_block{engine_type="undefined",model_name="undefined",pid="77"} 64.0
            """);
        List<Rule> rules = rules("    engine: trtllm\n    block_size: 32\n", pa);
        EndpointState ea = rules.get(0).endpoints().get(0);
        // load.path unset: each engine's own page
        start(rules, new AtomicReference<>(new GatewayConfig.Load(true, 20, 2_000, 2_000, 1 << 20, null)));
        await("a scrape", () -> scraper.scrapes(ea.key(), Result.OK) >= 1);
        assertEquals(Set.of("/prometheus/metrics"), paths, "trtllm-serve's /metrics is JSON");
        assertEquals("/prometheus/metrics", scraper.pathOf(ea.key()));
        EngineReading r = ea.loadEstimate().lastReading();
        assertEquals(4, r.running(0));
        assertEquals(6, r.waiting(0));
        assertEquals(0.5, r.kvUsage(0));
        assertEquals(64, scraper.tokensPerBlock(ea.key()), "what ctl doctor compares with the rule's block_size 32");
    }

    @Test
    void aMalformedPageIsReadAroundItsBadLinesAndTheScraperCarriesOn() throws Exception {
        a = engine();
        int pa = a.getAddress().getPort();
        pages.put(pa, "vllm:num_requests_running{engine=\"0\"} 4\nvllm:num_requests_waiting{engine=\"0\" 2\n"
            + "garbage line here\nvllm:num_requests_waiting{engine=\"0\"} 5\n");
        List<Rule> rules = rules(pa);
        EndpointState ea = rules.get(0).endpoints().get(0);
        start(rules, new AtomicReference<>(load(true, 1 << 20)));
        await("two scrapes", () -> scraper.scrapes(ea.key(), Result.OK) >= 2);
        assertEquals(4, ea.loadEstimate().lastReading().running(0));
        assertEquals(5, ea.loadEstimate().lastReading().waiting(0));
        assertTrue(scraper.malformedLines(ea.key()) >= 4, "two bad lines per page: " + scraper.malformedLines(ea.key()));
        assertEquals(0, scraper.malformedLines(ea.key()) % 2);

        pages.put(pa, "\u0000\u0001 binary \u00ff\n{\n");
        long before = scraper.scrapes(ea.key(), Result.NO_METRICS);
        await("pages with no load family", () -> scraper.scrapes(ea.key(), Result.NO_METRICS) >= before + 2);
        assertEquals(5, ea.loadEstimate().lastReading().waiting(0), "nothing published: the last reading ages instead");
        pages.put(pa, "vllm:num_requests_running{engine=\"0\"} 1\n");
        await("back to a good page", () -> ea.loadEstimate().lastReading().running(0) == 1);
    }

    @Test
    void anEngineWithoutMetricsAnOversizedPageAndARefusedConnectionPublishNothing() throws Exception {
        a = engine();
        b = engine();
        int pa = a.getAddress().getPort();
        int pb = b.getAddress().getPort();
        statuses.put(pa, 404); // SGLang without --enable-metrics
        pages.put(pa, "Not Found");
        pages.put(pb, VLLM_PAGE + "#" + "x".repeat(4096) + "\n");
        var closed = TestPorts.refused();
        refused = closed;
        List<Rule> rules = rules(pa, pb, closed.port());
        EndpointState ea = rules.get(0).endpoints().get(0);
        EndpointState eb = rules.get(0).endpoints().get(1);
        EndpointState ec = rules.get(0).endpoints().get(2);
        start(rules, new AtomicReference<>(load(true, 1024)));
        await("each endpoint's failure twice", () -> scraper.scrapes(ea.key(), Result.NOT_FOUND) >= 2
            && scraper.scrapes(eb.key(), Result.TOO_LARGE) >= 2 && scraper.scrapes(ec.key(), Result.CONNECT_ERROR) >= 2);
        assertNull(ea.loadEstimate().lastReading());
        assertNull(eb.loadEstimate().lastReading(), "a page over load.max_body_bytes is not read at all");
        assertNull(ec.loadEstimate().lastReading());
        assertEquals(0, scraper.scrapes(ea.key(), Result.OK));
        String m = scrape(scraper);
        assertTrue(m.contains("kvgate_engine_load_scrapes_total{endpoint=\"" + ea.key() + "\",result=\"not_found\"} "), m);
        assertTrue(m.contains("kvgate_engine_load_scrapes_total{endpoint=\"" + ec.key() + "\",result=\"connect_error\"} "), m);
    }

    @Test
    void anEngineThatNeverAnswersTimesOutAndIsScrapedAgain() throws Exception {
        // A listening socket nobody accepts on: the kernel completes the connection, the request is sent, no answer.
        try (java.net.ServerSocket silent = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            List<Rule> rules = rules(silent.getLocalPort());
            EndpointState ep = rules.get(0).endpoints().get(0);
            start(rules, new AtomicReference<>(new GatewayConfig.Load(true, 20, 2_000, 50, 1 << 20, "/metrics")));
            await("two timed-out scrapes", () -> scraper.scrapes(ep.key(), Result.TIMEOUT) >= 2);
            assertNull(ep.loadEstimate().lastReading());
            assertEquals(0, scraper.scrapes(ep.key(), Result.OK));
        }
    }

    @Test
    void turningScrapingOffWithdrawsTheReadings() throws Exception {
        a = engine();
        int pa = a.getAddress().getPort();
        pages.put(pa, VLLM_PAGE);
        List<Rule> rules = rules(pa);
        EndpointState ea = rules.get(0).endpoints().get(0);
        AtomicReference<GatewayConfig.Load> cfg = new AtomicReference<>(load(true, 1 << 20));
        SteppedRounds rounds = new SteppedRounds();
        start(rules, cfg, rounds); // the first round runs at start and scrapes
        await("a reading", () -> ea.loadEstimate().lastReading() != null);
        cfg.set(load(false, 1 << 20));
        rounds.step();
        assertNull(ea.loadEstimate().lastReading(), "withdrawn by the first round that saw load.enabled false");
        long startedThen = scraper.scrapesStarted();
        int servedThen = served.get();
        for (int i = 0; i < 5; i++) {
            rounds.step();
        }
        assertEquals(startedThen, scraper.scrapesStarted(), "load.enabled false: five rounds ran, none scraped");
        cfg.set(load(true, 1 << 20));
        rounds.step();
        await("scraping again", () -> ea.loadEstimate().lastReading() != null);
        // The engine saw exactly the one scrape of the round that turned scraping back on.
        assertEquals(servedThen + 1, served.get());
    }

    /** The scraper's families alone, in the text format. */
    private static String scrape(EngineLoadScraper scraper) {
        var registry = new io.prometheus.metrics.model.registry.PrometheusRegistry();
        scraper.registerMetrics(registry);
        return io.kvgate.dataplane.metrics.MetricsExposition.text(registry);
    }
}
