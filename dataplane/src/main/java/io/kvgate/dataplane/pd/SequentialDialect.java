package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.buffer.ByteBuf;
import io.netty.handler.codec.http.HttpResponseStatus;

/**
 * The sequential dialects (vLLM, TensorRT-LLM): the prefill leg's JSON answer is gathered, the transfer parameters
 * are picked out of it, and only then is the decode leg built and routed (so an endpoint that became unhealthy
 * meanwhile is not used). An answer without parameters is counted as {@code missing} and the decode leg gets the
 * original request: the decode engine then computes the prompt itself. What differs is where the parameters sit
 * in the answer and how the two bodies are written.
 */
abstract sealed class SequentialDialect implements PdDialect permits VllmDialect, TrtllmDialect {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The prefill leg's body, built from the client's. */
    abstract ByteBuf prefillBody(PdExchange x);

    /** The transfer parameters in the prefill's parsed answer, or null. */
    abstract JsonNode transferParams(JsonNode answer);

    /** The decode leg's body: the client's with {@code params} (null: none were issued). */
    abstract ByteBuf decodeBody(PdExchange x, JsonNode params);

    @Override
    public final boolean concurrent() {
        return false;
    }

    @Override
    public final void onPrefillChosen(PdExchange x) {
        x.startPrefillLeg(prefillBody(x));
    }

    @Override
    public final void onDecodeChosen(PdExchange x) {
        throw new IllegalStateException("a sequential decode leg routes itself after the prefill answered");
    }

    @Override
    public final ByteBuf localBody(PdExchange x) {
        return decodeBody(x, null);
    }

    @Override
    public final boolean gathersPrefillAnswer() {
        return true;
    }

    @Override
    public final void onPrefillAnswered(PdExchange x, int status, String text) {
        if (status >= 400) {
            x.relayPrefillError(status, text);
            return;
        }
        JsonNode params;
        try {
            JsonNode n = JSON.readTree(text);
            params = n == null ? null : transferParams(n);
        } catch (Exception e) {
            x.metrics().failure("prefill", "invalid_json");
            x.fail(HttpResponseStatus.BAD_GATEWAY, "The prefill leg answered with invalid JSON", "prefill_invalid_response", false);
            return;
        }
        boolean found = params != null && params.isObject();
        if (found) {
            x.metrics().paramsFound.increment();
        } else {
            x.metrics().paramsMissing.increment(); // prompt shorter than a block, or first token EOS: decode recomputes
        }
        x.startDecodeLeg(decodeBody(x, found ? params : null), false);
    }
}
