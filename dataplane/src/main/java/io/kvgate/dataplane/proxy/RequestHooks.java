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

    /**
     * Starts a custom exchange (P/D) for this rule's requests instead of the plain proxy, taking ownership of
     * {@code body}; returns null (body untouched) when the plain proxy should handle the request.
     */
    default ActiveExchange startCustomExchange(ChannelHandlerContext ctx, HttpRequest head, ByteBuf body, RequestFields fields,
                                               Rule rule, String requestId, boolean explain, long startNs, ExchangeOwner owner) {
        return null;
    }

    RequestHooks NONE = new RequestHooks() {};
}
