package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.get;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The engines' Prometheus load signals (issue #14): real names, per-DP-rank labels, values that move with the
 * simulator's admission queues and cache.
 */
@Timeout(60)
@Tag("system")
class MetricsTest {

    /**
     * Polls the metrics page until a series has {@code value} (bounded, 15 s). {@code name} is either one full
     * series ({@code name{labels}}) or a metric name (then its first series, or any with {@code anySeries}).
     */
    static String awaitMetric(EngineSimulator sim, String name, String value, boolean anySeries) throws Exception {
        String series = name.contains("{") ? Pattern.quote(name) : Pattern.quote(name) + "(\\{[^}]*\\})?";
        Pattern p = Pattern.compile("^" + series + " (\\S+)$", Pattern.MULTILINE);
        long deadline = System.nanoTime() + 15_000_000_000L;
        String text = "";
        while (System.nanoTime() < deadline) {
            text = sim.metricsText();
            Matcher m = p.matcher(text);
            while (m.find()) {
                if (m.group(m.groupCount()).equals(value)) {
                    return text;
                }
                if (!anySeries) {
                    break;
                }
            }
            Thread.onSpinWait();
            Thread.sleep(2);
        }
        throw new AssertionError(name + " never reached " + value + ":\n" + text);
    }

    static double value(String text, String series) {
        Matcher m = Pattern.compile("^" + Pattern.quote(series) + " (\\S+)$", Pattern.MULTILINE).matcher(text);
        assertTrue(m.find(), series + " missing from:\n" + text);
        return Double.parseDouble(m.group(1));
    }

