package io.kvgate.dataplane.proxy;

import io.kvgate.dataplane.request.RequestFields;
import io.kvgate.dataplane.route.Rule;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpRequest;

/**
 * Extension point of the front door for routes answered locally by another component (the render routes). Runs on
 * the client connection's event loop.
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

    RequestHooks NONE = new RequestHooks() {};
}
