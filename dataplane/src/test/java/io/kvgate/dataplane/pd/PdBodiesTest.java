package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The P/D dialects' bodies, as engine-contracts.md §4 states them. */
class PdBodiesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final UnpooledByteBufAllocator ALLOC = UnpooledByteBufAllocator.DEFAULT;

    private static ObjectNode tree(String s) throws Exception {
        return (ObjectNode) JSON.readTree(s);
    }

    private static JsonNode read(ByteBuf b) throws Exception {
        try {
            return JSON.readTree(b.toString(StandardCharsets.UTF_8));
        } finally {
            b.release();
        }
    }

    @Test
    void vllmPrefillAsksForOneTokenAndRemoteDecode() throws Exception {
        ObjectNode client = tree("{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"max_completion_tokens\":60,"
            + "\"stream_options\":{\"include_usage\":true},\"min_tokens\":3,\"min_completion_tokens\":4,\"messages\":[]}");
        String before = client.toString();
        JsonNode p = read(PdBodies.vllmPrefill(client, ALLOC));
        assertFalse(p.get("stream").asBoolean());
        assertEquals(1, p.get("max_tokens").asInt());
        assertEquals(1, p.get("max_completion_tokens").asInt());
        assertFalse(p.has("stream_options") || p.has("min_tokens") || p.has("min_completion_tokens"));
        JsonNode kv = p.get("kv_transfer_params");
        assertTrue(kv.get("do_remote_decode").asBoolean());
        assertFalse(kv.get("do_remote_prefill").asBoolean());
        assertTrue(kv.get("remote_host").isNull() && kv.get("remote_port").isNull() && kv.get("remote_block_ids").isNull()
            && kv.get("remote_engine_id").isNull());
        assertEquals(before, client.toString(), "the client's tree is not modified");
        assertFalse(read(PdBodies.vllmPrefill(tree("{\"model\":\"m\",\"messages\":[]}"), ALLOC)).has("max_completion_tokens"),
            "max_completion_tokens only when the client set it");
    }

    @Test
    void vllmDecodeIsTheOriginalPlusTheParamsVerbatim() throws Exception {
        ObjectNode client = tree("{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"messages\":[]}");
        JsonNode params = JSON.readTree("{\"do_remote_prefill\":true,\"remote_block_ids\":[[1,2]],\"tp_size\":1}");
        JsonNode d = read(PdBodies.vllmDecode(client, params, ALLOC));
        assertEquals(50, d.get("max_tokens").asInt());
        assertTrue(d.get("stream").asBoolean());
        assertEquals(params, d.get("kv_transfer_params"));
        assertFalse(read(PdBodies.vllmDecode(client, null, ALLOC)).has("kv_transfer_params"));
    }

    @Test
    void sglangCarriesOneRoomPerSequence() throws Exception {
        AtomicLong rooms = new AtomicLong(100);
        JsonNode one = read(PdBodies.sglang(tree("{\"model\":\"m\",\"messages\":[]}"), 1, "10.0.0.1", 8998,
            rooms::incrementAndGet, ALLOC));
        assertEquals("10.0.0.1", one.get("bootstrap_host").asText());
        assertEquals(8998, one.get("bootstrap_port").asInt());
        assertEquals(101, one.get("bootstrap_room").asLong());
        JsonNode three = read(PdBodies.sglang(tree("{\"model\":\"m\",\"n\":3,\"messages\":[]}"), 3, "h", 1, rooms::incrementAndGet, ALLOC));
        assertEquals(3, three.get("bootstrap_host").size());
        assertEquals(3, three.get("bootstrap_port").size());
        assertEquals("[102,103,104]", three.get("bootstrap_room").toString(), "a distinct room per sequence");
    }

    @Test
    void sequencesCountBatchedPromptsAndChatN() throws Exception {
        assertEquals(1, PdBodies.sequences(tree("{\"prompt\":\"one\"}")));
        assertEquals(1, PdBodies.sequences(tree("{\"prompt\":[1,2,3]}")), "token ids are one prompt");
        assertEquals(2, PdBodies.sequences(tree("{\"prompt\":[\"a\",\"b\"]}")));
        assertEquals(2, PdBodies.sequences(tree("{\"prompt\":[[1],[2]]}")));
        assertEquals(4, PdBodies.sequences(tree("{\"messages\":[],\"n\":4}")));
        assertEquals(1, PdBodies.sequences(tree("{\"messages\":[],\"n\":\"4\"}")));
        assertEquals(Integer.MAX_VALUE, PdBodies.sequences(tree("{\"messages\":[],\"n\":2147483647}")),
            "counted, not built: the exchange refuses it against max_n");
    }

    @Test
    void trtllmContextIsContextOnlyForOneUnstreamedToken() throws Exception {
        ObjectNode client = tree("{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"max_completion_tokens\":60,"
            + "\"stream_options\":{\"include_usage\":true},\"min_tokens\":3,\"messages\":[]}");
        String before = client.toString();
        JsonNode p = read(PdBodies.trtllmContext(client, ALLOC));
        assertFalse(p.get("stream").asBoolean());
        assertEquals(1, p.get("max_tokens").asInt());
        assertEquals(1, p.get("max_completion_tokens").asInt());
        assertFalse(p.has("stream_options") || p.has("min_tokens") || p.has("kv_transfer_params"));
        assertEquals("{\"request_type\":\"context_only\"}", p.get("disaggregated_params").toString());
        assertEquals(before, client.toString(), "the client's tree is not modified");
    }

    @Test
    void trtllmGenerationCarriesTheContextParamsAsGenerationOnly() throws Exception {
        ObjectNode client = tree("{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"messages\":[]}");
        JsonNode params = JSON.readTree("{\"request_type\":\"context_only\",\"first_gen_tokens\":[7],\"ctx_request_id\":3,"
            + "\"encoded_opaque_state\":\"b3BhcXVl\",\"draft_tokens\":null}");
        String paramsBefore = params.toString();
        JsonNode d = read(PdBodies.trtllmGeneration(client, params, ALLOC));
        assertEquals(50, d.get("max_tokens").asInt());
        assertTrue(d.get("stream").asBoolean());
        JsonNode dp = d.get("disaggregated_params");
        assertEquals("generation_only", dp.get("request_type").asText());
        assertEquals(3, dp.get("ctx_request_id").asInt());
        assertEquals("b3BhcXVl", dp.get("encoded_opaque_state").asText());
        assertEquals("[7]", dp.get("first_gen_tokens").toString());
        assertTrue(dp.has("draft_tokens"), "every member of the context's params is kept");
        assertEquals(paramsBefore, params.toString(), "the context answer's tree is not modified");
        assertFalse(read(PdBodies.trtllmGeneration(client, null, ALLOC)).has("disaggregated_params"),
            "no params: the original request (the generation server computes the prompt)");
    }

    @Test
    void decodeAnswersLoseTheTransferObjectsOfEveryDialect() throws Exception {
        String trt = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"text\":\"hi\",\"disaggregated_params\":{\"ctx_request_id\":1}}],"
            + "\"disaggregated_params\":{\"encoded_opaque_state\":\"s\"},\"kv_transfer_params\":{\"remote_host\":\"10.0.0.1\"}}";
        JsonNode out = JSON.readTree(io.kvgate.dataplane.relay.EngineErrors.withoutKvTransferParams(trt));
        assertEquals("{\"id\":\"x\",\"choices\":[{\"index\":0,\"text\":\"hi\"}]}", out.toString());
        String clean = "{\"id\":\"y\",  \"choices\":[]}";
        assertTrue(clean == io.kvgate.dataplane.relay.EngineErrors.withoutKvTransferParams(clean), "untouched without them");
    }
}
