package io.kvgate.tools.demo;

import io.kvgate.net.Transport;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A layer-4 round-robin balancer for the multi-gateway demo ({@code ./kvgate demo --replicas N}): what HAProxy in
 * {@code mode tcp} with {@code balance roundrobin} does in front of gateway replicas, small enough to ship (a fresh
 * machine has no HAProxy; the perf script uses the real one). Each accepted connection goes to the next backend in
 * turn and is relayed byte for byte both ways until either side closes; nothing is parsed, so requests on one
 * keep-alive connection all reach the same replica, exactly as behind a real L4 balancer.
 *
 * <p>Bounded: listens on loopback only, at most {@code maxConnections} client connections at once (more are closed
 * on accept, counted), backpressure by auto-read (a side stops reading while the other's socket is not writable), a
 * backend that refuses the connection closes the client's. One event-loop thread; the client and its backend
 * connection share it, so no hand-off between threads.
 */
public final class TcpBalancer implements AutoCloseable {
    private final List<InetSocketAddress> backends;
    private final int maxConnections;
    private final Transport transport = Transport.select("epoll");
    private final EventLoopGroup group = transport.newGroup(1, "demo-balancer");
    private final Channel server;
    private final AtomicInteger next = new AtomicInteger();
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicLongArray perBackend;
    private final AtomicInteger refused = new AtomicInteger();

    public TcpBalancer(List<InetSocketAddress> backends, int maxConnections) {
        if (backends.isEmpty()) {
            throw new IllegalArgumentException("a balancer needs at least one backend");
        }
        for (InetSocketAddress b : backends) {
            if (!b.getAddress().isLoopbackAddress()) {
                throw new IllegalArgumentException("backend " + b + " is not on loopback (the demo balancer is loopback only)");
            }
        }
        this.backends = List.copyOf(backends);
        this.maxConnections = maxConnections;
        this.perBackend = new AtomicLongArray(backends.size());
        ServerBootstrap b = new ServerBootstrap().group(group).channel(transport.serverChannel())
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childOption(ChannelOption.AUTO_READ, false)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    accept(ch);
                }
            });
        try {
            this.server = b.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).sync().channel();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new IllegalStateException("interrupted while binding the balancer", e);
        }
    }

    public int port() {
        return ((InetSocketAddress) server.localAddress()).getPort();
    }

    /** Client connections each backend received so far, in backend order. */
    public long[] connectionsPerBackend() {
        long[] out = new long[perBackend.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = perBackend.get(i);
        }
        return out;
    }

    /** Connections closed on accept because {@code maxConnections} were open. */
    public int refused() {
        return refused.get();
    }

    private void accept(SocketChannel client) {
        if (open.incrementAndGet() > maxConnections) {
            open.decrementAndGet();
            refused.incrementAndGet();
            client.close();
            return;
        }
        client.closeFuture().addListener(f -> open.decrementAndGet());
        int i = Math.floorMod(next.getAndIncrement(), backends.size());
        perBackend.incrementAndGet(i);
        new Bootstrap().group(client.eventLoop()).channel(transport.clientChannel())
            .option(ChannelOption.TCP_NODELAY, true)
            .option(ChannelOption.AUTO_READ, false)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3_000)
            .handler(new Relay(client))
            .connect(backends.get(i))
            .addListener((ChannelFutureListener) f -> {
                if (!f.isSuccess()) {
                    client.close();
                    return;
                }
                Channel backend = f.channel();
                client.pipeline().addLast(new Relay(backend));
                client.read();
                backend.read();
            });
    }

    /** Copies what one side reads to the other; reads again when the write went out (backpressure), closes both. */
    private static final class Relay extends ChannelInboundHandlerAdapter {
        private final Channel peer;

        Relay(Channel peer) {
            this.peer = peer;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) { // a ByteBuf: nothing is decoded
            if (!peer.isActive()) {
                io.netty.util.ReferenceCountUtil.release(msg);
                ctx.close();
                return;
            }
            peer.writeAndFlush(msg).addListener((ChannelFutureListener) f -> {
                if (f.isSuccess()) {
                    ctx.channel().read();
                } else {
                    ctx.close();
                    peer.close();
                }
            });
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (peer.isActive()) {
                // Flush what is queued, then close: a half-sent response must still reach the client.
                peer.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
            peer.close();
        }
    }

    @Override
    public void close() {
        server.close().awaitUninterruptibly(2, TimeUnit.SECONDS);
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
    }
}
