package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netty.handler.codec.http.HttpResponseStatus;

/**
 * vLLM (NIXL connector), sequential: the prefill leg asks for one token and remote decode; its JSON answer's
 * {@code kv_transfer_params} go verbatim into the original request for the decode leg, which is routed only after
 * the prefill answered (so an endpoint that became unhealthy meanwhile is not used) and whose JSON answer loses
 * {@code kv_transfer_params} before it reaches the client.
 */
final class VllmDialect implements PdDialect {
    static final VllmDialect INSTANCE = new VllmDialect();
    private static final ObjectMapper JSON = new ObjectMapper();

    private VllmDialect() {}

    @Override
    public boolean concurrent() {
        return false;
    }

    @Override
    public void onPrefillChosen(PdExchange x) {
        x.startPrefillLeg(PdBodies.vllmPrefill(x.clientBody(), x.alloc()));
    }

    @Override
    public void onDecodeChosen(PdExchange x) {
        throw new IllegalStateException("a vLLM decode leg routes itself");
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
            params = n == null ? null : n.get("kv_transfer_params");
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
        x.startDecodeLeg(PdBodies.vllmDecode(x.clientBody(), found ? params : null, x.alloc()), false);
    }
}
