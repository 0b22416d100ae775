package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** vLLM's facts as its profile states them. */
class VllmProfileTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final EngineProfile vllm = VllmProfile.INSTANCE;

    @Test
    void requestDialect() {
        assertFalse(vllm.needsTemperatureFloor(), "it raises (0, 0.01) itself");
        assertEquals("include_stop_str_in_output", vllm.stopStringMember());
        assertFalse(vllm.nullsEmptyLogitBias());
        assertTrue(vllm.refusesGreedyN(), "n must be 1 when using greedy sampling");
        assertFalse(vllm.namesAdapterInLoraPath(), "the adapter is the model");
        assertFalse(vllm.refusesExactContextFill());
    }

    @Test
    void prefillDecode() {
        assertEquals(PdProtocol.KV_TRANSFER_PARAMS, vllm.pdProtocol());
        assertTrue(vllm.decodeServesAlone(), "conditional P/D may skip the prefill leg");
    }

    @Test
    void contextOverflowWordings() {
        assertTrue(vllm.statesContextOverflow("This model's maximum context length is 2048 tokens. However, you requested 3000"));
        assertTrue(vllm.statesContextOverflow("'max_tokens' is too large: 100. This model's maximum context length is 64"));
        assertTrue(vllm.statesContextOverflow("The decoder prompt (length 70) is longer than the maximum model length of 64."));
        assertFalse(vllm.statesContextOverflow("request (70 tokens) exceeds the available context size (64 tokens)"),
            "llama.cpp's wording");
        assertFalse(vllm.statesContextOverflow("The model `x` does not exist."));
    }

    @Test
    void probesItsRouteTableAndItsModelCards() throws Exception {
        assertFalse(vllm.answers503WhileLoading());
        assertTrue(vllm.listsAdapterCards(), "LoRA cards with a parent");
        assertEquals("/openapi.json", vllm.routesPath());
        assertEquals(MountedRoutes.BOTH, vllm.mountedRoutes(JSON.readTree(
            "{\"paths\":{\"/v1/chat/completions\":{},\"/v1/completions\":{}}}")));
        assertEquals(new MountedRoutes(false, false), vllm.mountedRoutes(JSON.readTree("{\"paths\":{\"/pooling\":{}}}")));
        assertNull(vllm.mountedRoutes(JSON.readTree("{\"detail\":\"Not Found\"}")), "--disable-fastapi-docs: unknown");
        assertNull(vllm.toolCallParser(JSON.readTree("{\"tool_call_parser\":\"hermes\"}")), "vLLM does not state it");
        assertNull(vllm.contextPath(), "its model cards carry max_model_len");
        assertEquals(0, vllm.contextLength(JSON.readTree("{\"context_length\":4096}")));
    }

    @Test
    void loadFamiliesAreRankedByTheEngineLabel() {
        LoadMetrics m = vllm.loadMetrics();
        assertEquals(List.of("vllm:num_requests_running"), m.running());
        assertEquals(List.of("vllm:num_requests_waiting"), m.waiting());
        assertEquals(List.of("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), m.usage(), "older builds' name too");
        assertEquals("engine", m.rankLabel());
    }

    @Test
    void rendersATemplateFileAsReadAndAProcessorTemplateForPlainRequests() {
        TemplateRules t = vllm.templates();
        assertEquals("\n\nA\\nB\n", t.chatTemplateFile().apply("\n\nA\\nB\n"));
        assertFalse(t.processorFirst());
        assertTrue(t.processorForPlain());
    }
}
