package io.kvgate.dataplane.http;

import io.kvgate.dataplane.proxy.GatewayContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.socket.SocketChannel;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.timeout.IdleStateHandler;
import java.util.concurrent.TimeUnit;

/** Pipeline of a client connection: HTTP/1.1 codec with explicit size limits, idle detection, the front door. */
public final class ClientChannelInitializer extends ChannelInitializer<SocketChannel> {
    private final GatewayContext gw;
    private final LocalRoutes local;

    public ClientChannelInitializer(GatewayContext gw, LocalRoutes local) {
        this.gw = gw;
        this.local = local;
    }

    @Override
    protected void initChannel(SocketChannel ch) {
        var limits = gw.config().limits();
        ch.pipeline().addLast("codec", new HttpServerCodec(limits.maxInitialLineBytes(), limits.maxHeaderBytes(), 64 << 10));
        ch.pipeline().addLast("idle", new IdleStateHandler(0, 0, limits.clientIdleTimeoutMs(), TimeUnit.MILLISECONDS));
        ch.pipeline().addLast("front-door", new FrontDoorHandler(gw, local));
    }
}
