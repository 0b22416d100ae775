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
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Conditional P/D per dialect: the decode endpoint is routed first; a short prompt is served by it alone (the
 * original request, no transfer parameters), a long one releases it and takes the split path; SGLang always splits.
 */
class ConditionalPdTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":7}";

    private static PdExchange pd(ExchangeKit k, PdMetrics m, int promptTokens) throws Exception {
        int[] tokens = promptTokens < 0 ? null : new int[promptTokens];
        return new PdExchange(k.gw, m, k.capture.ctx, k.owner, ExchangeKit.request(), io.kvgate.dataplane.upstream.EmbeddedEngines.bytes(BODY),
            ExchangeKit.parsed(BODY), true, k.rule, "rid", false, 0, new RoutingInputs(tokens, null, null));
    }

    private static final String OK = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

    @Test
    void vllmShortPromptIsServedByTheDecodeEndpointAlone() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdMetrics m = new PdMetrics();
            PdExchange x = pd(k, m, 100);
            x.start();
            ExchangeKit.ScriptedRouting.Pending first = k.routing.pending.get(0);
            assertEquals(Role.DECODE, first.role(), "the decode endpoint is chosen first");
            assertTrue(first.needsAdmission(), "the request's first decision is admission-gated");
            k.decide(k.ep2);
            String sent = k.engineGot(0);
            assertTrue(sent.contains("\"max_tokens\":7") && !sent.contains("kv_transfer_params"), sent);
            assertEquals(1, k.engines.opened.size(), "no prefill leg");
            assertEquals(1, m.decisions("local"));
            assertEquals(0, m.decisions("split"));
            k.engineSends(0, OK);
            assertEquals(200, k.received().head.status().code());
        }
    }

    @Test
    void vllmLongPromptReleasesTheDecodeChoiceAndSplits() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdMetrics m = new PdMetrics();
            PdExchange x = pd(k, m, 300);
            x.start();
            k.decide(k.ep2); // decode, for the decision
            assertEquals(List.of(new Completion(k.ep2, Outcome.RELEASED)), k.engines.outcomes, "released, not charged");
            ExchangeKit.ScriptedRouting.Pending prefill = k.routing.pending.get(0);
            assertEquals(Role.PREFILL, prefill.role());
            assertFalse(prefill.needsAdmission(), "admitted with the first decision");
            k.decide(k.ep1);
            assertTrue(k.engineGot(0).contains("\"max_tokens\":1"), "the prefill leg");
            assertEquals(1, m.decisions("split"));
            assertEquals(0, m.decisions("local"));
        }
    }

    @Test
    void minUncachedTokensZeroSplitsWhatTheDecodeSideDoesNotHold() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "vllm", "    pd: {min_uncached_tokens: 0}\n")) {
            PdMetrics m = new PdMetrics();
            pd(k, m, 100).start();
            assertEquals(Role.PREFILL, k.routing.pending.get(0).role(),
                "nothing to decide: no decode endpoint publishes events and no length threshold");
            assertEquals(1, m.decisions("split"));
        }
    }

    @Test
    void aPromptTheGatewayCannotCountIsSplit() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            PdMetrics m = new PdMetrics();
            pd(k, m, -1).start();
            assertEquals(Role.PREFILL, k.routing.pending.get(0).role());
            assertEquals(1, m.decisions("split"));
        }
    }

    @Test
    void trtllmShortPromptGoesToTheGenerationServerWithoutDisaggregatedParams() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "trtllm", "")) {
            PdMetrics m = new PdMetrics();
            pd(k, m, 50).start();
            assertEquals(Role.DECODE, k.routing.pending.get(0).role());
            k.decide(k.ep2);
            String sent = k.engineGot(0);
            assertTrue(sent.contains("\"max_tokens\":7") && !sent.contains("disaggregated_params"), sent);
            assertEquals(1, m.decisions("local"));
        }
    }

    @Test
    void trtllmLongPromptSplitsWithAContextOnlyLeg() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "trtllm", "")) {
            PdMetrics m = new PdMetrics();
            pd(k, m, 400).start();
            k.decide(k.ep2);
            k.decide(k.ep1);
            assertTrue(k.engineGot(0).contains("\"request_type\":\"context_only\""), k.engineGot(0));
            assertEquals(1, m.decisions("split"));
        }
    }

    @Test
    void sglangAlwaysSplits() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd", "sglang", "")) {
            PdMetrics m = new PdMetrics();
            pd(k, m, 10).start();
            assertEquals(Role.PREFILL, k.routing.pending.get(0).role(),
                "an SGLang decode server cannot prefill without its bootstrap rendezvous");
            assertEquals(1, m.decisions("split"));
            assertEquals(0, k.rule.config().pd().minUncachedTokens());
        }
    }
}
