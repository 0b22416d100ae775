package io.kvgate.dataplane.http;

import io.kvgate.dataplane.proxy.GatewayContext;
import io.kvgate.dataplane.request.ExchangeStarter;
import io.kvgate.dataplane.wire.ClientHttpCodec;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.Channel;
import io.netty.channel.WriteBufferWaterMark;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * Pipeline of a client connection, two handlers: the HTTP/1.1 codec with explicit size limits (it also frames relayed
 * responses, whose heads go out as bytes, decides which response closes the connection — drain, HTTP/1.0 — and
 * reports raw bytes to the front door's read deadline) and the front door (which also closes idle keep-alive
 * connections). Over the connection limit, or over its client address's share ({@link ClientAddressLimit}), a
 * connection is closed before anything is read. Its write high-water mark is {@code limits.max_buffered_response_bytes}
 * (the low one half of it): above it the front door stops reading the connection.
 */
public final class ClientChannelInitializer extends ChannelInitializer<Channel> {
    private final GatewayContext gw;
    private final LocalRoutes local;
    private final ExchangeStarter starter;
    private final DrainState drain;
    private final ConnectionLimit connections;
    private final ClientAddressLimit perClient;

    public ClientChannelInitializer(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain,
                                    ConnectionLimit connections) {
        this.gw = gw;
        this.local = local;
        this.starter = starter;
        this.drain = drain;
        this.connections = connections;
        this.perClient = new ClientAddressLimit(() -> gw.config().limits().connectionsPerClient());
    }

    /** The per-address counts of this listener's connections. */
    public ClientAddressLimit perClient() {
        return perClient;
    }

    @Override
    protected void initChannel(Channel ch) {
        if (!connections.tryAcquire()) {
            gw.metrics().shed("max_connections");
            ch.close();
            return;
        }
        InetAddress client = ch.remoteAddress() instanceof InetSocketAddress a ? a.getAddress() : null;
        if (client != null && !perClient.tryAcquire(client)) {
            connections.release();
            gw.metrics().shed("max_connections_per_client");
            ch.close();
            return;
        }
        ch.closeFuture().addListener(f -> {
            connections.release();
            if (client != null) {
                perClient.release(client);
            }
        });
        configure(ch.pipeline(), gw, local, starter, drain);
    }

    /** The front door's handlers, in order (also used by tests on an {@code EmbeddedChannel}). */
    public static FrontDoorHandler configure(ChannelPipeline p, GatewayContext gw, LocalRoutes local, ExchangeStarter starter,
                                             DrainState drain) {
        var limits = gw.config().limits();
        p.channel().config().setWriteBufferWaterMark(waterMark(limits.maxBufferedResponseBytes()));
        FrontDoorHandler frontDoor = new FrontDoorHandler(gw, local, starter, drain);
        p.addLast("codec", new ClientHttpCodec(limits.maxInitialLineBytes(), limits.maxHeaderBytes(), 64 << 10,
            frontDoor.requestBytesListener(), drain::closesConnections));
        p.addLast("front-door", frontDoor);
        return frontDoor;
    }

    /** The last mark made: every connection of a configuration asks for the same one. */
    private static volatile WriteBufferWaterMark lastMark = WriteBufferWaterMark.DEFAULT;

    /** The client connection's write water marks for {@code limits.max_buffered_response_bytes}: half of it, and it. */
    static WriteBufferWaterMark waterMark(int maxBufferedResponseBytes) {
        WriteBufferWaterMark m = lastMark;
        if (m.high() != maxBufferedResponseBytes || m.low() != maxBufferedResponseBytes / 2) {
            m = new WriteBufferWaterMark(maxBufferedResponseBytes / 2, maxBufferedResponseBytes);
            lastMark = m;
        }
        return m;
    }
}
