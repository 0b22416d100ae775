package io.kvgate.dataplane.admin;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.timeout.IdleStateEvent;
import io.netty.handler.timeout.IdleStateHandler;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The admin listener's (and control socket's) pipeline, with the bounds an operator port still needs: at most
 * {@code admin_limits.max_connections} connections (one more is answered 503 and closed), an idle timeout, and a
 * body limit (larger bodies are answered 413 by the aggregator). Limits are read per new connection, so a reload
 * applies them to the next connection.
 */
public class AdminChannelInitializer extends ChannelInitializer<Channel> {
    private final AdminApi api;
    private final Supplier<String> token;
    private final Supplier<GatewayConfig.AdminLimits> limits;
    private final AtomicInteger open = new AtomicInteger();

    public AdminChannelInitializer(AdminApi api, Supplier<String> token, Supplier<GatewayConfig.AdminLimits> limits) {
        this.api = api;
        this.token = token;
        this.limits = limits;
    }

    /** Connections open now. */
    public int openConnections() {
        return open.get();
    }

    @Override
    protected void initChannel(Channel ch) {
        GatewayConfig.AdminLimits l = limits.get();
        if (open.incrementAndGet() > l.maxConnections()) {
            open.decrementAndGet();
            Log.warn("admin: connection refused, " + l.maxConnections() + " already open (admin_limits.max_connections)");
            byte[] body = "{\"error\":{\"message\":\"too many admin connections\",\"type\":\"service_unavailable\"}}"
                .getBytes(StandardCharsets.UTF_8);
            String head = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: " + body.length
                + "\r\nconnection: close\r\n\r\n";
            ch.writeAndFlush(Unpooled.wrappedBuffer(head.getBytes(StandardCharsets.US_ASCII), body))
                .addListener(ChannelFutureListener.CLOSE);
            return;
        }
        ch.closeFuture().addListener(f -> open.decrementAndGet());
        addFirstHandlers(ch);
        ch.pipeline().addLast("idle", new IdleStateHandler(0, 0, l.idleTimeoutMs(), TimeUnit.MILLISECONDS));
        ch.pipeline().addLast("idle-close", new ChannelDuplexHandler() {
            @Override
            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
                if (evt instanceof IdleStateEvent) {
                    ctx.close();
                } else {
                    super.userEventTriggered(ctx, evt);
                }
            }
        });
        ch.pipeline().addLast("codec", new HttpServerCodec(8192, 16 << 10, 64 << 10));
        ch.pipeline().addLast("aggregate", new HttpObjectAggregator(l.maxBodyBytes()));
        ch.pipeline().addLast("admin", new AdminHandler(api, token));
    }

    /** Handlers that must see the connection before HTTP (the control socket's peer check). */
    protected void addFirstHandlers(Channel ch) {
    }
}
