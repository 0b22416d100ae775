package io.kvgate.dataplane.exchange;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.TtftFixtures;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Completion;
import io.kvgate.dataplane.upstream.EmbeddedEngines.Ttft;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The hedged first token race over embedded client and engine connections, on the event loop's injected clock
 * ({@code EmbeddedChannel.advanceTimeBy}): which leg wins, what the client gets, what happens to the loser.
 */
class HedgedFirstTokenTest {
    private static final String BODY = "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi there\"}]}";
    private static final String SSE_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    private static final String JSON_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ";
    private static final String HEDGE_100 = "    hedge: {after_ms: 100, max_extra_ratio: 1.0}\n";

    private static String chunk(String s) {
        return Integer.toHexString(s.length()) + "\r\n" + s + "\r\n";
    }

    private static ExchangeKit kit(String hedgeYaml) throws Exception {
        return new ExchangeKit("", "round_robin", "vllm", hedgeYaml);
    }

    /** An interactive (or {@code priority}) request routed to ep1 whose engine answered a stream head, no token. */
    private static PlainExchange startedStream(ExchangeKit k, String priority) {
        PlainExchange x = k.plain(BODY, ExchangeKit.request("x-kvgate-priority", priority));
        x.start();
        k.decide(k.ep1);
        k.engineGot(0);
        k.engineSends(0, SSE_HEAD);
        return x;
    }

