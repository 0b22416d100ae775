package io.kvgate.dataplane.load;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.route.EngineReading;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The engines' metrics pages as the load scraper reads them: names, rank labels, the text format's corners. */
class MetricsPageTest {
    private static EngineReading read(String page) {
        return MetricsPage.read(page).reading(0, 0, 0);
    }

    @Test
    void vllmPagePerEngineCore() {
        // The shape vLLM's PrometheusStatLogger serves: HELP/TYPE lines, one series per engine core, floats.
        String page = """
            # HELP vllm:num_requests_running Number of requests in model execution batches.
            # TYPE vllm:num_requests_running gauge
            vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
            vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 1.0
            # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
            # TYPE vllm:num_requests_waiting gauge
            vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 2.0
            vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 0.0
            # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
            # TYPE vllm:kv_cache_usage_perc gauge
            vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.75
            vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.25
            # TYPE vllm:prompt_tokens_total counter
            vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.234e+06
            vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 42.0
            """;
        MetricsPage m = MetricsPage.read(page);
        assertEquals(0, m.malformed());
        EngineReading r = m.reading(5, 7, 9);
        assertEquals(2, r.ranks());
        assertEquals(3, r.running(0));
        assertEquals(1, r.running(1));
        assertEquals(2, r.waiting(0));
        assertEquals(0, r.waiting(1));
        assertEquals(0.75, r.kvUsage(0));
        assertEquals(0.25, r.kvUsage(1));
        assertEquals(4, r.runningTotal());
        assertEquals(2, r.waitingTotal());
        assertEquals(0.75, r.kvUsageMax(), "the fullest rank");
        assertEquals(5, r.takenAtNs());
    }

    @Test
    void olderVllmGpuCacheUsageAndNoRankLabel() {
        EngineReading r = read("""
            vllm:num_requests_running{model_name="m"} 1
            vllm:num_requests_waiting{model_name="m"} 4
            vllm:gpu_cache_usage_perc{model_name="m"} 0.5
            """);
        assertEquals(1, r.ranks());
        assertEquals(1, r.running(0));
        assertEquals(4, r.waiting(0));
        assertEquals(0.5, r.kvUsage(0));
    }

    @Test
    void sglangSchedulersWithDpRanksAndReplicaLabels() {
        // One series per scheduler; tp workers of the same DP rank report the same numbers (counted once), series
        // that differ in another label (priority) add up.
        EngineReading r = read("""
            # TYPE sglang:num_running_reqs gauge
            sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"} 5.0
            sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="1",pp_rank="0",dp_rank="0"} 5.0
            sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="1"} 2.0
            sglang:num_queue_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0",priority="0"} 3.0
            sglang:num_queue_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0",priority="1"} 4.0
            sglang:token_usage{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="1"} 0.9
            """);
        assertEquals(2, r.ranks());
        assertEquals(5, r.running(0), "two TP workers of rank 0: one scheduler");
        assertEquals(2, r.running(1));
        assertEquals(7, r.waiting(0), "two priority classes add up");
        assertEquals(-1, r.waiting(1), "no series for rank 1's queue");
        assertEquals(0, r.waitingTotal() - 7);
        assertTrue(Double.isNaN(r.kvUsage(0)));
        assertEquals(0.9, r.kvUsage(1));
        assertTrue(r.hasQueue());
    }

    @Test
    void llamaCppUnlabelled() {
        EngineReading r = read("llamacpp:requests_processing 4\nllamacpp:requests_deferred 46\n");
        assertEquals(4, r.running(0));
        assertEquals(46, r.waiting(0));
    }

    @Test
    void textFormatCorners() {
        MetricsPage m = MetricsPage.read(String.join("\n",
            "# a comment line",
            "",
            "   ",
            "# EOF",
            // escapes in a label value, spaces around tokens, a trailing comma, a timestamp
            "vllm:num_requests_running { model_name = \"a \\\"quoted\\\" \\\\ name\\nx\" , engine=\"0\", } 2 1700000000000",
            // CRLF line ending, an exemplar after the value
            "vllm:num_requests_waiting{engine=\"0\"} 1e0 # {trace_id=\"abc\"} 1.0\r",
            // NaN: unknown, neither a value nor malformed
            "vllm:kv_cache_usage_perc{engine=\"0\"} NaN",
            // +Inf on a family we do not read is a fine value
            "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} +Inf",
            "vllm:e2e_request_latency_seconds_count -Inf",
            "vllm:x_total 3.5e-2"));
        assertEquals(0, m.malformed());
        EngineReading r = m.reading(0, 0, 0);
        assertEquals(2, r.running(0));
        assertEquals(1, r.waiting(0));
        assertTrue(Double.isNaN(r.kvUsage(0)), "a NaN gauge is unknown");
    }

