package io.kvgate.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The engines' own counters ({@code --engine-metrics}): parsing both dialects, deltas, shares and hit ratio. */
class EngineSharesTest {
    private static final String VLLM = """
        # HELP vllm:num_requests_running Number of requests in model execution batches.
        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{engine="0",model_name="m"} 3.0
        # TYPE vllm:prompt_tokens_total counter
        vllm:prompt_tokens_total{engine="0",model_name="m"} 1000.0
        vllm:prompt_tokens_total{engine="1",model_name="m"} 500.0
        # TYPE vllm:prefix_cache_hits_total counter
        vllm:prefix_cache_hits_total{engine="0",model_name="m"} 600.0
        vllm:prefix_cache_hits_total{engine="1",model_name="m"} 150.0
        # TYPE vllm:request_success_total counter
        vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0
        vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0
        vllm:request_success_total{engine="1",finished_reason="abort",model_name="m"} 1.0
        vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9
        """;

    private static final String SGLANG = """
        sglang:prompt_tokens_total{model_name="m"} 8.128902e+06
        sglang:cached_tokens_total{model_name="m"} 4.0e+06
        sglang:num_requests_total{model_name="m"} 42.0
        sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"} 2.0
        """;

    @Test
    void bothDialectsAreSummedOverTheirSeries() {
        EngineShares.Counters v = EngineShares.parse(VLLM);
        assertEquals(10, v.requests(), "every finish reason and DP rank");
        assertEquals(1500, v.promptTokens());
        assertEquals(750, v.cachedTokens());
        assertNull(v.error());
        EngineShares.Counters s = EngineShares.parse(SGLANG);
        assertEquals(42, s.requests());
        assertEquals(8_128_902, s.promptTokens());
        assertEquals(4_000_000, s.cachedTokens());
    }

    @Test
    void aPageWithoutARequestCounterSaysSo() {
        EngineShares.Counters c = EngineShares.parse("llamacpp:prompt_tokens_total 12\nllamacpp:requests_processing 1\n");
        assertEquals(-1, c.requests());
        assertEquals("no finished-request counter (vllm:request_success_total or sglang:num_requests_total)", c.error());
    }

    @Test
    void sharesAndHitRatioComeFromTheDeltasOverTheRun() {
        List<String> urls = List.of("http://a:1", "http://b:1", "http://c:1", "http://d:1");
        List<EngineShares.Counters> before = List.of(new EngineShares.Counters(100, 1000, 0, null),
            new EngineShares.Counters(0, 0, 0, null), new EngineShares.Counters(5, 50, 10, null),
            new EngineShares.Counters(50, 500, 100, null));
        List<EngineShares.Counters> after = List.of(new EngineShares.Counters(140, 5000, 3000, null),
            new EngineShares.Counters(20, 1000, 500, null), new EngineShares.Counters(25, 1050, 510, null),
            new EngineShares.Counters(20, 1000, 500, null)); // d restarted: counts from zero
        EngineShares e = EngineShares.between(urls, before, after);
        assertEquals(List.of(40L, 20L, 20L, 20L), e.engines().stream().map(EngineShares.Engine::requests).toList());
        assertEquals(100, e.totalRequests());
        assertEquals(1.6, e.busiestShareVsMean(), 1e-12, "40 % of the requests where the mean share is 25 %");
        assertEquals(0.4, e.engines().get(0).share(100), 1e-12);
        assertEquals((3000.0 + 500 + 500 + 500) / (4000 + 1000 + 1000 + 1000), e.hitRatio(), 1e-12);
        assertEquals(0.75, e.engines().get(0).hitRatio(), 1e-12);
    }

    @Test
    void anUnreadableEngineMakesTheFleetNumbersUnknownAndIsNamed() {
        List<String> urls = List.of("http://a:1", "http://b:1");
        EngineShares e = EngineShares.between(urls,
            List.of(new EngineShares.Counters(1, 1, 1, null), new EngineShares.Counters(-1, -1, -1, "GET /metrics answered 404")),
            List.of(new EngineShares.Counters(3, 3, 3, null), new EngineShares.Counters(-1, -1, -1, "GET /metrics answered 404")));
        assertTrue(Double.isNaN(e.busiestShareVsMean()));
        assertTrue(Double.isNaN(e.hitRatio()));
        assertEquals(-1, e.totalRequests());
        assertEquals("GET /metrics answered 404", e.engines().get(1).error());
        assertTrue(e.summary().contains("(GET /metrics answered 404)"), e.summary());
    }
}
