package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** llama.cpp's facts as its profile states them. */
class LlamaCppProfileTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final EngineProfile llama = LlamaCppProfile.INSTANCE;

    @Test
    void requestDialect() {
        assertFalse(llama.needsTemperatureFloor());
        assertNull(llama.stopStringMember(), "neither spelling: nothing renamed");
        assertFalse(llama.nullsEmptyLogitBias());
        assertFalse(llama.refusesGreedyN(), "it refuses every n > 1, greedy or not: nothing to replicate");
        assertFalse(llama.namesAdapterInLoraPath());
        assertFalse(llama.refusesExactContextFill());
    }

    @Test
    void hasNoPrefillDecode() {
        assertEquals(PdProtocol.NONE, llama.pdProtocol());
        assertFalse(llama.decodeServesAlone());
    }

    @Test
    void loadsWith503sAndStatesItsSlotContextInProps() throws Exception {
        assertTrue(llama.answers503WhileLoading());
        assertTrue(llama.statesContextOverflow("request (70 tokens) exceeds the available context size (64 tokens), try increasing it"));
        assertFalse(llama.statesContextOverflow("This model's maximum context length is 64 tokens"));
        assertFalse(llama.listsAdapterCards());
        assertNull(llama.routesPath());
        assertNull(llama.mountedRoutes(JSON.readTree("{}")));
        assertNull(llama.toolCallParser(JSON.readTree("{\"tool_call_parser\":\"x\"}")));
        assertEquals("/props", llama.contextPath());
        assertEquals(1024, llama.contextLength(JSON.readTree("{\"default_generation_settings\":{\"n_ctx\":1024}}")));
        assertEquals(0, llama.contextLength(JSON.readTree("{\"n_ctx\":1024}")), "only one slot's context counts");
        assertSame(TemplateRules.TOKENIZER_ONLY, llama.templates());
    }

    @Test
    void loadFamiliesHaveNoRankLabel() {
        LoadMetrics m = llama.loadMetrics();
        assertEquals(List.of("llamacpp:requests_processing"), m.running());
        assertEquals(List.of("llamacpp:requests_deferred"), m.waiting());
        assertEquals(List.of("llamacpp:kv_cache_usage_ratio"), m.usage());
        assertNull(m.rankLabel());
    }
}
