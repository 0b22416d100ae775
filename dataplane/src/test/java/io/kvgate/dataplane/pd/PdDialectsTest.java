package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.exchange.ExchangeKit;
import io.kvgate.dataplane.pd.PdDialect.AfterPrefill;
import io.kvgate.dataplane.pd.PdExchange.Phase;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.upstream.EmbeddedEngines;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * What each P/D dialect returns for a prefill answer (pure values), and what {@link PdExchange} does with them on
 * embedded connections: TensorRT-LLM's generation leg built as its own orchestrator builds it, its context answer
 * returned to the client when it ended the request (JSON or the same answer as an event stream), SGLang's prefill
 * error before decode produced output, an answer that is not JSON.
 */
class PdDialectsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final UnpooledByteBufAllocator ALLOC = UnpooledByteBufAllocator.DEFAULT;
    private static final String CHAT = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":7}";
    private static final long ID = TrtllmDialect.transferId(42);

    private static PdBodies client(String body, boolean chat) {
        return new PdBodies(EmbeddedEngines.bytes(body), ExchangeKit.parsed(body), chat);
    }

    private static String contextAnswer(String finishReason, String params) {
        return "{\"id\":\"cmpl-1\",\"object\":\"chat.completion\",\"created\":7,\"model\":\"m\",\"choices\":[{\"index\":0,"
            + "\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"logprobs\":null,\"finish_reason\":\"" + finishReason + "\""
            + (params == null ? "" : ",\"disaggregated_params\":" + params) + "}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,"
            + "\"total_tokens\":4},\"prompt_token_ids\":[5,6,7]}";
    }

    private static final String PARAMS = "{\"request_type\":\"context_only\",\"first_gen_tokens\":[9],\"ctx_request_id\":11,"
        + "\"encoded_opaque_state\":\"cw==\",\"disagg_request_id\":" + ID + "}";

    private static String text(ByteBuf b) {
        try {
            return b.toString(StandardCharsets.UTF_8);
        } finally {
            b.release();
        }
    }

    @Test
    void disaggRequestIdsLieInTensorRtLlmsGlobalRange() {
        for (long r : new long[] {0, 1, -1, Long.MIN_VALUE, Long.MAX_VALUE, 1L << 40, (1L << 40) - 1}) {
            long id = TrtllmDialect.transferId(r);
            assertTrue(id >= 1L << 40 && id < Long.MAX_VALUE, r + " -> " + id);
        }
    }

    @Test
    void trtllmPendingContextAnswerGivesTheGenerationLegItsParamsUsageIdAndTokens() throws Exception {
        AfterPrefill next = TrtllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, contextAnswer("not_finished", PARAMS), ALLOC);
        AfterPrefill.Decode d = assertInstanceOf(AfterPrefill.Decode.class, next);
        assertTrue(d.paramsFound());
        JsonNode gen = JSON.readTree(text(d.body()));
        assertEquals("[5,6,7]", gen.get("prompt_token_ids").toString(), "chat: the context's tokens, not a second render");
        assertEquals(7, gen.get("max_tokens").asInt(), "the client's request otherwise");
        JsonNode p = gen.get("disaggregated_params");
        assertEquals("generation_only", p.get("request_type").asText());
        assertEquals(ID, p.get("disagg_request_id").asLong());
        assertEquals(11, p.get("ctx_request_id").asInt());
        assertEquals("cw==", p.get("encoded_opaque_state").asText());
        assertEquals(3, p.get("ctx_usage").get("prompt_tokens").asInt());
        AfterPrefill length = TrtllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, contextAnswer("length", PARAMS), ALLOC);
        assertInstanceOf(AfterPrefill.Decode.class, length, "length is pending too (TensorRT-LLM's _need_gen)");
        ((AfterPrefill.Decode) length).body().release();
    }

    @Test
    void trtllmCompletionsGetTheTokensAsTheirPrompt() throws Exception {
        String body = "{\"model\":\"m\",\"prompt\":\"hello\",\"max_tokens\":4}";
        AfterPrefill.Decode d = (AfterPrefill.Decode) TrtllmDialect.INSTANCE.afterPrefill(client(body, false), ID, 200,
            contextAnswer("not_finished", PARAMS), ALLOC);
        JsonNode gen = JSON.readTree(text(d.body()));
        assertEquals("[5,6,7]", gen.get("prompt").toString());
        assertFalse(gen.has("prompt_token_ids"));
    }

    @Test
    void trtllmContextAnswerThatEndedTheRequestIsTheAnswer() throws Exception {
        AfterPrefill.Finished eos = assertInstanceOf(AfterPrefill.Finished.class,
            TrtllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, contextAnswer("stop", "{\"request_type\":\"context_only\"}"), ALLOC));
        JsonNode a = JSON.readTree(eos.json());
        assertEquals("Hi", a.path("choices").path(0).path("message").path("content").asText());
        assertFalse(a.path("choices").path(0).has("disaggregated_params") || a.has("prompt_token_ids"), eos.json());
        String one = "{\"model\":\"m\",\"messages\":[],\"max_completion_tokens\":1}";
        AfterPrefill onlyOne = TrtllmDialect.INSTANCE.afterPrefill(client(one, true), ID, 200, contextAnswer("length", PARAMS), ALLOC);
        assertInstanceOf(AfterPrefill.Decode.class, onlyOne,
            "max_tokens 1: the context server set up the hand-off (length is pending); the generation leg releases its KV");
        ((AfterPrefill.Decode) onlyOne).body().release();
    }

    @Test
    void sequentialAnswersWithoutParamsOrNotJson() {
        AfterPrefill.Decode d = (AfterPrefill.Decode) TrtllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200,
            contextAnswer("not_finished", null), ALLOC);
        assertFalse(d.paramsFound());
        assertEquals(CHAT, text(d.body()), "no params: the client's request, the generation server computes the prompt");
        assertInstanceOf(AfterPrefill.Invalid.class, VllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, "{not json", ALLOC));
        assertInstanceOf(AfterPrefill.Invalid.class, VllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, "[1]", ALLOC));
        AfterPrefill.EngineError e = assertInstanceOf(AfterPrefill.EngineError.class,
            VllmDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 400, "{\"error\":\"bad\"}", ALLOC));
        assertEquals(400, e.status());
    }

    @Test
    void sglangDrainsASuccessAndRelaysAnError() {
        assertEquals(AfterPrefill.DRAINED, SglangDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 200, "", ALLOC));
        assertInstanceOf(AfterPrefill.EngineError.class, SglangDialect.INSTANCE.afterPrefill(client(CHAT, true), ID, 503, "x", ALLOC));
    }

    // ---- the exchange acting on them ------------------------------------------------------------------------

    private static PdExchange pd(ExchangeKit k, String body) {
        return new PdExchange(k.gw, new PdMetrics(), k.capture.ctx, k.owner, ExchangeKit.request(), EmbeddedEngines.bytes(body),
            ExchangeKit.parsed(body), true, k.rule, "rid", false, 0, RoutingInputs.NONE);
    }

    private static String json(int status, String body) {
        return "HTTP/1.1 " + status + " X\r\ncontent-type: application/json\r\ncontent-length: "
            + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body;
    }

    /** The body of a request an engine received (as {@link ExchangeKit#engineGot} gives it, once). */
    private static String bodyOf(String request) {
        return request.substring(request.indexOf("\r\n\r\n") + 4);
    }

    @Test
    void trtllmSplitPathSendsBothLegsTheSameDisaggIdAndTheContextTokens() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "trtllm", "")) {
            PdExchange x = pd(k, CHAT);
            x.start();
            k.decide(k.ep1);
            JsonNode ctxLeg = JSON.readTree(bodyOf(k.engineGot(0)));
            long id = ctxLeg.path("disaggregated_params").path("disagg_request_id").asLong();
            assertTrue(id >= 1L << 40, "a global id: " + id);
            assertFalse(ctxLeg.get("stream").asBoolean());
            k.engineSends(0, json(200, contextAnswer("not_finished", PARAMS.replace(Long.toString(ID), Long.toString(id)))));
            assertEquals(Phase.DECODE, x.phase());
            k.decide(k.ep2);
            JsonNode genLeg = JSON.readTree(bodyOf(k.engineGot(1)));
            assertEquals(id, genLeg.path("disaggregated_params").path("disagg_request_id").asLong());
            assertEquals("[5,6,7]", genLeg.get("prompt_token_ids").toString());
            k.engineSends(1, json(200, "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"Hi there\"},\"disaggregated_params\":"
                + "{\"ctx_request_id\":11}}]}"));
            assertEquals(200, k.received().head.status().code());
            assertFalse(k.body.toString().contains("disaggregated_params"), k.body.toString());
            assertEquals(Phase.DONE, x.phase());
        }
    }

    @Test
    void trtllmContextAnswerThatEndedTheRequestGoesToTheClientWithoutAGenerationLeg() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "trtllm", "")) {
            PdMetrics m = new PdMetrics();
            PdExchange x = new PdExchange(k.gw, m, k.capture.ctx, k.owner, ExchangeKit.request(), EmbeddedEngines.bytes(CHAT),
                ExchangeKit.parsed(CHAT), true, k.rule, "rid", false, 0, RoutingInputs.NONE);
            x.start();
            k.decide(k.ep1);
            k.engineSends(0, json(200, contextAnswer("stop", "{\"request_type\":\"context_only\"}")));
            assertEquals(Phase.DONE, x.phase());
            assertEquals(0, k.routing.pending.size(), "no generation leg was routed");
            assertEquals(200, k.received().head.status().code());
            JsonNode a = JSON.readTree(k.body.toString());
            assertEquals("stop", a.path("choices").path(0).path("finish_reason").asText());
            assertFalse(a.has("prompt_token_ids") || a.path("choices").path(0).has("disaggregated_params"));
            assertEquals(1, m.decisions("finished_at_prefill"));
            assertEquals(1, k.owner.done);
        }
    }

    @Test
    void aStreamedRequestTheContextAnswerEndedGetsTheAnswerAsEvents() throws Exception {
        String streamed = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
            + "\"stream_options\":{\"include_usage\":true}}";
        try (ExchangeKit k = new ExchangeKit("", "pd", "trtllm", "")) {
            PdExchange x = pd(k, streamed);
            x.start();
            k.decide(k.ep1);
            k.engineSends(0, json(200, contextAnswer("stop", "{\"request_type\":\"context_only\"}")));
            assertEquals(200, k.received().head.status().code());
            assertEquals("text/event-stream", k.head.headers().get("content-type"));
            String[] events = k.body.toString().split("\n\n");
            assertEquals(3, events.length, k.body.toString());
            JsonNode chunk = JSON.readTree(events[0].substring("data: ".length()));
            assertEquals("chat.completion.chunk", chunk.get("object").asText());
            assertEquals("Hi", chunk.path("choices").path(0).path("delta").path("content").asText());
            assertEquals("stop", chunk.path("choices").path(0).path("finish_reason").asText());
            assertEquals(4, JSON.readTree(events[1].substring("data: ".length())).path("usage").path("total_tokens").asInt());
            assertEquals("data: [DONE]", events[2]);
        }
    }

    @Test
    void sglangPrefillErrorBeforeDecodeProducedOutputAbortsDecodeAndIsRelayed() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            PdExchange x = pd(k, CHAT);
            x.start();
            assertEquals(Phase.ROUTING_PREFILL, x.phase(), "SGLang chooses its pair before either leg starts");
            k.decidePair(k.ep1, k.ep2);
            assertEquals(Phase.DECODE, x.phase());
            String prefillBody = bodyOf(k.engineGot(0));
            assertTrue(prefillBody.contains("\"bootstrap_room\":"), "both legs get the bootstrap body");
            assertEquals(prefillBody, bodyOf(k.engineGot(1)), "the same body");
            k.engineSends(0, json(400, "{\"error\":{\"message\":\"bad prompt\"}}"));
            assertEquals(400, k.received().head.status().code());
            assertTrue(k.body.toString().contains("bad prompt"), k.body.toString());
            assertEquals(Phase.DONE, x.phase());
            assertFalse(k.engine(1).isActive(), "the decode leg was cancelled");
        }
    }
}
