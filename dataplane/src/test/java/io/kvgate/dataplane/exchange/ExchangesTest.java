package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.RoutingInputs;
import io.kvgate.dataplane.route.Rule;
import io.kvgate.dataplane.upstream.EmbeddedEngines;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The exchange layer's one selection: the rule decides between the P/D and the plain exchange, nothing else. */
class ExchangesTest {
    private final List<String> started = new ArrayList<>();
    private final ActiveExchange plainEx = () -> { };
    private final ActiveExchange pdEx = () -> { };
    private final Exchanges exchanges = new Exchanges((ctx, r, o) -> {
        started.add("plain");
        return plainEx;
    }, (ctx, r, o) -> {
        started.add("pd");
        return pdEx;
    });

    private static ParsedRequest request(Rule rule) {
        return new ParsedRequest(ExchangeKit.request(), "/v1/chat/completions", true, EmbeddedEngines.bytes("{}"),
            ExchangeKit.fields(), rule, "rid", false, 0, RoutingInputs.NONE);
    }

    @Test
    void aPdRuleGetsThePdExchangeOnly() throws Exception {
        try (ExchangeKit k = new ExchangeKit("", "pd")) {
            ParsedRequest r = request(k.rule);
            assertSame(pdEx, exchanges.start(k.capture.ctx, r, k.owner));
            assertEquals(List.of("pd"), started);
            r.body().release();
        }
    }

    @Test
    void everyOtherRuleGetsThePlainExchangeOnly() throws Exception {
        try (ExchangeKit k = new ExchangeKit("")) {
            ParsedRequest r = request(k.rule);
            assertSame(plainEx, exchanges.start(k.capture.ctx, r, k.owner));
            assertEquals(List.of("plain"), started);
            r.body().release();
        }
    }
}