    static CompletableFuture<HttpResponse<String>> slowCompletion(EngineSimulator sim, String prompt, int rank) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/completions"))
            .timeout(Duration.ofSeconds(30)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"model\":\"m\",\"prompt\":" + prompt + ",\"max_tokens\":15}"));
        if (rank >= 0) {
            b.header("x-data-parallel-rank", Integer.toString(rank));
        }
        return SimHttp.CLIENT.sendAsync(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static String tokens(int from, int count) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < count; i++) {
            sb.append(i == 0 ? "" : ",").append(from + i);
        }
        return sb.append(']').toString();
    }

    @Test
    void vllmGaugesFollowTheQueueAndTheCachePerEngineCore() throws Exception {
        SimulatorConfig c = SimHttp.fast(Dialect.VLLM).dpRanks(2).maxConcurrency(1).queueDepth(4).itlMs(40)
            .cacheBlocks(10);
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            String idle = sim.metricsText();
            assertEquals(0.0, value(idle, "vllm:num_requests_running{engine=\"1\",model_name=\"m\"}"));
            assertEquals(0.0, value(idle, "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"}"));
            List<CompletableFuture<HttpResponse<String>>> calls = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                calls.add(slowCompletion(sim, tokens(1000 * (i + 1), 32), 1)); // 2 blocks each, all on rank 1
            }
            String busy = awaitMetric(sim, "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"}", "2.0", false);
            assertEquals(1.0, value(busy, "vllm:num_requests_running{engine=\"1\",model_name=\"m\"}"));
            assertEquals(0.2, value(busy, "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"}"),
                "2 of 10 blocks held by the running request");
            assertEquals(0.0, value(busy, "vllm:num_requests_running{engine=\"0\",model_name=\"m\"}"), "rank 0 idle");
            assertEquals(0.0, value(busy, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"}"));
            for (CompletableFuture<HttpResponse<String>> f : calls) {
                assertEquals(200, f.get().statusCode());
            }
            String done = awaitMetric(sim, "vllm:num_requests_running{engine=\"1\",model_name=\"m\"}", "0.0", false);
            assertEquals(0.0, value(done, "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"}"));
            assertEquals(0.0, value(done, "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"}"),
                "finished requests' blocks stay cached but count as free");
            assertEquals(6, sim.cachedBlocks(1));
            assertTrue(get(sim, "/metrics").body().contains("# TYPE vllm:kv_cache_usage_perc gauge"));
        }
    }

    @Test
    void sglangGaugesCarryDpRankLabelsOnlyWithDataParallelism() throws Exception {
        SimulatorConfig c = SimHttp.fast(Dialect.SGLANG).enableMetrics(true).dpRanks(2).maxConcurrency(1)
            .queueDepth(4).itlMs(40).cacheBlocks(100);
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            String prefix = "{model_name=\"m\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\",dp_rank=\"0\"}";
            List<CompletableFuture<HttpResponse<String>>> calls = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                calls.add(slowCompletion(sim, tokens(500 * (i + 1), 10), 0));
            }
            String busy = awaitMetric(sim, "sglang:num_queue_reqs", "1.0", false);
            assertEquals(1.0, value(busy, "sglang:num_running_reqs" + prefix));
            assertEquals(0.1, value(busy, "sglang:token_usage" + prefix), "10 pages of 1 token of 100");
            assertEquals(0.0, value(busy, "sglang:num_running_reqs" + prefix.replace("dp_rank=\"0\"", "dp_rank=\"1\"")));
            for (CompletableFuture<HttpResponse<String>> f : calls) {
                assertEquals(200, f.get().statusCode());
            }
        }
        try (EngineSimulator single = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).enableMetrics(true))) {
            String text = single.metricsText();
            assertEquals(0.0, value(text,
                "sglang:num_running_reqs{model_name=\"m\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\"}"));
        }
    }

    @Test
    void trtllmServesItsPrometheusPageOnlyWithReturnPerfMetrics() throws Exception {
        SimulatorConfig c = SimHttp.fast(Dialect.TRTLLM).enableMetrics(true).maxConcurrency(1).queueDepth(4).itlMs(40)
            .cacheBlocks(100);
        try (EngineSimulator sim = EngineSimulator.start(c)) {
            String labels = "{engine_type=\"undefined\",model_name=\"undefined\",pid=\"" + ProcessHandle.current().pid() + "\"}";
            List<CompletableFuture<HttpResponse<String>>> calls = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                calls.add(slowCompletion(sim, tokens(500 * (i + 1), 40), -1));
            }
            String busy = awaitMetric(sim, "trtllm_num_requests_waiting" + labels, "1.0", false);
            assertEquals(1.0, value(busy, "trtllm_num_requests_running" + labels));
            assertEquals(32.0, value(busy, "trtllm_kv_cache_tokens_per_block" + labels), "KvCacheConfig's default");
            assertTrue(value(busy, "trtllm_kv_cache_utilization" + labels) > 0, busy);
            HttpResponse<String> page = get(sim, "/prometheus/metrics");
            assertEquals(200, page.statusCode());
            assertTrue(page.body().contains("# TYPE trtllm_num_requests_running gauge"), page.body());
            assertTrue(get(sim, "/metrics").body().startsWith("["), "/metrics stays JSON iteration statistics");
            for (CompletableFuture<HttpResponse<String>> f : calls) {
                assertEquals(200, f.get().statusCode());
            }
        }
        try (EngineSimulator plain = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM))) {
            assertEquals(404, get(plain, "/prometheus/metrics").statusCode(), "not mounted without return_perf_metrics");
        }
    }

    @Test
    void finishedRequestsAreCountedInEachDialectsCounter() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            for (int i = 0; i < 3; i++) {
                assertEquals(200, slowCompletion(sim, tokens(100 * i, 5), -1).get().statusCode());
            }
            // The counters move when the engine releases the generation, just after the answer's last byte.
            String text = "";
            double finished = 0;
            for (long deadline = System.nanoTime() + 15_000_000_000L; finished < 3 && System.nanoTime() < deadline; Thread.sleep(2)) {
                text = sim.metricsText();
                finished = value(text, "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"}")
                    + value(text, "vllm:request_success_total{engine=\"0\",finished_reason=\"length\",model_name=\"m\"}");
            }
            assertEquals(3.0, finished, text);
            assertEquals(0.0, value(text, "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\",model_name=\"m\"}"));
            assertTrue(text.contains("# TYPE vllm:request_success_total counter"), text);
        }
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).enableMetrics(true))) {
            for (int i = 0; i < 2; i++) {
                assertEquals(200, slowCompletion(sim, tokens(100 * i, 5), -1).get().statusCode());
            }
            awaitMetric(sim, "sglang:num_requests_total{model_name=\"m\"}", "2.0", false);
        }
    }

    @Test
    void olderVllmBuildsExportGpuCacheUsage() {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).legacyMetrics(true))) {
            String text = sim.metricsText();
            assertEquals(0.0, value(text, "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"}"));
            assertTrue(!text.contains("vllm:kv_cache_usage_perc"), text);
        }
    }
}
