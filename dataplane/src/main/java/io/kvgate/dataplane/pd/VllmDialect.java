package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * vLLM (NIXL connector), sequential: the prefill leg asks for one token and remote decode; its JSON answer's
 * {@code kv_transfer_params} go verbatim into the client's request for the decode leg, whose JSON answer loses
 * {@code kv_transfer_params} before it reaches the client.
 */
final class VllmDialect extends SequentialDialect {
    static final VllmDialect INSTANCE = new VllmDialect();

    private VllmDialect() {}

    @Override
    public ByteBuf prefillBody(PdBodies client, long transferId, EndpointState prefill, ByteBufAllocator alloc) {
        return client.vllmPrefill(alloc);
    }

    @Override
    AfterPrefill afterPrefill(PdBodies client, long transferId, JsonNode answer, ByteBufAllocator alloc) {
        JsonNode params = answer.get("kv_transfer_params");
        boolean found = params != null && params.isObject();
        return new AfterPrefill.Decode(client.vllmDecode(found ? bytes(params) : null, alloc), found);
    }
}
