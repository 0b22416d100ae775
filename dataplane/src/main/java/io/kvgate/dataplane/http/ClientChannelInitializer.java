package io.kvgate.dataplane.http;

import io.kvgate.dataplane.exchange.GatewayContext;
import io.kvgate.dataplane.exchange.ExchangeStarter;
import io.kvgate.dataplane.tls.ServerTls;
import io.kvgate.dataplane.wire.ClientHttpCodec;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.Channel;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.handler.codec.haproxy.HAProxyMessageDecoder;
import io.netty.handler.ssl.SslHandler;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * Pipeline of a client connection, two handlers: the HTTP/1.1 codec with explicit size limits (it also frames relayed
 * responses, whose heads go out as bytes, decides which response closes the connection — drain, HTTP/1.0 — and
 * reports raw bytes to the front door's read deadline) and the front door (which also closes idle keep-alive
 * connections). Over the connection limit, or over its client address's share ({@link ClientAddressLimit}), a
 * connection is closed before anything is read. Its write high-water mark is {@code limits.max_buffered_response_bytes}
 * (the low one half of it): above it the front door stops reading the connection.
 *
 * <p>With {@code tls} the connection's TLS handler comes first, made from the listener's TLS context in effect when
 * it is accepted ({@link ServerTls}). With {@code proxy_protocol: true} the pipeline starts with the PROXY header
 * decoder instead, and the connection is admitted (per-client share, TLS, front door) only once its header named the
 * client ({@link ProxyHeaderHandler}).
 */
public final class ClientChannelInitializer extends ChannelInitializer<Channel> {
    private final GatewayContext gw;
    private final LocalRoutes local;
    private final ExchangeStarter starter;
    private final DrainState drain;
    private final ConnectionLimit connections;
    private final ClientAddressLimit perClient;
    private final ServerTls tls;

    /** A plain-HTTP listener (no TLS context ever installed). */
    public ClientChannelInitializer(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain,
                                    ConnectionLimit connections) {
        this(gw, local, starter, drain, connections, new ServerTls(m -> { }));
    }

    /** @param tls the listener's TLS context owner (plain HTTP while it holds none) */
    public ClientChannelInitializer(GatewayContext gw, LocalRoutes local, ExchangeStarter starter, DrainState drain,
                                    ConnectionLimit connections, ServerTls tls) {
        this.tls = tls;
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
        ch.closeFuture().addListener(f -> connections.release());
        if (gw.config().tls().proxyProtocol()) {
            ch.pipeline().addLast("proxy-protocol", new HAProxyMessageDecoder());
            ch.pipeline().addLast("proxy-header", new ProxyHeaderHandler(this, gw));
            return;
        }
        admit(ch, ch.remoteAddress() instanceof InetSocketAddress a ? a.getAddress() : null);
    }

    /**
     * Admits a connection already within the connection limit, for {@code client} (the socket's peer, or the address
     * a PROXY header named): its per-client share, then its TLS handler and the front door. False when refused (the
     * connection is closed).
     */
    boolean admit(Channel ch, InetAddress client) {
        if (client != null && !perClient.tryAcquire(client)) {
            gw.metrics().shed("max_connections_per_client");
            ch.close();
            return false;
        }
        if (client != null) {
            ch.closeFuture().addListener(f -> perClient.release(client));
        }
        SslHandler ssl = tls.newHandler(ch);
        if (ssl != null) {
            ch.pipeline().addLast("tls", ssl);
            ch.pipeline().addLast("tls-errors", QUIET_TLS_ERRORS);
        }
        configure(ch.pipeline(), gw, local, starter, drain);
        return true;
    }

    /**
     * A TLS failure (a failed handshake: a scanner, a client without the required certificate, a plain-HTTP client on
     * the TLS port; or a corrupt record) closes the connection without a log line: anyone can cause one, so logging
     * each would be a log flood. Handshake failures are counted ({@code kvgate_tls_handshake_failures_total}).
     */
    @io.netty.channel.ChannelHandler.Sharable
    static final class QuietTlsErrors extends io.netty.channel.ChannelInboundHandlerAdapter {
        @Override
        public void exceptionCaught(io.netty.channel.ChannelHandlerContext ctx, Throwable cause) {
            if (cause instanceof io.netty.handler.codec.DecoderException && cause.getCause() instanceof javax.net.ssl.SSLException) {
                ctx.close();
                return;
            }
            ctx.fireExceptionCaught(cause);
        }
    }

    private static final QuietTlsErrors QUIET_TLS_ERRORS = new QuietTlsErrors();

    /** The front door's handlers, in order (also used by tests on an {@code EmbeddedChannel}). */
    public static ClientConnection configure(ChannelPipeline p, GatewayContext gw, LocalRoutes local, ExchangeStarter starter,
                                             DrainState drain) {
        var limits = gw.config().limits();
        p.channel().config().setWriteBufferWaterMark(waterMark(limits.maxBufferedResponseBytes()));
        ClientConnection frontDoor = new ClientConnection(gw, local, starter, drain);
        p.addLast("codec", new ClientHttpCodec(limits.maxInitialLineBytes(), limits.maxHeaderBytes(), 64 << 10,
            frontDoor.requestBytesListener(), drain::closesConnections));
        p.addLast("answer-headers", frontDoor.answerHeaders());
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
