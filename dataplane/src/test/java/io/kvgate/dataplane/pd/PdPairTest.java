package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.exchange.ExchangeKit;
import io.kvgate.dataplane.pd.PdExchange.Phase;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.upstream.EmbeddedEngines;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * SGLang's P/D on embedded connections: its prefill and decode come in one pair decision (one publish, one round
 * trip), both legs start from it; a refused pair fails the request without an endpoint to return; a pair decided
 * after the client left returns both endpoints.
 */
class PdPairTest {
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":7}";

    private static PdExchange sglang(ExchangeKit k) throws Exception {
        return new PdExchange(k.gw, new PdMetrics(), k.capture.ctx, k.owner, ExchangeKit.request(), EmbeddedEngines.bytes(BODY),
            ExchangeKit.parsed(BODY), true, k.rule, "rid", false, 0, RoutingInputs.NONE);
    }

    @Test
    void oneDecisionChoosesBothEndpointsAndStartsBothLegs() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            PdExchange x = sglang(k);
            x.start();
            assertEquals(1, k.routing.pending.size(), "one publish for both pools");
            assertTrue(k.routing.pending.get(0).pair(), "published as a pair");
            assertEquals(Role.PREFILL, k.routing.pending.get(0).role());
            assertTrue(k.routing.pending.get(0).needsAdmission(), "the pair is the request's first, gated decision");
            k.decidePair(k.ep1, k.ep2);
            assertEquals(Phase.DECODE, x.phase());
            assertEquals(2, k.engines.opened.size(), "prefill and decode legs started together");
            assertTrue(k.routing.pending.isEmpty(), "no second decision");
            String prefill = k.engineGot(0);
            String decode = k.engineGot(1);
            assertTrue(prefill.contains("\"bootstrap_room\"") && prefill.contains("\"bootstrap_host\":\"10.0.0.1\""), prefill);
            assertTrue(decode.contains("\"bootstrap_room\""), decode);
            assertEquals(List.of(), k.engines.outcomes, "nothing released");
        }
    }

    @Test
    void aPairRefusedForWantOfADecodeEndpointFailsWithNothingToReturn() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            PdExchange x = sglang(k);
            x.start();
            k.refusePair(Role.DECODE);
            assertEquals(503, k.received().head.status().code());
            assertTrue(k.body.toString().contains("No healthy decode endpoint"), k.body.toString());
            assertEquals(List.of(), k.engines.outcomes, "the router counted neither endpoint: nothing to release");
            assertEquals(0, k.engines.opened.size());
            assertEquals(Phase.DONE, x.phase());
        }
    }

    @Test
    void aPairRefusedForWantOfAPrefillEndpointSaysSo() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            sglang(k).start();
            k.refusePair(Role.PREFILL);
            assertEquals(503, k.received().head.status().code());
            assertTrue(k.body.toString().contains("No healthy prefill endpoint"), k.body.toString());
            assertEquals(List.of(), k.engines.outcomes);
        }
    }

    @Test
    void aPairDecidedAfterTheClientLeftReturnsBothEndpoints() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            PdExchange x = sglang(k);
            x.start();
            x.onClientGone();
            k.decidePair(k.ep1, k.ep2);
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED), new Completion(k.ep2, Outcome.RELEASED)),
                k.engines.outcomes);
            assertEquals(0, k.engines.opened.size(), "no leg started");
        }
    }
}
