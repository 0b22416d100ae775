package io.kvgate.dataplane.exchange;

import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.metrics.GatewayMetrics;
import io.kvgate.dataplane.route.Decision;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Outcome;
import io.kvgate.dataplane.route.RouteCallback;
import io.kvgate.dataplane.route.RouteInputs;
import io.kvgate.dataplane.upstream.LegFailure;
import io.kvgate.dataplane.upstream.LegListener;
import io.kvgate.dataplane.upstream.UpstreamLeg;
import io.kvgate.dataplane.wire.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.channel.EventLoop;
import io.netty.handler.codec.http.HttpContent;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Hedged first token of one interactive request (issue #41 item 3, docs/hedging.md): sits between the exchange and
 * its legs until one of them produced the first token. The primary leg (the exchange's) starts with this as its
 * listener; if no first token came {@code hedge.after_ms} after it, the router is asked for a second endpoint
 * (the same policy, the primary's endpoint excluded as tried) and a hedge leg sends the same request there. The
 * first leg to produce a token wins: the other is cancelled (its connection closed, so its engine aborts the request;
 * its endpoint's load returned by its teardown), and the winner's events go on to the exchange as if it had been
 * its only leg.
 *
 * <p>Nothing reaches the client before the race is decided: a streamed answer's head is copied and held (the
 * client's head goes out when that leg's first content bytes arrive); a non-streamed or error answer's head is
 * the whole answer's start, so it decides the race at once. A leg that fails before the decision leaves the race;
 * the other leg runs on alone, and only the last leg's failure reaches the exchange.
 *
 * <p>Threading: the exchange's event loop only; the timer runs on it, on its ticker (tests drive it with
 * {@code EmbeddedChannel.advanceTimeBy}).
 */
final class HedgedFirstToken implements LegListener, RouteCallback {
    /** What the race needs from its exchange ({@link PlainExchange}). */
    interface Host extends LegListener {
        /** Whether the exchange still waits for its first token (nothing went to the client, it has not ended). */
        boolean awaitingFirstToken();

        /** The exchange's routing inputs, its endpoints so far marked tried. */
        RouteInputs hedgeRouteInputs();

        /** A leg (not started) for the same request to {@code ep}, with what the router charged it. */
        UpstreamLeg hedgeLeg(EndpointState ep, int prefillTokens, int dpRank, LegListener listener);

        /** {@code leg} is the exchange's leg from now on (the hedge won, or the other leg failed). */
        void adoptLeg(UpstreamLeg leg);
    }

    private final Host host;
    private final EventLoop loop;
    private final ExchangeRouting routing;
    private final GatewayMetrics metrics;
    private final String rule;
    private final HedgeBudget budget;
    private final RuleConfig.HedgeConfig config;
    private final int promptTokens;
    /** The race, from {@link #start} (its wait depends on the primary's endpoint). */
    private HedgeRace race;
    private final Runnable onTimer = this::onTimer;

    private UpstreamLeg primary;
    private UpstreamLeg hedge;
    /** Copies of the streamed heads held until their leg's first token (null: none held). */
    private ResponseHead primaryHead;
    private ResponseHead hedgeHead;
    private ScheduledFuture<?> timer;
    /** When the budget was charged for the hedge leg being routed (refunded if it finds no endpoint). */
    private long chargedAtNs;
    private boolean routingHedge;
    /** The exchange ended or the last leg's failure went to it: a late routing decision is handed back. */
    private boolean closed;
    /** The hedge leg's endpoint, for the explanation and the access log; null before one went out. */
    private EndpointState hedgeEndpoint;

    HedgedFirstToken(Host host, EventLoop loop, ExchangeRouting routing, GatewayMetrics metrics, String rule,
                     HedgeBudget budget, RuleConfig.HedgeConfig config, int promptTokens) {
        this.host = host;
        this.loop = loop;
        this.routing = routing;
        this.metrics = metrics;
        this.rule = rule;
        this.budget = budget;
        this.config = config;
        this.promptTokens = promptTokens;
        budget.recordPrompt(loop.ticker().nanoTime(), promptTokens);
    }

    /**
     * Starts the primary leg (created with this as its listener) and arms the hedge timer: {@code after_ms}, or with
     * {@code ttft_factor} that many times the primary endpoint's recent TTFT if longer (docs/hedging.md).
     */
    void start(UpstreamLeg primaryLeg) {
        this.primary = primaryLeg;
        this.race = new HedgeRace(loop.ticker().nanoTime(), config.waitNs(primaryLeg.endpoint().ttft().recentNs()));
        timer = loop.schedule(onTimer, Math.max(0, race.dueAtNs() - loop.ticker().nanoTime()), TimeUnit.NANOSECONDS);
        primaryLeg.start();
    }

    /** The hedge leg's endpoint, or null when no hedge leg went out. */
    EndpointState hedgeEndpoint() {
        return hedgeEndpoint;
    }

    /** How the race stands, for the explanation: {@code hedge=<endpoint> won|lost|racing}, or null before a hedge. */
    String describe() {
        if (hedgeEndpoint == null || race == null) {
            return null;
        }
        String how = !race.decided() ? "racing" : race.winner() == HedgeRace.Runner.HEDGE ? "won" : "lost";
        return "hedge=" + hedgeEndpoint.key() + " " + how;
    }

    // ---- timer and routing ------------------------------------------------------------------------------------

    private void onTimer() {
        timer = null;
        if (closed) {
            return;
        }
        long now = loop.ticker().nanoTime();
        if (race.decided() || primary == null || !host.awaitingFirstToken()) {
            return;
        }
        if (!race.due(now)) {
            timer = loop.schedule(onTimer, Math.max(0, race.dueAtNs() - now), TimeUnit.NANOSECONDS);
            return;
        }
        if (!budget.tryCharge(now, promptTokens, config.maxExtraRatio())) {
            metrics.hedge(rule, "skipped_budget");
            return;
        }
        chargedAtNs = now;
        routingHedge = true;
        if (!routing.tryRoute(host.hedgeRouteInputs(), this)) {
            routingHedge = false;
            budget.refund(chargedAtNs, promptTokens);
            metrics.hedge(rule, "no_candidate");
        }
    }

    /** The router's second choice, on the event loop. */
    @Override
    public void onDecision(Decision d) {
        routingHedge = false;
        EndpointState ep = d.shed() ? null : d.endpoint();
        if (ep == null) {
            budget.refund(chargedAtNs, promptTokens);
            metrics.hedge(rule, "no_candidate");
            return;
        }
        int charged = d.chargedPrefillTokens();
        int rank = d.dpRank();
        if (closed || race.decided() || primary == null || !host.awaitingFirstToken()) {
            // The first token came (or the request ended) while the hedge was routed: nothing goes out.
            budget.refund(chargedAtNs, promptTokens);
            routing.prefillDone(ep, charged, rank);
            routing.complete(ep, Outcome.RELEASED, rank);
            return;
        }
        race.hedgeGoesOut();
        hedgeEndpoint = ep;
        metrics.hedgeExtraPromptTokens(rule, promptTokens);
        hedge = host.hedgeLeg(ep, charged, rank, this);
        hedge.start();
    }

    // ---- the legs' events -------------------------------------------------------------------------------------

    @Override
    public void onSent(UpstreamLeg l, long connectNs) {
        if (l == primary) {
            host.onSent(l, connectNs); // the exchange's stage timers follow its first leg
        }
    }

    @Override
    public void onHead(UpstreamLeg l, ResponseHead head) {
        if (race.decided() || closed) {
            host.onHead(l, head);
            return;
        }
        if (!head.eventStream() || head.status() >= 300) {
            // A non-streamed answer (its head comes with the answer) or an error: this leg's answer is the one.
            decide(l);
            host.onHead(l, head);
            return;
        }
        // A stream's head comes before its first token: held until this leg's first content bytes.
        if (l == primary) {
            primaryHead = head.copy();
        } else {
            hedgeHead = head.copy();
        }
    }

    @Override
    public void onContent(UpstreamLeg l, HttpContent content, boolean last) {
        if (race.decided() || closed) {
            host.onContent(l, content, last);
            return;
        }
        if (!content.content().isReadable() && !last) {
            content.release(); // no bytes: not a token yet
            return;
        }
        ResponseHead held = l == primary ? primaryHead : hedgeHead;
        if (l == primary) {
            primaryHead = null;
        } else {
            hedgeHead = null;
        }
        decide(l);
        try {
            host.onHead(l, held);
        } finally {
            held.release();
        }
        host.onContent(l, content, last);
    }

    @Override
    public void onReadComplete(UpstreamLeg l) {
        if (race.decided() || closed) {
            host.onReadComplete(l);
            return;
        }
        l.read(); // nothing went to the client yet: keep reading until the first token
    }

    @Override
    public void onAggregated(UpstreamLeg l, ResponseHead head, ByteBuf body) {
        host.onAggregated(l, head, body); // only a decided leg aggregates (asked by the exchange's onHead)
    }

    @Override
    public void onFailure(UpstreamLeg l, LegFailure failure, Throwable cause) {
        if (race.decided() || closed) {
            host.onFailure(l, failure, cause);
            return;
        }
        boolean wasPrimary = l == primary;
        UpstreamLeg other = wasPrimary ? hedge : primary;
        dropHead(l);
        if (wasPrimary) {
            primary = null;
        } else {
            hedge = null;
        }
        if (other != null && !other.state().terminal()) {
            // The other leg runs on alone (it may still win); this one already returned its connection and load.
            if (wasPrimary) {
                host.adoptLeg(other);
            }
            return;
        }
        // The last leg failed: the exchange handles it as its only leg's failure (retry elsewhere, or an error).
        closed = true;
        cancelTimer();
        host.onFailure(l, failure, cause);
    }

    /** The health probe found {@code ep} down: a leg of the race on it fails (and leaves the race). */
    void onEndpointDown(EndpointState ep) {
        UpstreamLeg h = hedge;
        if (race != null && !race.decided() && h != null && h.endpoint() == ep && !h.state().terminal()) {
            h.failFromListener(LegFailure.ENDPOINT_DOWN);
        }
    }

    // ---- decision and teardown --------------------------------------------------------------------------------

    private void decide(UpstreamLeg winner) {
        boolean fromHedge = winner == hedge;
        race.firstToken(fromHedge ? HedgeRace.Runner.HEDGE : HedgeRace.Runner.PRIMARY);
        cancelTimer();
        UpstreamLeg loser = fromHedge ? primary : hedge;
        if (loser != null) {
            if (fromHedge) {
                // The primary waited longer than the hedge's whole head start plus its TTFT: a lower bound of its
                // endpoint's TTFT. A losing hedge leg says nothing of its endpoint (it started late).
                routing.noFirstTokenAfter(loser.endpoint(), loser.elapsedNs());
            }
            dropHead(loser);
            loser.cancel(); // closes its connection: the engine aborts the request; its teardown returns the load
        }
        if (fromHedge) {
            host.adoptLeg(winner);
        }
        if (race.hedgeSent()) {
            metrics.hedge(rule, race.result());
        }
    }

    /** The exchange ended: a leg still in the race is cancelled, held heads freed, a late decision handed back. */
    void close() {
        if (closed && primaryHead == null && hedgeHead == null && timer == null) {
            return;
        }
        closed = true;
        cancelTimer();
        dropHead(primary);
        dropHead(hedge);
        if (primary != null && !primary.state().terminal()) {
            primary.cancel();
        }
        if (hedge != null && !hedge.state().terminal()) {
            hedge.cancel();
        }
    }

    private void dropHead(UpstreamLeg l) {
        if (l == null) {
            return;
        }
        if (l == primary && primaryHead != null) {
            primaryHead.release();
            primaryHead = null;
        } else if (l == hedge && hedgeHead != null) {
            hedgeHead.release();
            hedgeHead = null;
        }
    }

    private void cancelTimer() {
        if (timer != null) {
            timer.cancel(false);
            timer = null;
        }
    }
}
