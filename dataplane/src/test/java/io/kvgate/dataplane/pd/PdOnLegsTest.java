package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.exchange.ExchangeKit;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.dataplane.pd.PdExchange;
import io.kvgate.dataplane.pd.PdMetrics;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import java.util.List;
import org.junit.jupiter.api.Test;

/** P/D composed of legs, on embedded connections: cancel paths free what the prefill leg buffered, and bounds. */
class PdOnLegsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static PdExchange pd(ExchangeKit k, String body) throws Exception {
        return new PdExchange(k.gw, new PdMetrics(), k.capture.ctx, k.owner, ExchangeKit.request(), io.kvgate.dataplane.upstream.EmbeddedEngines.bytes(body),
            ExchangeKit.parsed(body), true, k.rule, "rid", false, 0, RoutingInputs.NONE);
    }

    @Test
    void m7_clientGoneWhileThePrefillAnswerIsArrivingFreesItsBuffer() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":5}");
            x.start();
            k.decide(k.ep1); // prefill endpoint
            assertTrue(k.engineGot(0).contains("\"max_tokens\":1"));
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{\"kv_transfer_params\":{");
            x.onClientGone();
            assertFalse(k.engine(0).isOpen(), "the prefill request is cancelled");
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED)), k.engines.outcomes, "its endpoint is returned, not charged");
            assertTrue(k.routing.pending.isEmpty(), "no decode is routed for a gone client");
            // ExchangeKit.close() asserts every engine buffer (including the aggregated prefill bytes) was released.
        }
    }

    @Test
    void m7_decodeFinishingCancelsAStillRunningPrefillWithoutLeaking() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, "{\"model\":\"m\",\"messages\":[]}");
            x.start();
            k.decide(k.ep1);
            k.engineGot(0);
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 300\r\n\r\n{\"kv_transfer_params\":");
            x.onExchangeDone(false); // the decode side ended (e.g. failed) while the prefill answer was still arriving
            assertFalse(k.engine(0).isOpen());
            assertEquals(1, k.owner.done);
        }
    }

    @Test
    void h5_sequencesBeyondTheCapAre400BeforeAnythingIsBuilt() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            pd(k, "{\"model\":\"m\",\"n\":2147483647,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").start();
            k.received();
            assertEquals(400, k.head.status().code());
            assertTrue(k.body.toString().contains("at most " + k.rule.config().maxN()), k.body.toString());
            assertTrue(k.routing.pending.isEmpty(), "nothing routed");
            assertEquals(1, k.owner.done);
        }
    }
}
