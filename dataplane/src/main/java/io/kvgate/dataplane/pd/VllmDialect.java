package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import io.netty.buffer.ByteBuf;

/**
 * vLLM (NIXL connector), sequential: the prefill leg asks for one token and remote decode; its JSON answer's
 * {@code kv_transfer_params} go verbatim into the original request for the decode leg, whose JSON answer loses
 * {@code kv_transfer_params} before it reaches the client.
 */
final class VllmDialect extends SequentialDialect {
    static final VllmDialect INSTANCE = new VllmDialect();

    private VllmDialect() {}

    @Override
    ByteBuf prefillBody(PdExchange x) {
        return PdBodies.vllmPrefill(x.clientBody(), x.alloc());
    }

    @Override
    JsonNode transferParams(JsonNode answer) {
        return answer.get("kv_transfer_params");
    }

    @Override
    ByteBuf decodeBody(PdExchange x, JsonNode params) {
        return PdBodies.vllmDecode(x.clientBody(), params, x.alloc());
    }
}
