package io.kvgate.dataplane.exchange;

import io.kvgate.dataplane.request.ParsedRequest;
import io.netty.channel.ChannelHandlerContext;

/**
 * The one hand-off from the front door to the exchange layer: a request that passed the head, body and prompt
 * stages is started here. Implemented by the exchange layer (plain proxy, P/D); called on the client connection's
 * event loop.
 */
@FunctionalInterface
public interface ExchangeStarter {
    /**
     * Starts the exchange for {@code request}, taking ownership of {@link ParsedRequest#body()} (released by the
     * exchange, on every path). The exchange answers the client and calls {@link ExchangeOwner#onExchangeDone}
     * exactly once, possibly before this method returns (e.g. an immediate 503).
     *
     * @return the exchange in progress, so the front door can cancel it when the client goes away
     */
    ActiveExchange start(ChannelHandlerContext ctx, ParsedRequest request, ExchangeOwner owner);
}
