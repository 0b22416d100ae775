package io.kvgate.tools.monitoring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * What an operator looks at, against a real gateway in front of simulated vLLM engines publishing KV events: the
 * status page on the admin listener ({@code /ui}: auth, caching, CSP; then loaded in headless Chromium, which must
 * show every endpoint, keep polling, and show a drain made between two loads), and the metric families the Grafana
 * dashboard and the alert rules query, against a live scrape.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
@Tag("system")
class StatusPageSystemTest {
    private static final String TOKEN = "status-page-token";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Path CHROMIUM = Path.of("/usr/bin/chromium");
    /** Chromium's own start-up plus the page's first polls on a loaded 2-core machine; never a timeout under test. */
    private static final Duration CHROMIUM_WAIT = Duration.ofSeconds(90);
    private final List<EngineSimulator> sims = new ArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private Gateway gw;
    private Path root;
    private Path out;

    @BeforeAll
    void start() throws Exception {
        root = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize();
        out = Path.of("target", "status-page").toAbsolutePath();
        Files.createDirectories(out);
        Path modelDir = root.resolve("deploy/models/qwen3");
        StringBuilder eps = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            int kv = TestPorts.free();
            sims.add(EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM).model("qwen3")
                .modelDir(modelDir).ttftMs(1).itlMs(1).prefillUsPerToken(1).blockSize(16).hashSeed("0")
                .kvEvents("tcp://127.0.0.1:" + kv).kvEventsMode("bind")));
            eps.append("      - url: ").append(sims.get(i).baseUrl()).append("\n        kv_events: tcp://127.0.0.1:").append(kv).append('\n');
        }
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            health: {interval_ms: 60000}
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                tokenizer: %s
                block_size: 16
                hash_seed: "0"
                admission: {max_outstanding: 64}
                endpoints:
            %s""".formatted(TOKEN, modelDir, eps)));
        // Traffic, so the counters the page and the dashboard read are not all zero: repeated prefixes and one error.
        for (int i = 0; i < 6; i++) {
            HttpResponse<String> r = chat("a shared prefix long enough to fill more than one block of sixteen tokens, about caches"
                + " and gateways, question " + (i % 2), i % 2 == 0);
            assertEquals(200, r.statusCode(), r.body());
        }
        send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{bad json")));
    }

    @AfterAll
    void stop() {
        if (gw != null) {
            gw.close(100);
        }
        sims.forEach(EngineSimulator::close);
    }

    private HttpResponse<String> send(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> chat(String content, boolean stream) throws IOException, InterruptedException {
        return send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"qwen3\",\"max_tokens\":3,"
                + "\"stream\":" + stream + ",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]}")));
    }

    private HttpRequest.Builder admin(String path) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.adminPort() + path));
    }

    private static String basic(String user, String password) {
        return "Basic " + Base64.getEncoder().encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
    }

    @Test
    @Order(1)
    void pageNeedsTheAdminTokenAndIsCachedByEtagUnderAStrictPolicy() throws Exception {
        HttpResponse<String> anonymous = send(admin("/ui"));
        assertEquals(401, anonymous.statusCode());
        List<String> challenges = anonymous.headers().allValues("www-authenticate");
        assertTrue(challenges.stream().anyMatch(c -> c.startsWith("Basic realm=")), "a browser must be asked: " + challenges);
        assertEquals(401, send(admin("/ui").header("authorization", basic("ops", "wrong"))).statusCode());
        assertEquals(401, send(admin("/ui").header("authorization", "Basic not-base64!")).statusCode());
        assertEquals(401, send(admin("/admin/v1/stats").header("authorization", basic("ops", "wrong"))).statusCode());

        HttpResponse<String> page = send(admin("/ui").header("authorization", "Bearer " + TOKEN));
        assertEquals(200, page.statusCode());
        assertEquals("text/html; charset=utf-8", page.headers().firstValue("content-type").orElseThrow());
        assertTrue(page.body().contains("<title>kvgate status</title>"));
        String csp = page.headers().firstValue("content-security-policy").orElseThrow();
        assertTrue(csp.startsWith("default-src 'none'; script-src 'sha256-"), csp);
        assertTrue(csp.contains("connect-src 'self'"), csp);
        assertFalse(csp.contains("unsafe"), csp);
        assertFalse(Pattern.compile("(src|href)=\"(https?:)?//").matcher(page.body()).find(), "no external asset");
        String etag = page.headers().firstValue("etag").orElseThrow();
        assertEquals("no-cache", page.headers().firstValue("cache-control").orElseThrow());

        HttpResponse<String> again = send(admin("/ui").header("authorization", basic("anyone", TOKEN)).header("if-none-match", etag));
        assertEquals(304, again.statusCode());
        assertEquals("", again.body());
        assertEquals(200, send(admin("/ui").header("authorization", basic("anyone", TOKEN)).header("if-none-match", "\"other\"")).statusCode());
        HttpResponse<String> post = send(admin("/ui").header("authorization", "Bearer " + TOKEN).POST(HttpRequest.BodyPublishers.noBody()));
        assertEquals(405, post.statusCode());
        assertEquals("GET, HEAD", post.headers().firstValue("allow").orElseThrow());
        assertEquals("invalid_request_error", JSON.readTree(post.body()).at("/error/type").asText(), post.body());
    }

    @Test
    @Order(2)
    void statsRouteCarriesTheCountersOfTheHitRatioAndItsLosses() throws Exception {
        HttpResponse<String> r = send(admin("/admin/v1/stats").header("authorization", basic("ops", TOKEN)));
        assertEquals(200, r.statusCode(), r.body());
        JsonNode rule = JSON.readTree(r.body()).at("/rules/0");
        assertEquals("chat", rule.get("name").asText());
        assertEquals(6, rule.get("lookups").asLong(), r.body());
        assertTrue(rule.get("prompt_blocks").asLong() > 0, r.body());
        assertTrue(rule.at("/misses/no_match").isIntegralNumber(), r.body());
        assertTrue(rule.at("/tiers/kv_exact").isIntegralNumber(), r.body());
        JsonNode ep = JSON.readTree(send(admin("/admin/v1/endpoints").header("authorization", "Bearer " + TOKEN)).body())
            .at("/rules/0/endpoints/0");
        assertTrue(ep.has("load") && ep.has("load_source"), ep.toString());
    }

    @Test
    @Order(3)
    void chromiumShowsEveryEndpointKeepsPollingAndShowsADrain() throws Exception {
        assumeTrue(Files.isExecutable(CHROMIUM), "Debian chromium is not installed (.ci/setup installs it): " + CHROMIUM);
        String url = "http://ops:" + TOKEN + "@127.0.0.1:" + gw.adminPort() + "/ui";
        String dom = chromium(url, "--dump-dom");
        Files.writeString(out.resolve("first.html"), dom);
        for (EngineSimulator s : sims) {
            String key = URI.create(s.baseUrl()).getAuthority();
            assertTrue(dom.contains("data-endpoint=\"" + key + "\" data-state=\"up\""), "endpoint " + key + " shown up:\n" + dom);
        }
        assertTrue(polls(dom) >= 3, "the page polled at least three times in its 10 s of virtual time:\n" + dom);
        assertTrue(dom.contains("data-rule=\"chat\""), dom);
        assertTrue(dom.contains("data-chart=\"chat:hit_ratio\""), "the hit-ratio chart is drawn:\n" + dom);
        assertTrue(dom.contains("data-chart=\"chat:misses\""), "the loss-cause chart is drawn:\n" + dom);
        assertTrue(dom.contains("class=\"subscriber"), "subscribers listed:\n" + dom);
        assertFalse(dom.contains("class=\"meta error\""), "no poll failed:\n" + dom);

        String drained = URI.create(sims.get(1).baseUrl()).getAuthority();
        HttpResponse<String> d = send(admin("/control/v1/endpoints/" + drained + "/drain").header("authorization", "Bearer " + TOKEN)
            .POST(HttpRequest.BodyPublishers.noBody()));
        assertEquals(200, d.statusCode(), d.body());
        try {
            String after = chromium(url, "--dump-dom");
            Files.writeString(out.resolve("after-drain.html"), after);
            assertTrue(after.contains("data-endpoint=\"" + drained + "\" data-state=\"drained\""), after);
            Path png = out.resolve("status-page.png");
            Files.deleteIfExists(png);
            // Traffic while the page samples, so its charts have something to draw: repeated prefixes (hits) and new
            // ones (no_match). Bounded, and stopped when Chromium is done.
            java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
            Thread traffic = Thread.ofVirtual().start(() -> {
                for (int i = 0; i < 300 && !done.get(); i++) {
                    try {
                        chat((i % 3 == 0 ? "a fresh question number " + i + " " : "") + "a shared prefix long enough to fill more than"
                            + " one block of sixteen tokens, about caches and gateways, question " + (i % 2), false);
                    } catch (Exception e) {
                        return;
                    }
                }
            });
            try {
                chromium(url, "--screenshot=" + png, "--window-size=1400,1000", "--hide-scrollbars", "--virtual-time-budget=40000");
            } finally {
                done.set(true);
                traffic.join(Duration.ofSeconds(30));
            }
            byte[] head = Files.readAllBytes(png);
            assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, java.util.Arrays.copyOf(head, 4), "a PNG screenshot");
            assertTrue(head.length > 20_000, "a screenshot with content, " + head.length + " bytes");
        } finally {
            send(admin("/control/v1/endpoints/" + drained + "/undrain").header("authorization", "Bearer " + TOKEN)
                .POST(HttpRequest.BodyPublishers.noBody()));
        }
    }

    @Test
    @Order(4)
    void everyFamilyTheDashboardAndAlertsQueryIsInALiveScrape() throws Exception {
        HttpResponse<String> scrape = send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/metrics")));
        assertEquals(200, scrape.statusCode());
        Files.writeString(out.resolve("scrape.txt"), scrape.body());
        Set<String> live = MetricFamilies.namesIn(scrape.body());
        // A labelled counter has no series until its first event (an engine error, a shed request), and the text
        // format leaves a family without samples out: such families count when the gateway registers them, which
        // docs/metrics.md lists (MetricsCatalogueSystemTest keeps it equal to the registry).
        Set<String> registered = MetricFamilies.registeredIn(Files.readString(root.resolve("docs/metrics.md")));
        Set<String> missing = new TreeSet<>();
        MetricFamilies known = MetricFamilies.load();
        for (String name : MetricFamilies.referenced(root)) {
            if (!live.contains(name) && !registered.contains(name)) {
                missing.add(name);
            }
        }
        assertTrue(missing.isEmpty(), "queried by deploy/grafana or deploy/prometheus but absent from a live scrape: " + missing
            + " (scrape kept in " + out.resolve("scrape.txt") + ")");
        Set<String> unlisted = new TreeSet<>();
        known.families().forEach((family, type) -> {
            if (!live.containsAll(MetricFamilies.series(family, type))
                && !registered.containsAll(MetricFamilies.series(family, type))) {
                unlisted.add(family);
            }
        });
        assertTrue(unlisted.isEmpty(), "metric-families.txt lists families a live scrape lacks: " + unlisted);
    }

    private static int polls(String dom) {
        Matcher m = Pattern.compile("data-polls=\"(\\d+)\"").matcher(dom);
        return m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    /**
     * Runs headless Chromium on the page for 10 s of virtual time unless {@code action} sets another budget (timers
     * run fast; the polls' requests are real and waited for) and returns its standard output. A fresh profile each run: nothing cached between loads.
     */
    private String chromium(String url, String... action) throws Exception {
        Path profile = Files.createTempDirectory(out, "profile-");
        List<String> cmd = new ArrayList<>(List.of(CHROMIUM.toString(), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--user-data-dir=" + profile));
        cmd.addAll(List.of(action));
        if (cmd.stream().noneMatch(a -> a.startsWith("--virtual-time-budget="))) {
            cmd.add("--virtual-time-budget=10000");
        }
        cmd.add(url);
        Path stdout = Files.createTempFile(out, "chromium-", ".out");
        Process p = new ProcessBuilder(cmd).redirectOutput(stdout.toFile()).redirectError(out.resolve("chromium.log").toFile()).start();
        try {
            assertTrue(p.waitFor(CHROMIUM_WAIT.toSeconds(), TimeUnit.SECONDS), "chromium did not finish in " + CHROMIUM_WAIT);
            assertEquals(0, p.exitValue(), () -> "chromium failed; see " + out.resolve("chromium.log"));
            return Files.readString(stdout);
        } finally {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }
}
