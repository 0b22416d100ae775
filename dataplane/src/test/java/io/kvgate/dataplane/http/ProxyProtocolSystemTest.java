package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code proxy_protocol: true}: the client address comes from the PROXY header (v1 text and v2 binary, written by
 * hand here, and v2 from a real HAProxy with {@code send-proxy-v2}), so the per-client connection share counts the
 * address the header names; a connection without a valid header is closed unanswered and counted.
 */
@Timeout(60)
@Tag("system")
class ProxyProtocolSystemTest {
    private static final String HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    @TempDir
    Path dir;
    private Gateway gw;
    private Process haproxy;

    @BeforeEach
    void setUp() throws Exception {
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: off
            proxy_protocol: true
            limits:
              max_connections: 10
              max_connections_per_client: 1
            health:
              interval_ms: 60000
            load: {enabled: false}
            rules:
              - name: chat
                models: [m]
                endpoints:
                  - url: http://127.0.0.1:1
            """));
    }

    @AfterEach
    void tearDown() {
        if (haproxy != null) {
            haproxy.destroy();
        }
        gw.close(100);
    }

    private Socket connect(int port) throws IOException {
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
        s.setSoTimeout(10_000);
        return s;
    }

    /** Sends bytes and reads the status line ("" when the connection was closed without an answer). */
    private static String ask(Socket s, byte[] bytes) throws IOException {
        s.getOutputStream().write(bytes);
        try {
            return new String(s.getInputStream().readNBytes(15), StandardCharsets.US_ASCII);
        } catch (IOException reset) {
            return "";
        }
    }

    private static byte[] v1(String source, String request) {
        return ("PROXY TCP4 " + source + " 127.0.0.1 40000 8080\r\n" + request).getBytes(StandardCharsets.US_ASCII);
    }

    /** A PROXY v2 header (PROXY command, TCP over IPv4) followed by {@code request}. */
    static byte[] v2(int[] source, String request) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        b.writeBytes(new byte[] {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A});
        b.write(0x21); // version 2, command PROXY
        b.write(0x11); // AF_INET, STREAM
        b.write(0);
        b.write(12); // address block length
        for (int octet : source) {
            b.write(octet);
        }
        b.writeBytes(new byte[] {127, 0, 0, 1}); // destination
        b.writeBytes(new byte[] {(byte) 0x9c, 0x40, 0x1f, (byte) 0x90}); // ports 40000 -> 8080
        b.writeBytes(request.getBytes(StandardCharsets.US_ASCII));
        return b.toByteArray();
    }

    private String metrics() throws IOException {
        try (Socket s = connect(gw.port())) {
            s.getOutputStream().write(v1("10.200.0.1", "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
            return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void theHeadersSourceAddressIsTheClientTheLimitsCount() throws Exception {
        List<Socket> open = new ArrayList<>();
        try {
            Socket a = connect(gw.port());
            open.add(a);
            assertEquals("HTTP/1.1 200 OK", ask(a, v1("10.0.0.7", HEALTH)), "v1");
            // Every connection comes from 127.0.0.1: only the header tells clients apart (max_connections_per_client 1).
            Socket sameClient = connect(gw.port());
            open.add(sameClient);
            assertEquals("", ask(sameClient, v2(new int[] {10, 0, 0, 7}, HEALTH)), "10.0.0.7 already holds its one connection");
            Socket otherClient = connect(gw.port());
            open.add(otherClient);
            assertEquals("HTTP/1.1 200 OK", ask(otherClient, v2(new int[] {10, 0, 0, 8}, HEALTH)), "v2, another client");
        } finally {
            for (Socket s : open) {
                s.close();
            }
        }
        assertTrue(metrics().contains("kvgate_shed_total{reason=\"max_connections_per_client\"} 1"));
    }

    @Test
    void aHeaderAndItsRequestSplitAcrossWritesAreReassembled() throws Exception {
        byte[] all = v2(new int[] {10, 0, 0, 9}, HEALTH);
        try (Socket s = connect(gw.port())) {
            for (byte x : all) { // one byte per write: the decoder waits for the whole header
                s.getOutputStream().write(x);
                s.getOutputStream().flush();
            }
            assertEquals("HTTP/1.1 200 OK", new String(s.getInputStream().readNBytes(15), StandardCharsets.US_ASCII));
        }
    }

    @Test
    void aConnectionWithoutAValidHeaderIsClosedUnansweredAndCounted() throws Exception {
        try (Socket plain = connect(gw.port())) {
            assertEquals("", ask(plain, HEALTH.getBytes(StandardCharsets.US_ASCII)));
        }
        try (Socket garbled = connect(gw.port())) {
            assertEquals("", ask(garbled, "PROXY TCP4 not-an-address 127.0.0.1 1 2\r\n".getBytes(StandardCharsets.US_ASCII)));
        }
        assertTrue(metrics().contains("kvgate_bad_requests_total{reason=\"proxy_protocol_invalid\"} 2"), metrics());
    }

    @Test
    void aLocalHeaderFromTheBalancersHealthCheckKeepsTheSocketAddress() throws Exception {
        byte[] local = v2(new int[] {0, 0, 0, 0}, HEALTH);
        local[12] = 0x20; // version 2, command LOCAL
        local[13] = 0x00; // UNSPEC
        local[15] = 0; // no address block
        byte[] shortened = new byte[16 + HEALTH.length()];
        System.arraycopy(local, 0, shortened, 0, 16);
        System.arraycopy(HEALTH.getBytes(StandardCharsets.US_ASCII), 0, shortened, 16, HEALTH.length());
        try (Socket s = connect(gw.port())) {
            assertEquals("HTTP/1.1 200 OK", ask(s, shortened));
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    @Test
    void throughARealHaproxyWithSendProxyV2() throws Exception {
        assumeTrue(new java.io.File("/usr/sbin/haproxy").canExecute() || onPath("haproxy"), "haproxy is not installed");
        int front = freePort();
        Path cfg = dir.resolve("haproxy.cfg");
        Files.writeString(cfg, """
            global
              maxconn 100
            defaults
              mode tcp
              timeout connect 5s
              timeout client 30s
              timeout server 30s
            frontend fe
              bind 127.0.0.1:%d
              default_backend gw
            backend gw
              server g1 127.0.0.1:%d send-proxy-v2
            """.formatted(front, gw.port()));
        haproxy = new ProcessBuilder("haproxy", "-db", "-f", cfg.toString()).redirectErrorStream(true)
            .redirectOutput(dir.resolve("haproxy.log").toFile()).start();
        String status = "";
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!status.equals("HTTP/1.1 200 OK") && System.nanoTime() < deadline) { // until haproxy listens
            try (Socket s = connect(front)) {
                status = ask(s, HEALTH.getBytes(StandardCharsets.US_ASCII));
            } catch (IOException notYetListening) {
                Thread.sleep(50);
            }
        }
        assertEquals("HTTP/1.1 200 OK", status, Files.readString(dir.resolve("haproxy.log")));
        assertTrue(!metrics().contains("proxy_protocol_invalid"), "haproxy's v2 header was accepted");
    }

    private static boolean onPath(String command) {
        for (String d : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (Files.isExecutable(Path.of(d, command))) {
                return true;
            }
        }
        return false;
    }
}