    @Test
    void malformedLinesAreSkippedAndCountedAndTheRestIsRead() {
        List<String> bad = List.of(
            "vllm:num_requests_running{engine=\"0\"}",                 // no value
            "vllm:num_requests_running{engine=\"0\" 3",                // unterminated label set
            "vllm:num_requests_running{engine=\"0} 3",                 // unterminated label value
            "vllm:num_requests_running{engine=0} 3",                   // unquoted label value
            "vllm:num_requests_running{engine=\"\\t\"} 3",             // unknown escape
            "vllm:num_requests_running{0engine=\"0\"} 3",              // bad label name
            "9vllm:num_requests_running 3",                            // bad metric name
            "vllm:num_requests_running{engine=\"0\"} three",           // not a number
            "vllm:num_requests_running{engine=\"0\"} 0x10",            // not a Prometheus float
            "vllm:num_requests_running{engine=\"0\"} 3 12:00",         // bad timestamp
            "vllm:num_requests_running{engine=\"0\"} 3 17 extra",      // trailing garbage
            "vllm:num_requests_running{engine=\"0\"}3",                // value not separated
            "vllm:num_requests_running{engine=\"0\"} -1",              // a negative count
            "vllm:num_requests_running{engine=\"0\"} +Inf",            // an infinite count
            "vllm:num_requests_running{engine=\"9\"} 3",               // a rank beyond 0..7
            "vllm:num_requests_running{engine=\"x\"} 3",               // a rank that is no number
            "{engine=\"0\"} 3",                                        // no name
            "\u0000\u00ff garbage");
        List<String> lines = new ArrayList<>(bad);
        lines.add(2, "vllm:num_requests_running{engine=\"1\"} 6");
        lines.add("vllm:num_requests_waiting{engine=\"1\"} 2");
        MetricsPage m = MetricsPage.read(String.join("\n", lines));
        assertEquals(bad.size(), m.malformed());
        EngineReading r = m.reading(0, 0, 0);
        assertEquals(6, r.running(1), "the good lines around the bad ones are read");
        assertEquals(2, r.waiting(1));
        assertEquals(-1, r.running(0), "every rank-0 line was bad");
    }

    @Test
    void aPageWithoutRequestCountsHasNoQueue() {
        assertFalse(MetricsPage.read("vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nprocess_cpu_seconds_total 12\n").hasQueue());
        assertFalse(MetricsPage.read("").hasQueue());
        assertFalse(MetricsPage.read("<html>404 Not Found</html>\n").hasQueue());
        assertEquals(1, MetricsPage.read("<html>404 Not Found</html>\n").malformed());
    }

    @Test
    void usageAboveOneIsCappedAndTheFullestSeriesWins() {
        EngineReading r = read("""
            sglang:num_running_reqs 1
            sglang:token_usage{engine_type="prefill"} 0.4
            sglang:token_usage{engine_type="decode"} 1.2
            """);
        assertEquals(1.0, r.kvUsage(0));
    }

    @Test
    void trtllmPrometheusPageWithItsMultiprocessPidLabel() {
        // trtllm-serve's /prometheus/metrics (return_perf_metrics): tensorrt_llm/metrics/collector.py's gauges with the
        // labels OpenAIServer gives them (model_name, engine_type "undefined") and prometheus_client's multiprocess
        // collector's pid; a restarted server's file may still be read beside the live one's.
        MetricsPage m = MetricsPage.read("""
            # HELP trtllm_num_requests_running Multiprocess metric
            # TYPE trtllm_num_requests_running gauge
            trtllm_num_requests_running{engine_type="undefined",model_name="undefined",pid="4711"} 5.0
            trtllm_num_requests_running{engine_type="undefined",model_name="undefined",pid="4690"} 2.0
            # HELP trtllm_num_requests_waiting Multiprocess metric
            # TYPE trtllm_num_requests_waiting gauge
            trtllm_num_requests_waiting{engine_type="undefined",model_name="undefined",pid="4711"} 3.0
            # HELP trtllm_kv_cache_utilization Multiprocess metric
            # TYPE trtllm_kv_cache_utilization gauge
            trtllm_kv_cache_utilization{engine_type="undefined",model_name="undefined",pid="4711"} 0.4
            # HELP trtllm_kv_cache_tokens_per_block Multiprocess metric
            # TYPE trtllm_kv_cache_tokens_per_block gauge
            trtllm_kv_cache_tokens_per_block{engine_type="undefined",model_name="undefined",pid="4711"} 32.0
            # HELP trtllm_request_success_total Multiprocess metric
            # TYPE trtllm_request_success_total counter
            trtllm_request_success_total{engine_type="undefined",finished_reason="stop",model_name="undefined"} 12.0
            """);
        assertEquals(0, m.malformed());
        assertTrue(m.hasQueue());
        EngineReading r = m.reading(0, 0, 0);
        assertEquals(1, r.ranks(), "no DP rank label");
        assertEquals(5, r.running(0), "pids are one server's processes: the maximum, not the sum");
        assertEquals(3, r.waiting(0));
        assertEquals(0.4, r.kvUsage(0));
        assertEquals(32, m.tokensPerBlock());
    }

    @Test
    void aBlockSizeThatCannotBeOneIsMalformedAndAPageWithoutOneStatesNone() {
        MetricsPage bad = MetricsPage.read("trtllm_num_requests_running 1\ntrtllm_kv_cache_tokens_per_block 0.5\n");
        assertEquals(1, bad.malformed());
        assertEquals(0, bad.tokensPerBlock());
        MetricsPage none = MetricsPage.read("vllm:num_requests_running 1\n");
        assertEquals(0, none.tokensPerBlock());
        MetricsPage only = MetricsPage.read("trtllm_kv_cache_tokens_per_block 64\n");
        assertFalse(only.hasQueue(), "a block size alone is no load reading");
        assertEquals(64, only.tokensPerBlock());
    }
}
