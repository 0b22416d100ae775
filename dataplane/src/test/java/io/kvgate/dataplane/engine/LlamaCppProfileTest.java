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

    /** Router mode (tools/server/server-models.cpp): get_router_props and get_router_models' status objects. */
    @Test
    void recognisesARouterAndReadsEachModelsStatus() throws Exception {
        assertTrue(llama.statesRouterRole(JSON.readTree("{\"role\":\"router\",\"max_instances\":4,"
            + "\"default_generation_settings\":{\"params\":{},\"n_ctx\":0}}")));
        assertFalse(llama.statesRouterRole(JSON.readTree("{\"default_generation_settings\":{\"n_ctx\":4096}}")),
            "a single-model server's /props");
        assertTrue(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":{\"value\":\"loaded\",\"args\":[]}}")));
        assertTrue(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":{\"value\":\"sleeping\"}}")));
        assertFalse(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":{\"value\":\"loading\"}}")));
        assertFalse(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":{\"value\":\"unloaded\"}}")));
        assertFalse(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":{\"value\":\"unloaded\",\"failed\":true}}")));
        assertFalse(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"status\":\"loading\"}")), "a bare string status");
        assertTrue(llama.cardReady(JSON.readTree("{\"id\":\"m\",\"object\":\"model\"}")), "no status: the loaded model");
        assertFalse(VllmProfile.INSTANCE.statesRouterRole(JSON.readTree("{\"role\":\"router\"}")));
        assertTrue(VllmProfile.INSTANCE.cardReady(JSON.readTree("{\"status\":{\"value\":\"loading\"}}")));
    }
}
