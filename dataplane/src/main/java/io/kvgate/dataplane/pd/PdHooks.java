package io.kvgate.dataplane.pd;

import io.kvgate.dataplane.request.ParsedRequest;
import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.exchange.ActiveExchange;
import io.kvgate.dataplane.exchange.ExchangeOwner;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpRequest;
import java.util.function.Supplier;

/** Sends the requests of {@code policy: pd} rules through {@link PdExchange}. Stateless; event-loop calls only. */
public final class PdHooks implements ExchangeStarter {
    private final Supplier<GatewayContext> gw;
    private final PdMetrics metrics;
    private final PdPath path;

    /** @param index the gateway's KV block index, or null (conditional P/D then knows no cached prefix) */
    public PdHooks(Supplier<GatewayContext> gw, PdMetrics metrics, Supplier<io.kvgate.index.block.BlockIndex> index) {
        this.gw = gw;
        this.metrics = metrics;
        this.path = new PdPath(index);
    }

    public PdHooks(Supplier<GatewayContext> gw, PdMetrics metrics) {
        this(gw, metrics, () -> null);
    }

    /** Starts a P/D exchange for a request of a {@code policy: pd} rule (taking its body); {@link io.kvgate.dataplane.exchange.Exchanges} chooses. */
    @Override
    public ActiveExchange start(ChannelHandlerContext ctx, ParsedRequest request, ExchangeOwner owner) {
        Rule rule = request.rule();
        HttpRequest head = request.head();
        ByteBuf body = request.body();
        RequestFields fields = request.fields();
        String requestId = request.requestId();
        GatewayContext g = gw.get();
        // The legs' bodies are spliced from the client's bytes at the ranges the front door recorded: no parse here.
        PdExchange ex = new PdExchange(g, metrics, ctx, owner, head, body, fields, request.chat(), rule, requestId, request.explain(),
            request.startNs(), request.inputs(), path).withRequestExtras(request.servingEndpoints(), request.warning())
            .withTrace(request.trace());
        ex.start();
        return ex;
    }

    public PdMetrics metrics() {
        return metrics;
    }
}
