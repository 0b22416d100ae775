package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.handler.codec.http.HttpResponseStatus;

/**
 * TensorRT-LLM ({@code trtllm-serve} disaggregated serving), sequential like vLLM: the context leg is the client's
 * request with {@code disaggregated_params: {"request_type": "context_only"}} (one token, not streamed); its JSON
 * answer carries {@code choices[0].disaggregated_params} (context request id, opaque transfer state, first generated
 * tokens), which go, with {@code request_type} turned into {@code "generation_only"}, into the original request for
 * the generation leg. That leg is routed only after the context answered, and its JSON answer loses any
 * {@code disaggregated_params} before it reaches the client. A context answer without params (counted as
 * {@code missing}, like vLLM's) sends the original request, and the generation server computes the prompt itself.
 */
final class TrtllmDialect implements PdDialect {
    static final TrtllmDialect INSTANCE = new TrtllmDialect();
    private static final ObjectMapper JSON = new ObjectMapper();

    private TrtllmDialect() {}

    @Override
    public boolean concurrent() {
        return false;
    }

    @Override
    public void onPrefillChosen(PdExchange x) {
        x.startPrefillLeg(PdBodies.trtllmContext(x.clientBody(), x.alloc()));
    }

    @Override
    public void onDecodeChosen(PdExchange x) {
        throw new IllegalStateException("a TensorRT-LLM generation leg routes itself");
    }

    @Override
    public boolean gathersPrefillAnswer() {
        return true;
    }

    @Override
    public void onPrefillAnswered(PdExchange x, int status, String text) {
        if (status >= 400) {
            x.relayPrefillError(status, text);
            return;
        }
        JsonNode params;
        try {
            JsonNode n = JSON.readTree(text);
            params = n == null ? null : n.path("choices").path(0).get("disaggregated_params");
        } catch (Exception e) {
            x.metrics().failure("prefill", "invalid_json");
            x.fail(HttpResponseStatus.BAD_GATEWAY, "The prefill leg answered with invalid JSON", "prefill_invalid_response", false);
            return;
        }
        boolean found = params != null && params.isObject();
        if (found) {
            x.metrics().paramsFound.increment();
        } else {
            x.metrics().paramsMissing.increment(); // as on vLLM: the generation server computes the prompt itself
        }
        x.startDecodeLeg(PdBodies.trtllmGeneration(x.clientBody(), found ? params : null, x.alloc()), false);
    }
}
