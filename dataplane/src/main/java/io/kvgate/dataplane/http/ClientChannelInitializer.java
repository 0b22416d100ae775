package io.kvgate.dataplane.http;

import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.wire.ClientHttpCodec;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.Channel;
import io.netty.handler.timeout.IdleStateHandler;
import java.util.concurrent.TimeUnit;

/**
 * Pipeline of a client connection: the connection limit (over it, the connection is closed before anything is
 * read), the request-start sensor (starts the read deadline on a head's first byte), the HTTP/1.1 codec with
 * explicit size limits (it also frames relayed responses, whose heads go out as bytes), idle detection, the response connection policy (drain, HTTP/1.0) and the front door.
 */
public final class ClientChannelInitializer extends ChannelInitializer<Channel> {
    private final GatewayContext gw;
    private final LocalRoutes local;
    private final ExchangeStarter starter;
    private final DrainState drain;
    private final ConnectionLimit connections;

    public ClientChannelInitializer(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain,
                                    ConnectionLimit connections) {
        this.gw = gw;
        this.local = local;
        this.starter = starter;
        this.drain = drain;
        this.connections = connections;
    }

    @Override
    protected void initChannel(Channel ch) {
        if (!connections.tryAcquire()) {
            gw.metrics().shed("max_connections");
            ch.close();
            return;
        }
        ch.closeFuture().addListener(f -> connections.release());
        configure(ch.pipeline(), gw, local, starter, drain);
    }

    /** The front door's handlers, in order (also used by tests on an {@code EmbeddedChannel}). */
    public static FrontDoorHandler configure(ChannelPipeline p, GatewayContext gw, LocalRoutes local, ExchangeStarter starter,
                                             DrainState drain) {
        var limits = gw.config().limits();
        FrontDoorHandler frontDoor = new FrontDoorHandler(gw, local, starter, drain);
        p.addLast("request-start", frontDoor.requestStartSensor());
        p.addLast("codec", new ClientHttpCodec(limits.maxInitialLineBytes(), limits.maxHeaderBytes(), 64 << 10));
        p.addLast("idle", new IdleStateHandler(0, 0, limits.clientIdleTimeoutMs(), TimeUnit.MILLISECONDS));
        p.addLast("connection-policy", new ResponseConnectionPolicy(drain));
        p.addLast("front-door", frontDoor);
        return frontDoor;
    }
}
