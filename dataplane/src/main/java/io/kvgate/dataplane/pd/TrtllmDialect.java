package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import io.netty.buffer.ByteBuf;

/**
 * TensorRT-LLM ({@code trtllm-serve} disaggregated serving), sequential like vLLM: the context leg is the client's
 * request with {@code disaggregated_params: {"request_type": "context_only"}} (one token, not streamed); its JSON
 * answer carries {@code choices[0].disaggregated_params} (context request id, opaque transfer state, first generated
 * tokens), which go, with {@code request_type} turned into {@code "generation_only"}, into the original request for
 * the generation leg, whose JSON answer loses any {@code disaggregated_params} before it reaches the client.
 */
final class TrtllmDialect extends SequentialDialect {
    static final TrtllmDialect INSTANCE = new TrtllmDialect();

    private TrtllmDialect() {}

    @Override
    ByteBuf prefillBody(PdExchange x) {
        return PdBodies.trtllmContext(x.clientBody(), x.alloc());
    }

    @Override
    JsonNode transferParams(JsonNode answer) {
        return answer.path("choices").path(0).get("disaggregated_params");
    }

    @Override
    ByteBuf decodeBody(PdExchange x, JsonNode params) {
        return PdBodies.trtllmGeneration(x.clientBody(), params, x.alloc());
    }
}
