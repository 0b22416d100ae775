package io.kvgate.dataplane.ready;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.RuleConfig.Engine;
import io.kvgate.dataplane.route.EndpointState;
import org.junit.jupiter.api.Test;

/** Reading which completion routes an engine serves (review row 27). */
class EngineRoutesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void vllmsRouteTableSaysWhichFamilyIsMounted() throws Exception {
        assertEquals("/openapi.json", EngineRoutes.path(Engine.VLLM));
        assertEquals(0, EngineRoutes.unmounted(Engine.VLLM, JSON.readTree(
            "{\"paths\":{\"/v1/chat/completions\":{\"post\":{}},\"/v1/completions\":{\"post\":{}},\"/health\":{\"get\":{}}}}")));
        assertEquals(EndpointState.ROUTE_CHAT | EndpointState.ROUTE_COMPLETIONS, EngineRoutes.unmounted(Engine.VLLM,
            JSON.readTree("{\"paths\":{\"/v1/embeddings\":{\"post\":{}},\"/pooling\":{\"post\":{}}}}")), "a pooling server");
        assertEquals(EndpointState.ROUTE_COMPLETIONS, EngineRoutes.unmounted(Engine.VLLM,
            JSON.readTree("{\"paths\":{\"/v1/chat/completions\":{\"post\":{}}}}")));
        assertEquals(-1, EngineRoutes.unmounted(Engine.VLLM, JSON.readTree("{\"detail\":\"Not Found\"}")), "says nothing");
    }

    @Test
    void sglangsServerInfoSaysWhetherItIsAnEmbeddingServer() throws Exception {
        assertEquals("/get_server_info", EngineRoutes.path(Engine.SGLANG));
        assertEquals(EndpointState.ROUTE_CHAT | EndpointState.ROUTE_COMPLETIONS,
            EngineRoutes.unmounted(Engine.SGLANG, JSON.readTree("{\"is_embedding\":true}")));
        assertEquals(0, EngineRoutes.unmounted(Engine.SGLANG, JSON.readTree("{\"is_embedding\":false}")));
        assertEquals(-1, EngineRoutes.unmounted(Engine.SGLANG, JSON.readTree("{\"context_length\":8192}")));
    }

    @Test
    void otherEnginesAreNotAsked() {
        assertNull(EngineRoutes.path(Engine.TRTLLM));
        assertNull(EngineRoutes.path(Engine.LLAMACPP));
        assertEquals("/v1/chat/completions and /v1/completions",
            EngineRoutes.describe(EndpointState.ROUTE_CHAT | EndpointState.ROUTE_COMPLETIONS));
    }
}
