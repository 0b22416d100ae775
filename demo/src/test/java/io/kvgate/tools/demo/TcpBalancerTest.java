package io.kvgate.tools.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The demo's L4 balancer: connections go round robin over the backends, bytes are relayed unchanged both ways (a
 * megabyte through the one-buffer-at-a-time backpressure), a refused backend closes the client, the connection bound
 * holds, and backends off loopback are refused.
 */
@Timeout(30)
@Tag("system")
class TcpBalancerTest {
    private final ExecutorService threads = Executors.newCachedThreadPool();
    private final List<ServerSocket> servers = new ArrayList<>();

    @AfterEach
    void close() throws IOException {
        for (ServerSocket s : servers) {
            s.close();
        }
        threads.shutdownNow();
    }

    /** A backend that writes its number, then echoes every byte until the client closes. */
    private InetSocketAddress echo(int id) throws IOException {
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        servers.add(server);
        threads.submit(() -> {
            while (!server.isClosed()) {
                Socket s = server.accept();
                threads.submit(() -> {
                    try (s) {
                        OutputStream out = s.getOutputStream();
                        out.write(id);
                        out.flush();
                        InputStream in = s.getInputStream();
                        byte[] buf = new byte[8192];
                        for (int n; (n = in.read(buf)) > 0; ) {
                            out.write(buf, 0, n);
                        }
                    }
                    return null;
                });
            }
            return null;
        });
        return (InetSocketAddress) server.getLocalSocketAddress();
    }

    @Test
    void connectionsGoRoundRobinAndBytesAreRelayedUnchanged() throws Exception {
        try (TcpBalancer lb = new TcpBalancer(List.of(echo(0), echo(1), echo(2)), 16)) {
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                try (Socket s = new Socket(InetAddress.getLoopbackAddress(), lb.port())) {
                    s.setSoTimeout(10_000);
                    order.add(s.getInputStream().read());
                }
            }
            assertEquals(List.of(0, 1, 2, 0, 1, 2), order);
            assertArrayEquals(new long[] {2, 2, 2}, lb.connectionsPerBackend());

            byte[] big = new byte[1 << 20];
            new Random(1).nextBytes(big);
            try (Socket s = new Socket(InetAddress.getLoopbackAddress(), lb.port())) {
                s.setSoTimeout(10_000);
                DataInputStream in = new DataInputStream(s.getInputStream());
                assertEquals(0, in.read(), "the seventh connection is the first backend's again");
                threads.submit(() -> {
                    s.getOutputStream().write(big);
                    s.getOutputStream().flush();
                    return null;
                });
                byte[] back = new byte[big.length];
                in.readFully(back);
                assertArrayEquals(big, back, "a megabyte both ways, byte for byte");
            }
        }
    }

    @Test
    void aRefusedBackendClosesTheClientAndTheConnectionBoundHolds() throws Exception {
        try (RefusedPort refused = TestPorts.refused();
             TcpBalancer lb = new TcpBalancer(List.of(new InetSocketAddress(InetAddress.getLoopbackAddress(), refused.port())), 16)) {
            try (Socket s = new Socket(InetAddress.getLoopbackAddress(), lb.port())) {
                s.setSoTimeout(10_000);
                assertEquals(-1, s.getInputStream().read(), "closed once the backend refused");
            }
        }
        try (TcpBalancer lb = new TcpBalancer(List.of(echo(7)), 2)) {
            Socket a = new Socket(InetAddress.getLoopbackAddress(), lb.port());
            Socket b = new Socket(InetAddress.getLoopbackAddress(), lb.port());
            a.setSoTimeout(10_000);
            b.setSoTimeout(10_000);
            assertEquals(7, a.getInputStream().read());
            assertEquals(7, b.getInputStream().read());
            try (Socket c = new Socket(InetAddress.getLoopbackAddress(), lb.port())) {
                c.setSoTimeout(10_000);
                assertEquals(-1, c.getInputStream().read(), "the third connection is over the bound of 2");
            }
            assertEquals(1, lb.refused());
            a.close();
            b.close();
        }
    }

    @Test
    void onlyLoopbackBackends() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> new TcpBalancer(List.of(new InetSocketAddress("192.0.2.1", 80)), 4));
        assertTrue(e.getMessage().contains("is not on loopback"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new TcpBalancer(List.of(), 4));
    }
}
