package io.kvgate.dataplane.proxy;

import io.kvgate.dataplane.http.RequestFields;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpRequest;

/**
 * Extension points of the front door that later layers fill in (render routes, P/D orchestration, admin). Every
 * method runs on the client connection's event loop.
 */
public interface RequestHooks {
    /**
     * Handles a request the plain proxy does not (e.g. render routes); returns a response, or null to continue.
     * {@code body} is borrowed (not released by the hook).
     */
    default FullHttpResponse handleLocal(ChannelHandlerContext ctx, HttpRequest head, ByteBuf body, RequestFields fields,
                                         Rule rule) {
        return null;
    }

    /** True when this rule's requests are driven by a custom exchange (P/D) instead of the plain proxy. */
    default boolean startCustomExchange(ChannelHandlerContext ctx, HttpRequest head, ByteBuf body, RequestFields fields,
                                        Rule rule, String requestId, ExchangeOwner owner) {
        return false;
    }

    RequestHooks NONE = new RequestHooks() {};
}
