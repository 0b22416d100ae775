package io.kvgate.dataplane.upstream;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.net.Transport;
import io.kvgate.testkit.TestPorts;
import io.netty.channel.Channel;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link UpstreamPool} on real loopback connections (io_uring, epoll and NIO): connections are opened with auto-read off and
 * never have it turned on, and an idle pooled connection still notices, through its pending read, that the engine
 * closed it or sent bytes nobody asked for, and retires itself.
 */
@Tag("system")
@Timeout(30)
class UpstreamPoolSystemTest {

    @ParameterizedTest
    @ValueSource(strings = {"io_uring", "epoll", "nio"})
    void idleConnectionWithAutoReadOffIsRetiredByAnEngineCloseOrStrayBytes(String transportName) throws Exception {
        Transport transport = Transport.select(transportName);
        EventLoopGroup group = transport.newGroup(1, "pool-test");
        int port = TestPorts.free();
        try (ServerSocket engine = new ServerSocket(port, 8, InetAddress.getLoopbackAddress())) {
            EventLoop loop = group.next();
            UpstreamPool pool = new UpstreamPool(transport.clientChannel(), UpstreamPoolTest.upstream(4), UpstreamPoolTest.LIMITS);
            EndpointState ep = EmbeddedEngines.endpoint("127.0.0.1", port);

            Channel closedByEngine = pool.connect(loop, ep).sync().channel();
            assertFalse(closedByEngine.config().isAutoRead(), transportName + ": opened with auto-read off");
            Socket accepted = engine.accept();
            loop.submit(() -> pool.release(ep, closedByEngine)).sync();
            assertFalse(closedByEngine.config().isAutoRead(), "release does not turn auto-read on");
            assertTrue(closedByEngine.isActive());
            accepted.close(); // the engine closes its side while the connection idles in the pool
            assertTrue(closedByEngine.closeFuture().await(10, TimeUnit.SECONDS), "the pending read saw the close");

            Channel strayBytes = pool.connect(loop, ep).sync().channel();
            try (Socket strayWriter = engine.accept()) {
                loop.submit(() -> pool.release(ep, strayBytes)).sync();
                OutputStream out = strayWriter.getOutputStream();
                out.write("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
                out.flush();
                assertTrue(strayBytes.closeFuture().await(10, TimeUnit.SECONDS), "bytes on an idle connection retire it");
            }
            assertNull(loop.submit(() -> pool.pollIdle(ep)).get(), "no retired connection is handed out");
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
        }
    }
}
