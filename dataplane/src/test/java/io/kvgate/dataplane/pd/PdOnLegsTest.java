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
            x.decodeEnded(false); // the decode side ended (e.g. failed) while the prefill answer was still arriving
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

    /** Through a vLLM prefill whose answer carries transfer parameters, to the decode leg routed on {@code k.ep2}. */
    private static void toDecode(ExchangeKit k, PdExchange x) {
        x.start();
        k.decide(k.ep1);
        k.engineGot(0);
        String params = "{\"kv_transfer_params\":{\"remote_block_ids\":[1]}}";
        k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + params.length() + "\r\n\r\n" + params);
        k.decide(k.ep2);
        k.engineGot(1);
    }

    @Test
    void m12_decodeJsonOverTheLimitIs502NamingTheLegNeverTruncated200() throws Exception {
        try (ExchangeKit k = new ExchangeKit("limits: {max_body_bytes: 1024}", "pd")) {
            toDecode(k, pd(k, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":5}"));
            String json = "{\"choices\":[{\"text\":\"" + "x".repeat(2_000) + "\"}],\"kv_transfer_params\":{\"remote_host\":\"10.9.9.9\"}}";
            k.engineSends(1, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + json.length() + "\r\n\r\n" + json);
            k.received();
            assertEquals(502, k.head.status().code());
            assertTrue(k.body.toString().contains("decode leg") && k.body.toString().contains("1024"), k.body.toString());
            assertFalse(k.body.toString().contains("10.9.9.9"));
            assertTrue(k.engines.outcomes.contains(new Completion(k.ep2, Outcome.SUCCESS)), "the gateway's bound is not the engine's failure");
            assertEquals(1, k.owner.done);
        }
    }

    @Test
    void decodeJsonWithinTheLimitLosesKvTransferParams() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            toDecode(k, pd(k, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":5}"));
            String json = "{\"choices\":[],\"kv_transfer_params\":{\"remote_host\":\"10.9.9.9\"}}";
            k.engineSends(1, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + json.length() + "\r\n\r\n" + json);
            k.received();
            assertEquals(200, k.head.status().code());
            assertEquals("{\"choices\":[]}", k.body.toString());
            assertEquals(1, k.owner.done);
        }
    }

    @Test
    void aDecodeConnectFailureGoesToAnotherDecodeEndpoint() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdExchange x = pd(k, "{\"model\":\"m\",\"messages\":[],\"max_tokens\":5}");
            x.start();
            k.decide(k.ep1);
            k.engineGot(0);
            String params = "{\"kv_transfer_params\":{\"remote_block_ids\":[1]}}";
            k.engines.failConnects = 1;
            k.engineSends(0, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + params.length() + "\r\n\r\n" + params);
            k.decide(k.ep2);
            assertEquals(1, k.routing.pending.size(), "the decode leg was routed again");
            k.decide(k.ep2);
            assertTrue(k.engineGot(1).contains("\"kv_transfer_params\":{\"remote_block_ids\":[1]}"), "the whole decode body again");
            k.engineSends(1, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 14\r\n\r\ndata: [DONE]\n\n");
            assertEquals(200, k.received().head.status().code());
            assertEquals(PdExchange.Phase.DONE, x.phase());
            assertEquals(1, k.owner.done);
        }
    }
}
