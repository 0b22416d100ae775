package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.request.RequestFieldExtractor;
import io.kvgate.dataplane.request.RequestFields;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The P/D dialects' bodies, as engine-contracts.md §4 and TensorRT-LLM's orchestrator state them: byte splices over
 * the client's body at the ranges the extractor recorded, the same whichever way the body arrived (every body split
 * at every byte), every byte the dialect does not edit kept, and the client's buffer left as it was.
 */
class PdBodiesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final UnpooledByteBufAllocator ALLOC = UnpooledByteBufAllocator.DEFAULT;

    private static RequestFields parsed(byte[] b, int split) {
        RequestFields f = new RequestFields();
        RequestFieldExtractor x = new RequestFieldExtractor(f);
        x.feed(ByteBuffer.wrap(b, 0, split));
        x.feed(ByteBuffer.wrap(b, split, b.length - split));
        assertEquals(RequestFieldExtractor.Result.OK, x.finish(), "split at " + split);
        return f;
    }

    /** The body {@code leg} builds from {@code client}, asserted the same for every split; the client's bytes untouched. */
    private static String built(String client, boolean chat, Function<PdBodies, ByteBuf> leg) {
        byte[] b = client.getBytes(StandardCharsets.UTF_8);
        String first = null;
        for (int split = 0; split <= b.length; split++) {
            ByteBuf in = Unpooled.copiedBuffer(b);
            ByteBuf out = leg.apply(new PdBodies(in, parsed(b, split), chat));
            String s = out.toString(StandardCharsets.UTF_8);
            out.release();
            assertEquals(client, in.toString(StandardCharsets.UTF_8), "the client's body is not modified");
            assertEquals(1, in.refCnt(), "the client's reference stays the exchange's");
            in.release();
            if (first == null) {
                first = s;
            } else {
                assertEquals(first, s, "split at " + split);
            }
        }
        return first;
    }

    private static JsonNode tree(String s) throws Exception {
        return JSON.readTree(s);
    }

    @Test
    void vllmPrefillAsksForOneUnstreamedTokenAndRemoteDecode() throws Exception {
        String client = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"max_completion_tokens\":60,"
            + "\"stream_options\":{\"include_usage\":true},\"min_tokens\":3,\"min_completion_tokens\":4,\"messages\":[]}";
        String p = built(client, true, c -> c.vllmPrefill(ALLOC));
        assertEquals("{\"model\":\"m\",\"stream\":false,\"max_tokens\":1,\"max_completion_tokens\":1,\"stream_options\":null,"
            + "\"min_tokens\":0,\"min_completion_tokens\":0,\"messages\":[],\"kv_transfer_params\":{\"do_remote_decode\":true,"
            + "\"do_remote_prefill\":false,\"remote_engine_id\":null,\"remote_block_ids\":null,\"remote_host\":null,"
            + "\"remote_port\":null}}", p);
        JsonNode bare = tree(built("{\"model\":\"m\",\"messages\":[]}", true, c -> c.vllmPrefill(ALLOC)));
        assertFalse(bare.has("max_completion_tokens") || bare.has("min_tokens") || bare.has("stream_options"),
            "members the client did not send are not added, except stream and max_tokens");
        assertEquals(1, bare.get("max_tokens").asInt());
        assertFalse(bare.get("stream").asBoolean());
    }

    @Test
    void theEditLandsOnTheLastOccurrenceTheEngineReads() throws Exception {
        String p = built("{\"model\":\"m\",\"stream\":true,\"messages\":[],\"stream\" : true}", true, c -> c.vllmPrefill(ALLOC));
        assertTrue(p.startsWith("{\"model\":\"m\",\"stream\":true,\"messages\":[],\"stream\" : false,"), p);
    }

    @Test
    void vllmDecodeIsTheOriginalPlusTheParamsVerbatim() throws Exception {
        String client = "{\"model\":\"m\", \"stream\":true,\"max_tokens\":50,\"messages\":[]}";
        byte[] params = "{\"do_remote_prefill\":true,\"remote_block_ids\":[[1,2]],\"tp_size\":1}".getBytes(StandardCharsets.UTF_8);
        assertEquals("{\"model\":\"m\", \"stream\":true,\"max_tokens\":50,\"messages\":[],\"kv_transfer_params\":"
            + "{\"do_remote_prefill\":true,\"remote_block_ids\":[[1,2]],\"tp_size\":1}}", built(client, true, c -> c.vllmDecode(params, ALLOC)));
        assertEquals(client, built(client, true, c -> c.vllmDecode(null, ALLOC)), "no params: the client's request");
    }

    @Test
    void sglangCarriesOneRoomPerSequence() throws Exception {
        AtomicLong rooms = new AtomicLong(100);
        JsonNode one = tree(built("{\"model\":\"m\",\"messages\":[]}", true, c -> {
            rooms.set(100);
            return c.sglang(1, "10.0.0.1", 8998, rooms::incrementAndGet, ALLOC);
        }));
        assertEquals("10.0.0.1", one.get("bootstrap_host").asText());
        assertEquals(8998, one.get("bootstrap_port").asInt());
        assertEquals(101, one.get("bootstrap_room").asLong());
        JsonNode three = tree(built("{\"model\":\"m\",\"n\":3,\"messages\":[]}", true, c -> {
            rooms.set(101);
            return c.sglang(3, "h", 1, rooms::incrementAndGet, ALLOC);
        }));
        assertEquals("[\"h\",\"h\",\"h\"]", three.get("bootstrap_host").toString());
        assertEquals("[1,1,1]", three.get("bootstrap_port").toString());
        assertEquals("[102,103,104]", three.get("bootstrap_room").toString(), "a distinct room per sequence");
    }

    @Test
    void sequencesCountBatchedPromptsAndChatN() {
        assertEquals(1, PdBodies.sequences(parsed("{\"prompt\":\"one\"}")));
        assertEquals(1, PdBodies.sequences(parsed("{\"prompt\":[1,2,3]}")), "token ids are one prompt");
        assertEquals(2, PdBodies.sequences(parsed("{\"prompt\":[\"a\",\"b\"]}")));
        assertEquals(2, PdBodies.sequences(parsed("{\"prompt\":[[1],[2]]}")));
        assertEquals(4, PdBodies.sequences(parsed("{\"messages\":[],\"n\":4}")));
        assertEquals(1, PdBodies.sequences(parsed("{\"messages\":[],\"n\":\"4\"}")));
        assertEquals(Integer.MAX_VALUE, PdBodies.sequences(parsed("{\"messages\":[],\"n\":2147483647}")),
            "counted, not built: the exchange refuses it against max_n");
    }

    private static RequestFields parsed(String body) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        return parsed(b, b.length);
    }

    @Test
    void trtllmContextIsContextOnlyUnstreamedWithTheRequestsDisaggId() throws Exception {
        String client = "{\"model\":\"m\",\"stream\":true,\"max_tokens\":50,\"stream_options\":{\"include_usage\":true},"
            + "\"min_tokens\":3,\"messages\":[]}";
        String p = built(client, true, c -> c.trtllmContext(1L << 41, ALLOC));
        assertEquals("{\"model\":\"m\",\"stream\":false,\"max_tokens\":50,\"stream_options\":null,\"min_tokens\":3,\"messages\":[],"
            + "\"disaggregated_params\":{\"request_type\":\"context_only\",\"disagg_request_id\":2199023255552}}", p,
            "TensorRT-LLM's _get_ctx_request: the client's max_tokens (a context server generates the first token only)");
    }

    @Test
    void trtllmGenerationCarriesTheParamsAndTheContextsTokensAsThePrompt() throws Exception {
        byte[] params = "{\"request_type\":\"generation_only\",\"ctx_request_id\":3}".getBytes(StandardCharsets.UTF_8);
        byte[] ids = "[1,2,3]".getBytes(StandardCharsets.UTF_8);
        assertEquals("{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"prompt_token_ids\":[1,2,3],"
            + "\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":3}}",
            built("{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", true,
                c -> c.trtllmGeneration(params, ids, ALLOC)), "chat: prompt_token_ids");
        assertEquals("{\"model\":\"m\",\"prompt\":[1,2,3],\"max_tokens\":9,\"disaggregated_params\":{\"request_type\":\"generation_only\","
            + "\"ctx_request_id\":3}}", built("{\"model\":\"m\",\"prompt\":\"hello there\",\"max_tokens\":9}", false,
                c -> c.trtllmGeneration(params, ids, ALLOC)), "completions: the prompt itself");
    }
}
