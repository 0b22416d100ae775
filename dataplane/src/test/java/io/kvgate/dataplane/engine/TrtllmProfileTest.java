package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** TensorRT-LLM's facts as its profile states them. */
class TrtllmProfileTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final EngineProfile trtllm = TrtllmProfile.INSTANCE;

    @Test
    void requestDialectIsVllms() {
        assertFalse(trtllm.needsTemperatureFloor());
        assertEquals("include_stop_str_in_output", trtllm.stopStringMember());
        assertFalse(trtllm.nullsEmptyLogitBias());
        assertTrue(trtllm.refusesGreedyN(), "greedy decoding allows one return sequence");
        assertFalse(trtllm.namesAdapterInLoraPath());
        assertFalse(trtllm.refusesExactContextFill());
    }

    @Test
    void prefillDecode() {
        assertEquals(PdProtocol.DISAGGREGATED_PARAMS, trtllm.pdProtocol());
        assertTrue(trtllm.decodeServesAlone());
    }

    @Test
    void statesNothingTheGatewayProbesAndServesItsLoadAtPrometheusMetrics() throws Exception {
        assertFalse(trtllm.statesContextOverflow("This model's maximum context length is 64 tokens"),
            "vLLM's wording is vLLM's (EngineErrors still maps it, from any engine)");
        assertFalse(trtllm.answers503WhileLoading());
        assertFalse(trtllm.listsAdapterCards());
        assertNull(trtllm.routesPath());
        assertNull(trtllm.mountedRoutes(JSON.readTree("{\"paths\":{}}")));
        assertNull(trtllm.toolCallParser(JSON.readTree("{\"tool_call_parser\":\"x\"}")));
        assertNull(trtllm.contextPath(), "rules set max_model_len");
        assertEquals(0, trtllm.contextLength(JSON.readTree("{\"context_length\":4096}")));
        LoadMetrics load = trtllm.loadMetrics();
        assertEquals("/prometheus/metrics", load.path(), "its /metrics is JSON iteration statistics");
        assertEquals(List.of("trtllm_num_requests_running"), load.running());
        assertEquals(List.of("trtllm_num_requests_waiting"), load.waiting());
        assertEquals(List.of("trtllm_kv_cache_utilization"), load.usage());
        assertEquals(List.of("trtllm_kv_cache_tokens_per_block"), load.blockSizeGauge());
        assertNull(load.rankLabel(), "collector.py labels model_name and engine_type only");
        assertTrue(trtllm.metricsFix().contains("return_perf_metrics"), trtllm.metricsFix());
        assertSame(TemplateRules.TOKENIZER_ONLY, trtllm.templates());
    }
}
