package io.kvgate.dataplane.admin;

import io.kvgate.control.ControlSocketLocation;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The control socket: a Unix domain socket speaking the admin API's HTTP/JSON routes (plus the {@code /control/v1}
 * ones) without a token. Who may talk is decided by the kernel's account of the peer, not by a secret: the socket file
 * is created mode 0600 (owner only), and every connection's peer uid (SO_PEERCRED, through Netty's epoll domain
 * sockets) must be the gateway's own uid or one listed in {@code control_allowed_uids} (read per connection, so a
 * reload applies it). Any other peer gets a 403 and is logged.
 */
public final class ControlSocket implements AutoCloseable {
    /** The uid of a connected peer (the real one reads SO_PEERCRED; tests inject another). */
    @FunctionalInterface
    public interface PeerUid {
        int of(Channel ch) throws IOException;
    }

    public static final PeerUid SO_PEERCRED = ch -> ((EpollDomainSocketChannel) ch).peerCredentials().uid();

    private final Path path;
    private final EventLoopGroup group;
    private final Channel server;

    private ControlSocket(Path path, EventLoopGroup group, Channel server) {
        this.path = path;
        this.group = group;
        this.server = server;
    }

    public static ControlSocket bind(Path path, AdminApi api, Supplier<List<Integer>> allowedUids,
                                     Supplier<GatewayConfig.AdminLimits> limits) throws IOException, InterruptedException {
        return bind(path, api, allowedUids, limits, SO_PEERCRED, ownUid());
    }

    /** @param ownUid the gateway's uid: always allowed */
    public static ControlSocket bind(Path path, AdminApi api, Supplier<List<Integer>> allowedUids,
                                     Supplier<GatewayConfig.AdminLimits> limits, PeerUid peerUid, int ownUid)
        throws IOException, InterruptedException {
        if (!Epoll.isAvailable()) {
            throw new IOException("control socket " + path + " needs Linux epoll (" + Epoll.unavailabilityCause()
                + "); set control_socket: off to run without it");
        }
        Path p = path.toAbsolutePath();
        prepare(p);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("kvgate-control", true),
            EpollIoHandler.newFactory());
        try {
            AdminChannelInitializer init = new AdminChannelInitializer(api, () -> null, limits) {
                @Override
                protected void addFirstHandlers(Channel ch) {
                    ch.pipeline().addLast("peer-check", new PeerCheck(peerUid, ownUid, allowedUids));
                }
            };
            Channel server = new ServerBootstrap().group(group).channel(EpollServerDomainSocketChannel.class)
                .childHandler(init).bind(new DomainSocketAddress(p.toFile())).sync().channel();
            // Owner-only. The uid check below is what refuses strangers; the mode keeps them from even connecting.
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rw-------"));
            Log.info("control socket on " + p + " (uids allowed: " + ownUid
                + (allowedUids.get().isEmpty() ? "" : ", " + allowedUids.get()) + ")");
            return new ControlSocket(p, group, server);
        } catch (IOException | InterruptedException | RuntimeException e) {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            throw e;
        }
    }

    /** Creates the directory (0700 when we create it) and removes a stale socket; refuses a live one. */
    private static void prepare(Path p) throws IOException {
        Path dir = p.getParent();
        if (dir != null && !Files.isDirectory(dir)) {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        }
        if (Files.exists(p)) {
            boolean live;
            try (SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX)) {
                live = c.connect(UnixDomainSocketAddress.of(p));
            } catch (IOException e) {
                live = false;
            }
            if (live) {
                throw new IOException("control socket " + p + " is in use by another process (another kvgate?); "
                    + "stop it or set control_socket to another path");
            }
            Files.delete(p); // left behind by a process that died
        }
    }

    /** The gateway process's uid (owner of /proc/self): the control socket cannot check its peers without it. */
    public static int ownUid() throws IOException {
        int uid = ControlSocketLocation.currentUid();
        if (uid < 0) {
            throw new IOException("cannot read this process's uid from /proc/self (the control socket needs Linux)");
        }
        return uid;
    }

    public Path path() {
        return path;
    }

    @Override
    public void close() {
        server.close().syncUninterruptibly();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            Log.warn("cannot remove control socket " + path + ": " + e.getMessage());
        }
    }

    /** Refuses a peer whose uid is neither the gateway's nor allowed, before any byte of its request is read. */
    static final class PeerCheck extends ChannelInboundHandlerAdapter {
        private final PeerUid peerUid;
        private final int ownUid;
        private final Supplier<List<Integer>> allowed;
        private boolean refused;

        PeerCheck(PeerUid peerUid, int ownUid, Supplier<List<Integer>> allowed) {
            this.peerUid = peerUid;
            this.ownUid = ownUid;
            this.allowed = allowed;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            int uid;
            String why;
            try {
                uid = peerUid.of(ctx.channel());
                why = uid == ownUid || allowed.get().contains(uid) ? null
                    : "peer uid " + uid + " is not the gateway's (" + ownUid + ") nor in control_allowed_uids " + allowed.get();
            } catch (IOException | RuntimeException e) {
                why = "peer credentials unavailable (" + e.getMessage() + ")";
            }
            if (why == null) {
                ctx.pipeline().remove(this);
                super.channelActive(ctx);
                return;
            }
            refused = true;
            Log.warn("control socket: refused connection: " + why);
            byte[] body = ("{\"error\":{\"message\":\"control socket: " + why.replace("\"", "'")
                + "\",\"type\":\"permission_error\"}}").getBytes(StandardCharsets.UTF_8);
            String head = "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: " + body.length
                + "\r\nconnection: close\r\n\r\n";
            ctx.writeAndFlush(Unpooled.wrappedBuffer(head.getBytes(StandardCharsets.US_ASCII), body))
                .addListener(ChannelFutureListener.CLOSE);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (refused) {
                ReferenceCountUtil.release(msg); // nothing a refused peer sends is read
            } else {
                ctx.fireChannelRead(msg);
            }
        }
    }
}
