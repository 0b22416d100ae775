package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * B-3: a client that pipelines thousands of requests the gateway answers itself and never reads its socket. The real
 * front-door pipeline on a loopback NIO listener whose send buffer is small (so the kernel cannot hide what the
 * gateway buffers); every write the front door makes is measured on its event loop.
 */
@Timeout(60)
@Tag("system")
class FrontDoorBackPressureSystemTest {
    private static final int REQUESTS = 5_000;

    /** Records, on the event loop, the most unsent bytes the connection ever held and how many answers were written. */
    private static final class WriteMeter extends ChannelOutboundHandlerAdapter {
        volatile long maxPendingBytes;
        volatile long largestWriteBytes;
        volatile int writes;

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            long size = msg instanceof ByteBuf b ? b.readableBytes() : 0;
            ctx.write(msg, promise);
            var out = ctx.channel().unsafe().outboundBuffer();
            if (out != null) {
                maxPendingBytes = Math.max(maxPendingBytes, out.totalPendingWriteBytes());
            }
            largestWriteBytes = Math.max(largestWriteBytes, size);
            writes++;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\n\r\n",
        "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", // no key: the head-stage 401 refusal
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    })
    void b3_aClientThatPipelinesAndNeverReadsStopsBeingReadAndPinsAtMostTheHighWaterMarkPlusOneAnswer(String request)
        throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
        try (FrontDoorHarness h = new FrontDoorHarness(FrontDoorHarness.BASE_YAML.replace("max_connections: 3", "max_connections: 8"))) {
            WriteMeter meter = new WriteMeter();
            java.util.concurrent.CompletableFuture<Channel> accepted = new java.util.concurrent.CompletableFuture<>();
            ClientChannelInitializer frontDoor = new ClientChannelInitializer(h.gw, new LocalRoutes(h.gw, h.drain), h.starter,
                h.drain, h.connections);
            Channel listener = new ServerBootstrap().group(group).channel(NioServerSocketChannel.class)
                .childOption(ChannelOption.SO_SNDBUF, 4096)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.complete(ch);
                        ch.pipeline().addLast(meter, frontDoor);
                    }
                })
                .bind("127.0.0.1", 0).sync().channel();
            try (SocketChannel client = SocketChannel.open()) {
                client.setOption(StandardSocketOptions.SO_RCVBUF, 4096);
                client.connect((InetSocketAddress) listener.localAddress());
                client.configureBlocking(false);
                ByteBuffer pipelined = ByteBuffer.wrap(request.repeat(REQUESTS).getBytes(StandardCharsets.US_ASCII));
                // Sends until every request is out, the gateway stops taking them (no progress for ~1 s: reading
                // stopped and the kernel buffers are full) or closes the connection; bounded in time either way.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                int idleRounds = 0;
                try {
                    while (pipelined.hasRemaining() && idleRounds < 200 && System.nanoTime() < deadline) {
                        if (client.write(pipelined) == 0) {
                            idleRounds++;
                            Thread.sleep(5); // polls a non-blocking socket that accepts nothing more; asserts no timing
                        } else {
                            idleRounds = 0;
                        }
                    }
                } catch (IOException closedByTheGateway) {
                    // the connection was closed for queueing too many requests behind unsent answers: also a stop
                }
                // Waits, bounded, for the gateway to stop reading the connection or to close it: a state, asked on
                // the connection's own loop, not a quiet period (the old code reads on until the deadline).
                Channel ch = accepted.get(10, TimeUnit.SECONDS);
                long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
                boolean[] stopped = new boolean[1];
                while (true) {
                    ch.eventLoop().submit(() -> stopped[0] = !ch.isOpen() || !ch.config().isAutoRead()).get(5, TimeUnit.SECONDS);
                    if (stopped[0] || System.nanoTime() - settle > 0) {
                        break;
                    }
                    Thread.sleep(20); // polls that state; nothing is timed
                }
                long bound = h.config.limits().maxBufferedResponseBytes() + meter.largestWriteBytes;
                assertTrue(meter.maxPendingBytes <= bound, "unsent answer bytes reached " + meter.maxPendingBytes
                    + ", over the high-water mark plus one answer (" + bound + "); answers written: " + meter.writes);
                assertTrue(stopped[0], "the connection is still read (or open) with " + meter.writes + " answers written; sent "
                    + pipelined.position() + " bytes; " + h.metrics.render().lines().filter(l -> l.contains("bad_requests_total{")).toList());
                assertTrue(meter.writes < REQUESTS / 2, "the gateway answered " + meter.writes + " of " + REQUESTS
                    + " pipelined requests from a client that read nothing");
            } finally {
                listener.close().sync();
            }
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}
