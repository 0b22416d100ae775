package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.relay.EngineErrors;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * TensorRT-LLM ({@code trtllm-serve} disaggregated serving), sequential like vLLM, in the form of TensorRT-LLM's own
 * orchestrator ({@code tensorrt_llm/serve/openai_disagg_service.py}, context first):
 * <ul>
 *   <li>both legs carry one {@code disagg_request_id} in {@code disaggregated_params}, drawn per request from the
 *       range TensorRT-LLM keeps for global ids ({@link #transferId}); the context leg is the client's request with
 *       {@code disaggregated_params: {"request_type":"context_only","disagg_request_id":…}}, not streamed;</li>
 *   <li>its JSON answer carries {@code choices[0].disaggregated_params} (context request id, opaque transfer state,
 *       first generated tokens), the prompt as the context server tokenized it ({@code prompt_token_ids}) and its
 *       {@code usage}: the generation leg gets the params with {@code request_type: "generation_only"}, the usage as
 *       {@code ctx_usage} and the same {@code disagg_request_id}, and the token ids as its prompt;</li>
 *   <li>a context answer whose {@code finish_reason} is final (not {@code length}/{@code not_finished}: the first
 *       token was EOS or a stop string, and no KV hand-off was set up) is the client's answer: no generation
 *       leg.</li>
 * </ul>
 * The generation answer loses any {@code disaggregated_params} before it reaches the client.
 */
final class TrtllmDialect extends SequentialDialect {
    static final TrtllmDialect INSTANCE = new TrtllmDialect();

    /**
     * TensorRT-LLM's global request ids ({@code disagg_utils.get_global_disagg_request_id}) live in
     * {@code [2^40, 2^63 − 1)}; below is the workers' local id space, which a global id must never collide with.
     */
    static final long MIN_GLOBAL_ID = 1L << 40;

    private TrtllmDialect() {}

    /**
     * A {@code disagg_request_id} from 64 random bits: uniform over TensorRT-LLM's global-id range. Its own
     * coordinator makes them unique by node and time; gateway replicas share nothing, so they draw at random (two
     * requests in flight meet with probability about 2^-63 per pair).
     */
    static long transferId(long random) {
        return MIN_GLOBAL_ID + Math.floorMod(random, Long.MAX_VALUE - MIN_GLOBAL_ID);
    }

    @Override
    public ByteBuf prefillBody(PdBodies client, long transferId, EndpointState prefill, ByteBufAllocator alloc) {
        return client.trtllmContext(transferId, alloc);
    }

    @Override
    AfterPrefill afterPrefill(PdBodies client, long transferId, JsonNode answer, ByteBufAllocator alloc) {
        JsonNode choice = answer.path("choices").path(0);
        if (finished(choice)) {
            return new AfterPrefill.Finished(EngineErrors.withoutKvTransferParams(withoutPromptTokenIds(answer)));
        }
        JsonNode params = choice.get("disaggregated_params");
        if (params == null || !params.isObject()) {
            return new AfterPrefill.Decode(client.original(), false);
        }
        ObjectNode gen = ((ObjectNode) params).deepCopy();
        gen.put("request_type", "generation_only");
        gen.put("disagg_request_id", transferId);
        JsonNode usage = answer.get("usage");
        if (usage != null && usage.isObject()) {
            gen.set("ctx_usage", usage);
        }
        JsonNode ids = answer.get("prompt_token_ids");
        byte[] prompt = ids != null && ids.isArray() && !ids.isEmpty() ? bytes(ids) : null;
        return new AfterPrefill.Decode(client.trtllmGeneration(bytes(gen), prompt, alloc), true);
    }

    /**
     * Whether the context answer ended the request: its {@code finish_reason} is final (TensorRT-LLM's
     * {@code _need_gen}: anything but {@code length} and {@code not_finished}, i.e. EOS or a stop string at the first
     * token, for which the context server set up no KV hand-off). {@code length} stays pending even when the client
     * allowed one token: the context server then holds the request's KV for the hand-off, and only a generation leg
     * releases it before the transfer times out. No finish reason at all is pending too (the hand-off decides).
     */
    static boolean finished(JsonNode choice) {
        JsonNode reason = choice.get("finish_reason");
        return reason != null && reason.isTextual() && !"length".equals(reason.asText()) && !"not_finished".equals(reason.asText());
    }

    /** The client's answer carries no {@code prompt_token_ids}: the context server returns them for the hand-off. */
    private static String withoutPromptTokenIds(JsonNode answer) {
        if (answer instanceof ObjectNode o && o.has("prompt_token_ids")) {
            ObjectNode copy = o.deepCopy();
            copy.remove("prompt_token_ids");
            return copy.toString();
        }
        return answer.toString();
    }
}