    @Test
    void aLateFirstTokenIsHedgedAndTheHedgeWins_theClientGetsOnlyItsAnswer() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(99);
            assertTrue(k.routing.pending.isEmpty(), "no hedge before after_ms");
            assertNull(k.received().head, "the held stream head is not sent");
            k.advance(1);
            assertEquals(1, k.routing.pending.size(), "the router is asked for a second endpoint");
            assertEquals(1, k.routing.pending.get(0).inputs().triedCount(), "the primary's endpoint is excluded");
            k.decide(k.ep2);
            String hedgeRequest = k.engineGot(1);
            assertTrue(hedgeRequest.contains("hi there"), "the same request goes to the second engine: " + hedgeRequest);
            k.engineSends(1, SSE_HEAD + chunk("data: {\"hedge\":1}\n\n"));
            assertFalse(k.engine(0).isOpen(), "the primary leg is cancelled: its engine sees the request aborted");
            k.engineSends(1, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            k.received();
            assertEquals(200, k.head.status().code());
            assertEquals("data: {\"hedge\":1}\n\ndata: [DONE]\n\n", k.body.toString());
            assertTrue(k.ended);
            assertEquals(1, k.metrics.hedges("r", "won_hedge"));
            assertEquals(0, k.metrics.hedges("r", "won_primary"));
            assertTrue(k.metrics.hedgeExtraPromptTokens("r") > 0);
            assertEquals(List.of(new Completion(k.ep1, Outcome.RELEASED), new Completion(k.ep2, Outcome.SUCCESS)),
                k.engines.outcomes, "each leg returned its endpoint's load once");
        }
    }

    @Test
    void thePrimaryWinsAfterTheHedgeWentOut_theHedgeIsCancelled() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            k.engineSends(1, SSE_HEAD);
            k.engineSends(0, chunk("data: {\"primary\":1}\n\n"));
            assertFalse(k.engine(1).isOpen(), "the hedge leg is cancelled");
            assertTrue(k.engine(0).isOpen());
            k.engineSends(0, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            k.received();
            assertEquals("data: {\"primary\":1}\n\ndata: [DONE]\n\n", k.body.toString());
            assertEquals(1, k.metrics.hedges("r", "won_primary"));
            assertEquals(0, k.metrics.hedges("r", "won_hedge"));
        }
    }

    @Test
    void aFirstTokenInTimeMeansNoHedge() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(50);
            k.engineSends(0, chunk("data: {\"a\":1}\n\n"));
            assertEquals("data: {\"a\":1}\n\n", k.received().body.toString(), "the token is relayed at once");
            k.advance(500);
            assertTrue(k.routing.pending.isEmpty());
            assertEquals(1, k.engines.opened.size());
            k.engineSends(0, chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            assertTrue(k.received().ended);
            assertEquals(0, k.metrics.hedges("r", "won_primary") + k.metrics.hedges("r", "won_hedge"));
        }
    }

    @Test
    void aNonStreamedAnswerDecidesWithItsHead() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            PlainExchange x = k.plain(BODY, ExchangeKit.request("x-kvgate-priority", "interactive"));
            x.start();
            k.decide(k.ep1);
            k.engineGot(0);
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            String answer = "{\"id\":\"h\"}";
            k.engineSends(1, JSON_HEAD + answer.length() + "\r\n\r\n" + answer);
            assertFalse(k.engine(0).isOpen(), "the primary is cancelled");
            assertEquals(List.of(new Ttft(k.ep1, 100_000_000L, true)), k.engines.ttfts,
                "the cancelled primary's wait is a lower bound; a non-streamed answer is no first-token measurement");
            k.received();
            assertEquals(answer, k.body.toString());
            assertEquals(1, k.metrics.hedges("r", "won_hedge"));
        }
    }

    @Test
    void standardAndBatchRequestsAreNeverHedged() throws Exception {
        for (String priority : new String[] {"standard", "batch"}) {
            try (ExchangeKit k = kit(HEDGE_100)) {
                startedStream(k, priority);
                k.advance(1_000);
                assertTrue(k.routing.pending.isEmpty(), priority);
                assertEquals(1, k.engines.opened.size(), priority);
            }
        }
    }

    @Test
    void aRuleWithoutHedgeNeverHedges() throws Exception {
        try (ExchangeKit k = kit("")) {
            startedStream(k, "interactive");
            k.advance(1_000);
            assertTrue(k.routing.pending.isEmpty());
            k.engineSends(0, chunk("data: {\"a\":1}\n\n"));
            assertEquals(List.of(new Ttft(k.ep1, 1_000_000_000L, false)), k.engines.ttfts,
                "every streamed leg's first event is measured, hedged or not");
        }
    }

    @Test
    void overTheBudgetTheRequestIsNotHedged() throws Exception {
        // A ratio of 0.01: one request's prompt is far less than 100 prompts' worth, so the first hedge is over it.
        try (ExchangeKit k = kit("    hedge: {after_ms: 100, max_extra_ratio: 0.01}\n")) {
            startedStream(k, "interactive");
            k.advance(100);
            assertTrue(k.routing.pending.isEmpty(), "no second endpoint asked for");
            assertEquals(1, k.metrics.hedges("r", "skipped_budget"));
            assertEquals(0, k.metrics.hedgeExtraPromptTokens("r"));
            k.engineSends(0, chunk("data: {\"a\":1}\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            assertEquals("data: {\"a\":1}\n\ndata: [DONE]\n\n", k.received().body.toString(), "the primary answers");
        }
    }

    @Test
    void noSecondEndpoint_thePrimaryRunsOn() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            ExchangeKit.ScriptedRouting.Pending p = k.routing.pending.remove(0);
            p.callback().onDecision(Decision.routed(null, k.rule, "no other endpoint"));
            k.client.runPendingTasks();
            assertEquals(1, k.metrics.hedges("r", "no_candidate"));
            k.engineSends(0, chunk("data: {\"a\":1}\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            assertEquals("data: {\"a\":1}\n\ndata: [DONE]\n\n", k.received().body.toString());
        }
    }

    @Test
    void thePrimaryFailsWhileTheHedgeRuns_theHedgeAnswers() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            k.engine(0).close(); // the primary's engine dies before any token
            k.client.runPendingTasks();
            assertNull(k.received().head, "nothing reached the client");
            k.engineSends(1, SSE_HEAD + chunk("data: {\"h\":1}\n\n") + chunk("data: [DONE]\n\n") + "0\r\n\r\n");
            k.received();
            assertEquals(200, k.head.status().code());
            assertEquals("data: {\"h\":1}\n\ndata: [DONE]\n\n", k.body.toString());
            assertEquals(1, k.metrics.hedges("r", "won_hedge"));
        }
    }

    @Test
    void theClientLeavesDuringTheRace_bothLegsAreCancelled() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            PlainExchange x = startedStream(k, "interactive");
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            k.engineSends(1, SSE_HEAD);
            x.onClientGone();
            k.client.runPendingTasks();
            assertFalse(k.engine(0).isOpen());
            assertFalse(k.engine(1).isOpen());
            assertEquals(2, k.engines.outcomes.size(), "both endpoints got their load back");
        }
    }

    @Test
    void theHedgeDecisionArrivesAfterTheFirstToken_itsEndpointIsHandedBack() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            k.engineSends(0, chunk("data: {\"a\":1}\n\n"));
            k.decide(k.ep2);
            assertEquals(1, k.engines.opened.size(), "no hedge leg went out");
            assertTrue(k.engines.outcomes.contains(new Completion(k.ep2, Outcome.RELEASED)), k.engines.outcomes.toString());
            assertEquals(0, k.metrics.hedges("r", "won_primary"), "no hedge leg: no race result");
        }
    }

    @Test
    void theLosingPrimaryReportsItsWaitAsALowerBound_theWinnerItsFirstToken() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            k.advance(30);
            k.engineSends(1, SSE_HEAD + chunk("data: {\"hedge\":1}\n\n"));
            assertEquals(List.of(new Ttft(k.ep2, 30_000_000L, false), new Ttft(k.ep1, 130_000_000L, true)), k.engines.ttfts,
                "the hedge's first token came 30 ms after it was sent; the primary had waited 130 ms without one (a lower bound)");
        }
    }

    @Test
    void aLosingHedgeLegSaysNothingOfItsEndpoint() throws Exception {
        try (ExchangeKit k = kit(HEDGE_100)) {
            startedStream(k, "interactive");
            k.advance(100);
            k.decide(k.ep2);
            k.engineGot(1);
            k.advance(10);
            k.engineSends(0, chunk("data: {\"primary\":1}\n\n"));
            assertEquals(List.of(new Ttft(k.ep1, 110_000_000L, false)), k.engines.ttfts, "only the primary's first token");
        }
    }

    @Test
    void ttftFactorWaitsThatManyTimesTheEndpointsRecentTtft_cappedAtTheFleet_afterMsTheFloor() throws Exception {
        String hedge = "    hedge: {after_ms: 100, ttft_factor: 3, max_extra_ratio: 1.0}\n";
        try (ExchangeKit k = kit(hedge)) {
            // No estimate yet: after_ms alone.
            startedStream(k, "interactive");
            k.advance(100);
            assertEquals(1, k.routing.pending.size(), "no TTFT estimate for the endpoint: hedged after after_ms");
        }
        try (ExchangeKit k = kit(hedge)) {
            TtftFixtures.measured(0, new EndpointState[] {k.ep1, k.ep2}, 60, 50);
            startedStream(k, "interactive");
            k.advance(149);
            assertTrue(k.routing.pending.isEmpty(), "3 x 50 ms (ep1's 60 ms capped at the fleet's 50) not reached");
            k.advance(1);
            assertEquals(1, k.routing.pending.size(), "hedged at 3 x the recent TTFT");
        }
        try (ExchangeKit k = kit(hedge)) {
            TtftFixtures.measured(0, new EndpointState[] {k.ep1, k.ep2}, 500, 20);
            startedStream(k, "interactive");
            k.advance(100);
            assertEquals(1, k.routing.pending.size(),
                "a straggler is hedged on the fleet's time (3 x 20 ms < after_ms), not on its own 3 x 500 ms");
        }
    }
}
