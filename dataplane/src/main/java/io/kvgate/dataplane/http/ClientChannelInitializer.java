package io.kvgate.dataplane.http;

import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.wire.ClientHttpCodec;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.Channel;

/**
 * Pipeline of a client connection, two handlers: the HTTP/1.1 codec with explicit size limits (it also frames relayed
 * responses, whose heads go out as bytes, decides which response closes the connection — drain, HTTP/1.0 — and
 * reports raw bytes to the front door's read deadline) and the front door (which also closes idle keep-alive
 * connections). Over the connection limit, a connection is closed before anything is read.
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
        p.addLast("codec", new ClientHttpCodec(limits.maxInitialLineBytes(), limits.maxHeaderBytes(), 64 << 10,
            frontDoor.requestBytesListener(), drain::draining));
        p.addLast("front-door", frontDoor);
        return frontDoor;
    }
}
