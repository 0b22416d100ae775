package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.dataplane.route.EndpointState;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The sequential dialects (vLLM, TensorRT-LLM): the prefill leg's JSON answer is gathered, what decode needs is
 * picked out of it, and only then is the decode leg built and routed (so an endpoint that became unhealthy
 * meanwhile is not used). An answer without parameters goes to decode as the client's request (counted as
 * {@code missing}): the decode engine then computes the prompt itself. What differs is where the parameters sit in
 * the answer and how the two bodies are written.
 */
abstract sealed class SequentialDialect implements PdDialect permits VllmDialect, TrtllmDialect {
    static final ObjectMapper JSON = new ObjectMapper();

    @Override
    public final boolean concurrent() {
        return false;
    }

    @Override
    public final boolean gathersPrefillAnswer() {
        return true;
    }

    @Override
    public final ByteBuf localBody(PdBodies client) {
        return client.original();
    }

    @Override
    public final AfterPrefill afterPrefill(PdBodies client, long transferId, int status, String answer, ByteBufAllocator alloc) {
        if (status >= 400) {
            return new AfterPrefill.EngineError(status, answer);
        }
        JsonNode n;
        try {
            n = JSON.readTree(answer);
        } catch (Exception e) {
            return new AfterPrefill.Invalid("The prefill leg answered with invalid JSON");
        }
        if (n == null || !n.isObject()) {
            return new AfterPrefill.Invalid("The prefill leg answered with invalid JSON");
        }
        return afterPrefill(client, transferId, n, alloc);
    }

    /** A successful prefill's parsed answer (a JSON object): what comes next. */
    abstract AfterPrefill afterPrefill(PdBodies client, long transferId, JsonNode answer, ByteBufAllocator alloc);

    /** {@code n} as JSON bytes. */
    static byte[] bytes(JsonNode n) {
        try {
            return JSON.writeValueAsBytes(n);
        } catch (Exception e) {
            throw new IllegalStateException(e); // a tree read from JSON always writes
        }
    }

    @Override
    public abstract ByteBuf prefillBody(PdBodies client, long transferId, EndpointState prefill, ByteBufAllocator alloc);
}
