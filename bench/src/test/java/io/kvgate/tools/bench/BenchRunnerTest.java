package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.clock.NanoClock;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** System tests: the real generator against a scripted server on loopback. */
@Timeout(60)
@Tag("system")
class BenchRunnerTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String[] TOKENS = {"a", "b", "c", "d", "e"};

    private final ByteArrayOutputStream logBytes = new ByteArrayOutputStream();
    private final PrintStream log = new PrintStream(logBytes, true, StandardCharsets.UTF_8);

    private BenchReport run(BenchConfig config) {
        return BenchRunner.run(config, NanoClock.SYSTEM, log);
    }

    private static BenchConfig.Builder base(String url) {
        return BenchConfig.builder().target(url).model("m").progress(false)
            .arrival(ArrivalScheduler.Arrival.CONSTANT).timeout(10).drain(10);
    }

    @Test
    void streamingRunMeasuresEveryRequestAndWritesTheReportFiles(@TempDir Path dir) throws Exception {
        try (TestLlmServer server = new TestLlmServer(body -> TestLlmServer.Plan.sse(TestLlmServer.stream(TOKENS, 100, 40)))) {
            Path out = dir.resolve("run.json");
            BenchReport report = run(base(server.url()).rate(200).duration(0.5).stream(true).out(out)
                .header("X-Kvgate-Explain", "1").build());
            TargetReport t = report.first();
            assertEquals(100, t.scheduled);
            assertEquals(100, t.requests);
            assertEquals(100, t.ok);
            assertEquals(0, t.errors);
            assertEquals(100, t.latencyMs.count());
            assertEquals(100, t.ttftMs.count());
            assertEquals(400, t.itlMs.count()); // 5 content frames = 4 gaps per request
            assertEquals(500, t.outputTokens);
            assertEquals(10_000, t.promptTokens);
            assertEquals(0.4, t.cachedTokensRatio, 1e-9);
            assertTrue(t.ttftMs.p50() <= t.latencyMs.p50());
            assertEquals(200.0, t.offeredRps, 1e-9);

            JsonNode j = JSON.readTree(out.toFile());
            for (String field : List.of("requests", "errors", "errors_by_class", "offered_rps", "achieved_rps",
                "latency_ms", "ttft_ms", "itl_ms", "output_tokens_per_s", "cached_tokens_ratio", "schedule", "config", "targets")) {
                assertTrue(j.has(field), field);
            }
            for (String h : List.of("latency_ms", "ttft_ms", "itl_ms")) {
                for (String p : List.of("p50", "p90", "p99", "max")) {
                    assertTrue(j.get(h).get(p).isNumber(), h + "." + p);
                }
            }
            assertEquals(100, j.get("requests").asLong());
            assertEquals(0, j.get("errors").asLong());
            assertEquals(0, j.get("errors_by_class").get("http_5xx").asLong());
            assertEquals(0.4, j.get("cached_tokens_ratio").asDouble(), 1e-9);
            assertEquals(1, j.get("targets").size());
            assertFalse(j.get("schedule").get("shortfall").asBoolean(false) && j.get("schedule").get("unsent") != null);
            for (String f : List.of("run.latency.hgrm", "run.ttft.hgrm", "run.itl.hgrm", "run.svg")) {
                assertTrue(Files.size(dir.resolve(f)) > 100, f);
            }
            assertTrue(Files.readString(dir.resolve("run.latency.hgrm")).contains("Percentile"));
            String svg = Files.readString(dir.resolve("run.svg"));
            assertTrue(svg.startsWith("<svg") && svg.contains("polyline") && svg.trim().endsWith("</svg>"));

            // What went on the wire.
            String first = server.bodies.peek();
            JsonNode req = JSON.readTree(first);
            assertEquals("m", req.get("model").asText());
            assertTrue(req.get("stream").asBoolean());
            assertTrue(req.get("stream_options").get("include_usage").asBoolean());
            assertEquals("/v1/chat/completions", server.paths.peek());
            assertTrue(server.headers.peek().contains("X-Kvgate-Explain: 1"), server.headers.peek());
            assertTrue(server.connections.get() <= 100);
        }
    }

    @Test
    void streamErrorsAreClassified() throws Exception {
        AtomicInteger n = new AtomicInteger();
        List<TestLlmServer.Plan> plans = List.of(
            TestLlmServer.Plan.sse(TestLlmServer.stream(TOKENS, 10, 0)),
            TestLlmServer.Plan.json(500, "{\"error\":{\"message\":\"boom\"}}"),
            TestLlmServer.Plan.json(404, "{\"error\":{\"message\":\"no such model\"}}"),
            TestLlmServer.Plan.sse(List.of("data: " + TestLlmServer.chatChunk("a") + "\n\n",
                "data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\n", "data: [DONE]\n\n")),
            TestLlmServer.Plan.sse(List.of("data: " + TestLlmServer.chatChunk("a") + "\n\n")).truncated(),
            TestLlmServer.Plan.sse(List.of("data: " + TestLlmServer.chatChunk("a") + "\n\n")),
            TestLlmServer.Plan.sse(List.of("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}\n\n", "data: [DONE]\n\n")),
            TestLlmServer.Plan.json(200, TestLlmServer.chatBody("x", 1, 1, 0)),
            TestLlmServer.Plan.sse(List.of("data: [DONE]\n\n", "data: " + TestLlmServer.chatChunk("late") + "\n\n")),
            TestLlmServer.Plan.json(302, "{}"));
        try (TestLlmServer server = new TestLlmServer(body -> plans.get(n.getAndIncrement() % plans.size()))) {
            // One connection at a time, so the plans are served in order.
            TargetReport t = run(base(server.url()).rate(50).duration(0.2).stream(true).concurrencyLimit(1).build()).first();
            assertEquals(10, t.requests);
            assertEquals(1, t.ok);
            assertEquals(1, t.errors(ErrorClass.HTTP_5XX));
            assertEquals(1, t.errors(ErrorClass.HTTP_4XX));
            assertEquals(1, t.errors(ErrorClass.HTTP_OTHER));
            assertEquals(2, t.errors(ErrorClass.STREAM_ERROR)); // error frame; JSON answer to a stream request
            assertEquals(2, t.errors(ErrorClass.TRUNCATED));    // closed mid-stream; ended without [DONE]
            assertEquals(2, t.errors(ErrorClass.INVALID_JSON)); // broken frame; data after [DONE]
            assertEquals(9, t.errors);
        }
    }

    @Test
    void nonStreamErrorsAreClassified() throws Exception {
        AtomicInteger n = new AtomicInteger();
        List<TestLlmServer.Plan> plans = List.of(
            TestLlmServer.Plan.json(200, TestLlmServer.chatBody("hello", 50, 3, 25)),
            TestLlmServer.Plan.json(200, "{\"choices\":[{\"message\""),
            TestLlmServer.Plan.json(200, "{\"error\":{\"message\":\"hidden\"}}"),
            TestLlmServer.Plan.json(200, "{\"id\":\"no choices\"}"),
            TestLlmServer.Plan.json(503, "overloaded"));
        try (TestLlmServer server = new TestLlmServer(body -> plans.get(n.getAndIncrement() % plans.size()))) {
            TargetReport t = run(base(server.url()).rate(50).duration(0.1).concurrencyLimit(1).build()).first();
            assertEquals(5, t.requests);
            assertEquals(1, t.ok);
            assertEquals(2, t.errors(ErrorClass.INVALID_JSON));
            assertEquals(1, t.errors(ErrorClass.ERROR_BODY));
            assertEquals(1, t.errors(ErrorClass.HTTP_5XX));
            assertEquals(0.5, t.cachedTokensRatio, 1e-9);
            assertEquals(3, t.outputTokens);
            assertEquals(1, t.ttftMs.count()); // non-stream TTFT = first byte
        }
    }

    @Test
    void timeoutsAndConnectFailuresAreClassified() throws Exception {
        try (TestLlmServer server = new TestLlmServer(body -> TestLlmServer.Plan.noAnswer())) {
            TargetReport t = run(base(server.url()).rate(10).duration(0.3).timeout(0.2).drain(3).build()).first();
            assertEquals(3, t.requests);
            assertEquals(3, t.errors(ErrorClass.TIMEOUT));
        }
        try (RefusedPort closed = TestPorts.refused()) {
            TargetReport t = run(base(closed.url()).rate(20).duration(0.25).build()).first();
            assertEquals(5, t.requests);
            assertEquals(5, t.errors(ErrorClass.CONNECT));
        }
    }

    /**
     * The coordinated-omission test: a server that takes 20 ms per request, one connection, 200 requests/s offered.
     * Each response takes 20 ms from its actual send, but requests queue behind each other, so latency from the
     * INTENDED start grows to about 1.5 s for the last ones. A generator that measured from the actual send (or
     * waited for each response before scheduling the next) would report ~20 ms.
     */
    @Test
    void aStallingServerShowsUpInLatencyMeasuredFromIntendedStart() throws Exception {
        try (TestLlmServer server = new TestLlmServer(body -> TestLlmServer.Plan.json(200, TestLlmServer.chatBody("x", 1, 1, 0)).delayed(20))) {
            TargetReport t = run(base(server.url()).rate(200).duration(0.5).concurrencyLimit(1).progress(true).build()).first();
            assertEquals(100, t.ok);
            // Service time is 20 ms; 100 requests need >= 2 s of service for 0.5 s of arrivals.
            assertTrue(t.latencyMs.p99() >= 1000, "p99 " + t.latencyMs.p99());
            assertTrue(t.latencyMs.p50() >= 500, "p50 " + t.latencyMs.p50());
            assertTrue(t.lateSends > 50, "late sends " + t.lateSends);
            assertTrue(t.connectionLimitWaits > 50, "limit waits " + t.connectionLimitWaits);
            assertTrue(t.shortfall());
            assertEquals(200.0, t.offeredRps, 1e-9);
            assertTrue(t.achievedRps < 60, "achieved " + t.achievedRps); // the server's capacity, ~50/s
            String log = logBytes.toString(StandardCharsets.UTF_8);
            assertTrue(log.contains("WARNING") && log.contains("connection limit"), log);
            assertTrue(log.contains("behind schedule"), log);
            assertTrue(log.contains("latency p50"), log); // the once-a-second progress line
        }
    }

    @Test
    void closedLoopSaturatesWithAFixedNumberOfConnections() throws Exception {
        try (TestLlmServer server = new TestLlmServer(body -> TestLlmServer.Plan.json(200, TestLlmServer.chatBody("x", 1, 1, 0)).delayed(5))) {
            BenchReport report = run(base(server.url()).closedLoop(4).duration(0.5).build());
            TargetReport t = report.first();
            assertEquals("closed-loop", t.mode);
            assertEquals(0, t.errors);
            assertTrue(Double.isNaN(t.offeredRps));
            // Saturation, seen by the server rather than counted against the clock (a CPU-starved run completed only
            // 8 requests in the 0.5 s): exactly 4 connections, 4 requests outstanding at once and never more.
            assertEquals(4, server.connections.get());
            assertEquals(4, server.maxInFlight.get(), "most requests outstanding at once");
            assertTrue(t.ok >= 4, "every connection's request completed: ok " + t.ok);
            // 4 connections x 5 ms service: at most ~800/s however fast the machine is.
            assertTrue(t.achievedRps < 900, "achieved " + t.achievedRps);
            assertTrue(report.toJson().contains("\"offered_rps\" : null"));
        }
    }

    @Test
    void compareRunsEachTargetAndReportsRatios(@TempDir Path dir) throws Exception {
        try (TestLlmServer slow = new TestLlmServer(body -> TestLlmServer.Plan.sse(TestLlmServer.stream(TOKENS, 10, 5)).delayed(50));
             TestLlmServer fast = new TestLlmServer(body -> TestLlmServer.Plan.sse(TestLlmServer.stream(TOKENS, 10, 0)))) {
            // The slow target is the baseline and runs first: the JVM's own warm-up can only make it slower,
            // which cannot make the assertion below pass by accident.
            BenchConfig.Builder b = BenchConfig.builder().model("m").progress(false).arrival(ArrivalScheduler.Arrival.CONSTANT)
                .rate(40).duration(0.5).warmup(0.5).stream(true).out(dir.resolve("cmp.json"));
            b.target("slow=" + slow.url()).target("fast=" + fast.url());
            BenchReport report = run(b.build());
            assertEquals(2, report.targets().size());
            assertEquals("slow", report.first().label);
            assertEquals(20, report.targets().get(0).ok);
            assertEquals(20, report.targets().get(1).ok);
            assertEquals(40, fast.requests.get()); // 20 in warmup, 20 measured
            assertEquals(40, slow.requests.get());
            // Same seed, same workload: identical bodies to both.
            assertEquals(List.copyOf(slow.bodies), List.copyOf(fast.bodies));
            // TTFT from the intended start includes the slow server's 50 ms delay.
            assertTrue(report.first().ttftMs.p50() >= 50, "slow ttft p50 " + report.first().ttftMs.p50());
            double ttftRatio = report.ratios(report.targets().get(1)).get("ttft_p50");
            double expected = report.targets().get(1).ttftMs.p50() / report.first().ttftMs.p50();
            assertEquals(expected, ttftRatio, 1e-9);
            assertEquals(report.targets().get(1).achievedRps / report.first().achievedRps,
                report.ratios(report.targets().get(1)).get("achieved_rps"), 1e-9);
            assertEquals(0.0, report.ratios(report.targets().get(1)).get("cached_tokens_ratio"), 1e-9);
            JsonNode j = JSON.readTree(dir.resolve("cmp.json").toFile());
            assertEquals("slow", j.get("comparison").get("baseline").asText());
            assertEquals(TargetReport.round(ttftRatio), j.get("comparison").get("fast").get("ttft_p50").asDouble(), 1e-9);
            assertEquals(2, j.get("targets").size());
            assertFalse(j.has("requests")); // per-target numbers live under targets[] in compare mode
            assertTrue(Files.exists(dir.resolve("cmp.fast.ttft.hgrm")));
            assertTrue(Files.exists(dir.resolve("cmp.slow.latency.hgrm")));
            String svg = Files.readString(dir.resolve("cmp.svg"));
            assertTrue(svg.contains("TTFT by target") && svg.contains("Throughput by target"));
            assertTrue(report.summary().contains("ratios vs slow"));
        }
    }

    @Test
    void multiTurnSendsTheGrowingHistoryWithTheServersReplies() throws Exception {
        AtomicInteger n = new AtomicInteger();
        try (TestLlmServer server = new TestLlmServer(body -> {
            int i = n.getAndIncrement();
            return TestLlmServer.Plan.sse(TestLlmServer.stream(new String[] {"reply", String.valueOf(i)}, 10, 0));
        })) {
            BenchConfig.Builder b = base(server.url()).rate(100).duration(0.3).stream(true).workload(BenchConfig.Workload.MULTI_TURN);
            b.conversations = 2;
            b.turns = 3;
            b.systemTokens = 5;
            b.questionTokens = 4;
            TargetReport t = run(b.build()).first();
            assertEquals(30, t.ok);
            int maxAssistant = 0;
            for (String body : server.bodies) {
                JsonNode messages = JSON.readTree(body).get("messages");
                int assistant = 0;
                for (JsonNode m : messages) {
                    if (m.get("role").asText().equals("assistant")) {
                        assistant++;
                        assertTrue(m.get("content").asText().startsWith("reply"), m.toString());
                    }
                }
                // system + user, then + (assistant + user) per earlier turn
                assertEquals(2 + 2 * assistant, messages.size());
                assertTrue(assistant < 3);
                maxAssistant = Math.max(maxAssistant, assistant);
            }
            assertEquals(2, maxAssistant);
        }
    }

    @Test
    void completionsRouteWithTokenIdsAndApiKey() throws Exception {
        try (TestLlmServer server = new TestLlmServer(body -> TestLlmServer.Plan.json(200,
            "{\"choices\":[{\"text\":\"ok\",\"index\":0}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1}}"))) {
            BenchConfig.Builder b = base(server.url() + "/v1").rate(20).duration(0.1).route(BenchConfig.Route.COMPLETIONS);
            b.tokenIds = true;
            b.apiKey = "sk-test";
            b.workload = BenchConfig.Workload.RANDOM;
            b.randomMinTokens = 8;
            b.randomMaxTokens = 8;
            TargetReport t = run(b.build()).first();
            assertEquals(2, t.ok);
            assertTrue(Double.isNaN(t.cachedTokensRatio)); // no cached_tokens reported: no ratio
            assertEquals("/v1/completions", server.paths.peek());
            assertTrue(server.headers.peek().contains("Authorization: Bearer sk-test"));
            JsonNode prompt = JSON.readTree(server.bodies.peek()).get("prompt");
            assertTrue(prompt.isArray());
            assertEquals(8, prompt.size());
            assertNotNull(prompt.get(0).asInt());
        }
    }
}
