package io.kvgate.dataplane.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** SGLang's facts as its profile states them. */
class SglangProfileTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final EngineProfile sglang = SglangProfile.INSTANCE;

    @Test
    void requestDialect() {
        assertTrue(sglang.needsTemperatureFloor(), "it samples (0, 0.01) as sent");
        assertEquals("no_stop_trim", sglang.stopStringMember());
        assertTrue(sglang.nullsEmptyLogitBias(), "an empty bias still builds its dense matrix");
        assertFalse(sglang.refusesGreedyN(), "it answers n identical choices");
        assertTrue(sglang.namesAdapterInLoraPath());
        assertTrue(sglang.refusesExactContextFill(), "prompt + max_tokens >= context is refused");
    }

    @Test
    void prefillDecode() {
        assertEquals(PdProtocol.BOOTSTRAP_ROOM, sglang.pdProtocol());
        assertFalse(sglang.decodeServesAlone(), "a decode server cannot prefill without the bootstrap rendezvous");
    }

    @Test
    void contextOverflowWordings() {
        assertTrue(sglang.statesContextOverflow("Requested token count exceeds the model's maximum context length of 64 tokens."));
        assertTrue(sglang.statesContextOverflow("The input (70 tokens) is longer than the model's context length (64 tokens)."));
        assertTrue(sglang.statesContextOverflow("Input length (70 tokens) exceeds the maximum allowed length (64 tokens)"));
        assertTrue(sglang.statesContextOverflow("max_completion_tokens is too large: 100.This model supports at most 10 completion tokens."));
        assertFalse(sglang.statesContextOverflow("max_completion_tokens is too large"), "only with the completion-token bound");
        assertFalse(sglang.statesContextOverflow("The decoder prompt (length 70) is longer than the maximum model length of 64."),
            "vLLM's input processor");
    }

    @Test
    void probesItsServerInfo() throws Exception {
        assertFalse(sglang.answers503WhileLoading());
        assertFalse(sglang.listsAdapterCards(), "its /v1/models lists no adapters");
        assertEquals("/server_info", sglang.routesPath());
        assertEquals(MountedRoutes.NONE, sglang.mountedRoutes(JSON.readTree("{\"is_embedding\":true}")), "cannot generate");
        assertEquals(MountedRoutes.BOTH, sglang.mountedRoutes(JSON.readTree("{\"is_embedding\":false}")));
        assertNull(sglang.mountedRoutes(JSON.readTree("{\"is_embedding\":\"yes\"}")), "not a boolean: unknown");
        assertEquals("qwen25", sglang.toolCallParser(JSON.readTree("{\"tool_call_parser\":\"qwen25\"}")));
        assertEquals("", sglang.toolCallParser(JSON.readTree("{\"tool_call_parser\":null}")), "runs none");
        assertNull(sglang.toolCallParser(JSON.readTree("{\"tool_call_parser\":3}")));
        assertEquals("/server_info", sglang.contextPath(), "the prober falls back to /get_server_info on a 404");
        assertEquals(2048, sglang.contextLength(JSON.readTree("{\"context_length\":2048}")));
        assertEquals(0, sglang.contextLength(JSON.readTree("{\"context_length\":null}")), "no --context-length");
        assertEquals(0, sglang.contextLength(JSON.readTree("{\"context_length\":-5}")));
    }

    @Test
    void loadFamiliesAreRankedByDpRank() {
        LoadMetrics m = sglang.loadMetrics();
        assertEquals(List.of("sglang:num_running_reqs"), m.running());
        assertEquals(List.of("sglang:num_queue_reqs"), m.waiting());
        assertEquals(List.of("sglang:token_usage"), m.usage());
        assertEquals("dp_rank", m.rankLabel());
    }

    @Test
    void loadsATemplateFileAsSglangDoesAndPrefersAProcessorTemplate() {
        TemplateRules t = sglang.templates();
        assertEquals("F:{{ x }}\nX", t.chatTemplateFile().apply("\n\nF:{{ x }}\\nX\n"), "newlines stripped, \\n a newline");
        assertEquals("", t.chatTemplateFile().apply("\n\n"));
        assertTrue(t.processorFirst());
        assertFalse(t.processorForPlain());
    }
}
