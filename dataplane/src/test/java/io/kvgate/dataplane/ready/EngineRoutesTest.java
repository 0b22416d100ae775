package io.kvgate.dataplane.ready;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.RuleConfig.Engine;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.EngineFacts;
import org.junit.jupiter.api.Test;

/** Reading which completion routes an engine serves (review row 27). */
class EngineRoutesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void vllmsRouteTableSaysWhichFamilyIsMounted() throws Exception {
        assertEquals("/openapi.json", EngineProfiles.of(Engine.VLLM).routesPath());
        assertEquals(0, EngineRoutes.unmounted(EngineProfiles.of(Engine.VLLM), JSON.readTree(
            "{\"paths\":{\"/v1/chat/completions\":{\"post\":{}},\"/v1/completions\":{\"post\":{}},\"/health\":{\"get\":{}}}}")));
        assertEquals(EngineFacts.ROUTE_CHAT | EngineFacts.ROUTE_COMPLETIONS, EngineRoutes.unmounted(EngineProfiles.of(Engine.VLLM),
            JSON.readTree("{\"paths\":{\"/v1/embeddings\":{\"post\":{}},\"/pooling\":{\"post\":{}}}}")), "a pooling server");
        assertEquals(EngineFacts.ROUTE_COMPLETIONS, EngineRoutes.unmounted(EngineProfiles.of(Engine.VLLM),
            JSON.readTree("{\"paths\":{\"/v1/chat/completions\":{\"post\":{}}}}")));
        assertEquals(-1, EngineRoutes.unmounted(EngineProfiles.of(Engine.VLLM), JSON.readTree("{\"detail\":\"Not Found\"}")), "says nothing");
    }

    @Test
    void sglangsServerInfoSaysWhetherItIsAnEmbeddingServer() throws Exception {
        assertEquals("/server_info", EngineProfiles.of(Engine.SGLANG).routesPath());
        assertEquals(EngineFacts.ROUTE_CHAT | EngineFacts.ROUTE_COMPLETIONS,
            EngineRoutes.unmounted(EngineProfiles.of(Engine.SGLANG), JSON.readTree("{\"is_embedding\":true}")));
        assertEquals(0, EngineRoutes.unmounted(EngineProfiles.of(Engine.SGLANG), JSON.readTree("{\"is_embedding\":false}")));
        assertEquals(-1, EngineRoutes.unmounted(EngineProfiles.of(Engine.SGLANG), JSON.readTree("{\"context_length\":8192}")));
    }

    @Test
    void sglangStatesItsToolCallParserAndADisagreeingDeclarationIsNamed() throws Exception {
        assertEquals("qwen25", EngineProfiles.of(Engine.SGLANG).toolCallParser(JSON.readTree("{\"tool_call_parser\":\"qwen25\"}")));
        assertEquals("", EngineProfiles.of(Engine.SGLANG).toolCallParser(JSON.readTree("{\"tool_call_parser\":null}")), "none");
        assertNull(EngineProfiles.of(Engine.SGLANG).toolCallParser(JSON.readTree("{}")), "not said");
        assertNull(EngineProfiles.of(Engine.VLLM).toolCallParser(JSON.readTree("{\"tool_call_parser\":\"x\"}")));
        EndpointState ep = new EndpointState("127.0.0.1:9001", 0, new io.kvgate.control.config.EndpointConfig("http://127.0.0.1:9001",
            "127.0.0.1", 9001, 1, null, false, null, 1, null, null, 0));
        io.kvgate.control.config.RuleConfig none = rule("none");
        io.kvgate.control.config.RuleConfig hermes = rule("hermes");
        assertNull(EngineRoutes.parserMismatch(none, ep), "unknown: nothing to say");
        ep.facts().statedToolCallParser("");
        assertNull(EngineRoutes.parserMismatch(none, ep));
        assertEquals("rule 'r' declares tool_call_parser hermes but endpoint 127.0.0.1:9001 runs none (its GET"
            + " /server_info)", EngineRoutes.parserMismatch(hermes, ep));
        ep.facts().statedToolCallParser("qwen25");
        assertEquals("rule 'r' declares tool_call_parser none but endpoint 127.0.0.1:9001 runs qwen25 (its GET"
            + " /server_info)", EngineRoutes.parserMismatch(none, ep));
        assertNull(EngineRoutes.parserMismatch(rule("qwen25"), ep));
    }

    private static io.kvgate.control.config.RuleConfig rule(String parser) throws Exception {
        return io.kvgate.control.config.GatewayConfig.parse("rules:\n  - name: r\n    models: [m]\n    engine: sglang\n"
            + "    tool_call_parser: " + parser + "\n    endpoints: [{url: \"http://127.0.0.1:9001\"}]\n").rules().get(0);
    }

    @Test
    void otherEnginesAreNotAsked() {
        assertNull(EngineProfiles.of(Engine.TRTLLM).routesPath());
        assertNull(EngineProfiles.of(Engine.LLAMACPP).routesPath());
        assertEquals("/v1/chat/completions and /v1/completions",
            EngineRoutes.describe(EngineFacts.ROUTE_CHAT | EngineFacts.ROUTE_COMPLETIONS));
    }
}
