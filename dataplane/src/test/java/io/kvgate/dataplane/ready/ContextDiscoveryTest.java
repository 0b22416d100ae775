package io.kvgate.dataplane.ready;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.route.EndpointRegistry;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.route.RulePolicies;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Where engines state their context length, and what the gateway makes of endpoints that disagree. */
class ContextDiscoveryTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static RouteTable table(String settings) throws Exception {
        GatewayConfig c = GatewayConfig.parse("rules:\n  - name: r\n    models: [m]\n" + settings
            + "    endpoints: [{url: \"http://127.0.0.1:9001\"}, {url: \"http://127.0.0.1:9002\"}]\n");
        return RouteTable.build(c, new EndpointRegistry(), ctx -> RulePolicies.create(ctx, null, new ManualClock()));
    }

    @Test
    void eachEngineStatesItWhereItsSourceDoes() throws Exception {
        // vLLM: the base card's max_model_len; LoRA cards carry null.
        assertEquals(8192, ContextDiscovery.fromModels(JSON.readTree("{\"object\":\"list\",\"data\":[{\"id\":\"qwen3\","
            + "\"max_model_len\":8192,\"parent\":null},{\"id\":\"sql-lora\",\"max_model_len\":null,\"parent\":\"qwen3\"}]}")));
        assertEquals(4096, ContextDiscovery.fromModels(JSON.readTree("{\"data\":[{\"max_model_len\":8192},{\"max_model_len\":4096}]}")));
        assertEquals(0, ContextDiscovery.fromModels(JSON.readTree("{\"data\":[{\"id\":\"trt\",\"owned_by\":\"tensorrt_llm\"}]}")));
        assertEquals(0, ContextDiscovery.fromModels(JSON.readTree("{\"data\":[{\"max_model_len\":\"8192\"},{\"max_model_len\":-1}]}")));
        // SGLang without the card field: the launch argument, null unless --context-length was given.
        assertEquals("/server_info", EngineProfiles.of(RuleConfig.Engine.SGLANG).contextPath());
        assertEquals(2048, EngineProfiles.of(RuleConfig.Engine.SGLANG).contextLength(JSON.readTree("{\"context_length\":2048,\"page_size\":16}")));
        assertEquals(0, EngineProfiles.of(RuleConfig.Engine.SGLANG).contextLength(JSON.readTree("{\"context_length\":null}")));
        // llama.cpp: one slot's context.
        assertEquals("/props", EngineProfiles.of(RuleConfig.Engine.LLAMACPP).contextPath());
        assertEquals(1024, EngineProfiles.of(RuleConfig.Engine.LLAMACPP).contextLength(JSON.readTree("{\"default_generation_settings\":{\"n_ctx\":1024},\"total_slots\":4}")));
        assertNull(EngineProfiles.of(RuleConfig.Engine.VLLM).contextPath());
        assertNull(EngineProfiles.of(RuleConfig.Engine.TRTLLM).contextPath(), "configured only");
    }

    @Test
    void endpointsThatDisagreeGiveTheSmallestAndOneWarningPerChange() throws Exception {
        RouteTable t = table("");
        Rule r = t.rules().get(0);
        List<String> warnings = new ArrayList<>();
        List<String> infos = new ArrayList<>();
        ContextDiscovery d = new ContextDiscovery(warnings::add, infos::add);
        assertEquals(0, r.contextLength(), "unknown until an endpoint states it");
        r.endpoints().get(0).facts().engineContextLen(8192);
        d.review(t.rules());
        assertEquals(8192, r.contextLength());
        assertEquals(List.of("rule 'r': context length 8192 tokens (from its endpoints)"), infos);
        r.endpoints().get(1).facts().engineContextLen(4096);
        d.review(t.rules());
        d.review(t.rules());
        assertEquals(4096, r.contextLength(), "a request may reach either endpoint: the smallest");
        assertEquals(List.of("rule 'r': its endpoints disagree on the context length (127.0.0.1:9001: 8192,"
            + " 127.0.0.1:9002: 4096); requests are checked against the smallest, 4096 tokens"), warnings, "once, not per round");
        assertEquals(warnings.get(0), ContextDiscovery.problem(r), "the read-back shows it too");
        r.endpoints().get(0).facts().engineContextLen(4096);
        d.review(t.rules());
        assertNull(ContextDiscovery.problem(r));
        assertEquals(2, infos.size(), "agreeing again is reported as the new value");
    }

    @Test
    void aConfiguredLengthWinsAndIsFlaggedWhenAnEngineServesLess() throws Exception {
        RouteTable t = table("    max_model_len: 8192\n");
        Rule r = t.rules().get(0);
        List<String> warnings = new ArrayList<>();
        ContextDiscovery d = new ContextDiscovery(warnings::add, s -> { });
        r.endpoints().get(1).facts().engineContextLen(4096);
        d.review(t.rules());
        assertEquals(8192, r.contextLength(), "configured: the operator's word");
        assertEquals(1, warnings.size());
        assertTrue(warnings.get(0).startsWith("rule 'r': max_model_len 8192 is above the context length 127.0.0.1:9002: 4096"
            + " serves"), warnings.get(0));
    }
}
