package io.kvgate.net;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.channel.uring.IoUring;
import io.netty.channel.uring.IoUringIoHandler;
import io.netty.channel.uring.IoUringServerSocketChannel;
import io.netty.channel.uring.IoUringSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;

/** The socket transport: io_uring (the configured default) when the kernel offers it, else epoll, else NIO. */
public record Transport(String name, IoHandlerFactory ioHandlerFactory, Class<? extends ServerSocketChannel> serverChannel,
                        Class<? extends SocketChannel> clientChannel, String fallbackReason) {

    public static Transport select(String wanted) {
        if ("io_uring".equals(wanted)) {
            if (IoUring.isAvailable()) {
                return new Transport("io_uring", IoUringIoHandler.newFactory(), IoUringServerSocketChannel.class,
                    IoUringSocketChannel.class, null);
            }
            Transport t = select("epoll");
            return new Transport(t.name, t.ioHandlerFactory, t.serverChannel, t.clientChannel,
                "io_uring unavailable (" + IoUring.unavailabilityCause() + ")");
        }
        if (!"nio".equals(wanted) && Epoll.isAvailable()) {
            return new Transport("epoll", EpollIoHandler.newFactory(), EpollServerSocketChannel.class, EpollSocketChannel.class, null);
        }
        String why = "nio".equals(wanted) ? null : "epoll unavailable (" + Epoll.unavailabilityCause() + ")";
        return new Transport("nio", NioIoHandler.newFactory(), NioServerSocketChannel.class, NioSocketChannel.class, why);
    }

    public EventLoopGroup newGroup(int threads, String name) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(name, true), ioHandlerFactory);
    }
}
