package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.request.ParsedRequest;
import io.netty.channel.ChannelHandlerContext;
import java.util.Objects;

/**
 * The exchange layer behind the front door: a request of a {@code policy: pd} rule gets a P/D exchange, every other
 * request a {@link PlainExchange}. The choice is the rule's, made here in one place, so neither starter has to
 * recognise the other's requests. Stateless; called on the client connection's event loop.
 */
public final class Exchanges implements ExchangeStarter {
    private final ExchangeStarter plain;
    private final ExchangeStarter pd;

    /**
     * @param plain starts a request of a rule without prefill/decode disaggregation
     * @param pd starts a request of a {@code policy: pd} rule (the {@code pd} package's starter: this package does not
     *           depend on it)
     */
    public Exchanges(ExchangeStarter plain, ExchangeStarter pd) {
        this.plain = Objects.requireNonNull(plain, "plain");
        this.pd = Objects.requireNonNull(pd, "pd");
    }

    /** Starts {@link PlainExchange}s on the gateway's data path {@code gw}. */
    public static ExchangeStarter plain(GatewayContext gw) {
        return (ctx, request, owner) -> {
            PlainExchange px = new PlainExchange(gw, ctx, owner, request.head(), request.body(), request.fields(),
                request.rule(), request.requestId(), request.explain(), request.startNs()).withInputs(request.inputs())
                .withRequestExtras(request.servingEndpoints(), request.warning()).withTrace(request.trace());
            px.start();
            return px;
        };
    }

    @Override
    public ActiveExchange start(ChannelHandlerContext ctx, ParsedRequest request, ExchangeOwner owner) {
        return request.rule().isPd() ? pd.start(ctx, request, owner) : plain.start(ctx, request, owner);
    }
}
