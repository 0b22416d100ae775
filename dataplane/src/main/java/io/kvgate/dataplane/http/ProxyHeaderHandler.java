package io.kvgate.dataplane.http;

import io.kvgate.dataplane.exchange.GatewayContext;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.DecoderException;
import io.netty.handler.codec.haproxy.HAProxyCommand;
import io.netty.handler.codec.haproxy.HAProxyMessage;
import io.netty.handler.codec.haproxy.HAProxyProtocolException;
import io.netty.handler.codec.haproxy.HAProxyProxiedProtocol;
import io.netty.util.concurrent.ScheduledFuture;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * {@code proxy_protocol: true}: waits behind Netty's {@code HAProxyMessageDecoder} for the connection's PROXY header
 * (v1 text or v2 binary, whichever the balancer sends), takes the client address from it, and only then admits the
 * connection ({@link ClientChannelInitializer#admit}: the per-client share counted on that address, TLS, the front
 * door), after which it leaves the pipeline. A connection whose first bytes are not a valid header is closed and
 * counted ({@code kvgate_bad_requests_total{reason="proxy_protocol_invalid"}}), as is one that sends no complete
 * header within {@code limits.request_read_timeout_ms} ({@code reason="proxy_protocol_timeout"}). A {@code LOCAL}
 * header (the balancer's own health check) or an {@code UNKNOWN} protocol keeps the socket's peer address. Event-loop
 * only.
 */
final class ProxyHeaderHandler extends ChannelInboundHandlerAdapter {
    private final ClientChannelInitializer listener;
    private final GatewayContext gw;
    private ScheduledFuture<?> deadline;
    /** Counted once: a decoder that failed may report again as the connection closes. */
    private boolean rejected;

    ProxyHeaderHandler(ClientChannelInitializer listener, GatewayContext gw) {
        this.listener = listener;
        this.gw = gw;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        // The front door is not in the pipeline yet: it is told the connection is active once admitted.
        deadline = ctx.executor().schedule(() -> {
            if (ctx.channel().isActive()) {
                gw.metrics().badRequest("proxy_protocol_timeout");
                ctx.close();
            }
        }, gw.config().limits().requestReadTimeoutMs(), TimeUnit.MILLISECONDS);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof HAProxyMessage header)) {
            io.netty.util.ReferenceCountUtil.release(msg); // unreachable: the decoder passes only its header on
            return;
        }
        InetAddress client;
        try {
            client = clientAddress(header, ctx.channel().remoteAddress());
        } finally {
            header.release();
        }
        if (deadline != null) {
            deadline.cancel(false);
        }
        if (listener.admit(ctx.channel(), client)) {
            ctx.fireChannelActive(); // to the handlers admit() added after this one
            ctx.pipeline().remove(this);
        }
    }

    /** The header's source address; the socket's peer for a LOCAL command or an UNKNOWN / UNIX protocol. */
    static InetAddress clientAddress(HAProxyMessage header, java.net.SocketAddress peer) {
        HAProxyProxiedProtocol p = header.proxiedProtocol();
        boolean inet = p.addressFamily() == HAProxyProxiedProtocol.AddressFamily.AF_IPv4
            || p.addressFamily() == HAProxyProxiedProtocol.AddressFamily.AF_IPv6;
        if (header.command() == HAProxyCommand.PROXY && inet && header.sourceAddress() != null) {
            return InetAddress.ofLiteral(header.sourceAddress());
        }
        return peer instanceof InetSocketAddress a ? a.getAddress() : null;
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (!rejected && (cause instanceof HAProxyProtocolException || cause instanceof DecoderException)) {
            rejected = true;
            gw.metrics().badRequest("proxy_protocol_invalid");
        }
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (deadline != null) {
            deadline.cancel(false);
        }
    }
}
