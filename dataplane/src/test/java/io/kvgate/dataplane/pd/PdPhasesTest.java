package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.exchange.ExchangeKit;
import io.kvgate.dataplane.pd.PdExchange.Phase;
import io.kvgate.dataplane.request.RoutingInputs;
import org.junit.jupiter.api.Test;

/** PdExchange's phases walked on embedded connections, per path: split, conditional (local), and the client leaving. */
class PdPhasesTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":7}";
    private static final String PREFILL_ANSWER = "{\"kv_transfer_params\":{\"remote_block_ids\":[1]}}";
    private static final String OK = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

    private static PdExchange pd(ExchangeKit k, int[] promptTokens) throws Exception {
        return new PdExchange(k.gw, new PdMetrics(), k.capture.ctx, k.owner, ExchangeKit.request(), io.kvgate.dataplane.upstream.EmbeddedEngines.bytes(BODY),
            ExchangeKit.parsed(BODY), true, k.rule, "rid", false, 0, new RoutingInputs(promptTokens, null, null));
    }

    @Test
    void theSplitPathRoutesThePrefillRunsItThenDecodesAndEnds() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, null);
            x.start();
            assertEquals(Phase.ROUTING_PREFILL, x.phase());
            k.decide(k.ep1);
            assertEquals(Phase.PREFILL, x.phase());
            k.engineGot(0);
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + PREFILL_ANSWER.length()
                + "\r\n\r\n" + PREFILL_ANSWER);
            assertEquals(Phase.DECODE, x.phase(), "the decode leg was built (and routes itself)");
            k.decide(k.ep2);
            k.engineGot(1);
            k.engineSends(1, OK);
            assertEquals(200, k.received().head.status().code());
            assertEquals(Phase.DONE, x.phase());
            assertEquals(1, k.owner.done);
        }
    }

    @Test
    void theConditionalPathDecidesFirstAndServesAShortPromptOnTheDecodeEndpoint() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, new int[100]);
            x.start();
            assertEquals(Phase.DECIDING, x.phase());
            k.decide(k.ep2);
            assertEquals(Phase.DECODE, x.phase(), "local path: straight to decode, no prefill");
            k.engineGot(0);
            k.engineSends(0, OK);
            assertEquals(Phase.DONE, x.phase());
        }
    }

    @Test
    void theClientLeavingDuringThePrefillEndsTheExchangeAndNothingMoreIsRouted() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, null);
            x.start();
            k.decide(k.ep1);
            x.onClientGone();
            assertEquals(Phase.DONE, x.phase());
            assertEquals(0, k.routing.pending.size());
            assertEquals(0, k.owner.done, "the front door learned it itself: no second end");
        }
    }
}
