package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * B-14: one client address holding its share of {@code max_connections} (a slowloris, a runaway pool) is refused more
 * on accept, while another client is still served. Two loopback addresses: 127.0.0.1 and 127.0.0.2 (Linux answers
 * the whole 127/8 on the loopback interface).
 */
@Timeout(30)
@Tag("system")
class ClientFairnessSystemTest {
    private static final String HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    private Gateway gw;

    @BeforeEach
    void setUp() throws Exception {
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            limits:
              max_connections: 6
              max_connections_per_client: 3
            health:
              interval_ms: 60000
            rules:
              - name: chat
                models: [m]
                endpoints:
                  - url: http://127.0.0.1:1
            """));
    }

    @AfterEach
    void tearDown() {
        gw.close(100);
    }

    private Socket connectFrom(String localAddress) throws IOException {
        Socket s = new Socket();
        s.bind(new InetSocketAddress(localAddress, 0));
        s.connect(new InetSocketAddress("127.0.0.1", gw.port()), 10_000);
        s.setSoTimeout(10_000);
        return s;
    }

    /** Sends one request and reads the status line ("" when the connection was closed without an answer). */
    private static String ask(Socket s, String request) throws IOException {
        s.getOutputStream().write(request.getBytes(StandardCharsets.US_ASCII));
        try {
            return new String(s.getInputStream().readNBytes(15), StandardCharsets.US_ASCII);
        } catch (IOException closedOnAccept) {
            return ""; // closed on accept with the request unread: the kernel resets
        }
    }

    /** One request with {@code Connection: close}: everything the gateway answered, to the end. */
    private String closingExchange(String from, String requestHead) throws IOException {
        try (Socket s = connectFrom(from)) {
            s.getOutputStream().write((requestHead + "Connection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void b14_aClientOverItsShareIsClosedOnAcceptWhileAnotherClientIsServed() throws Exception {
        List<Socket> greedy = new ArrayList<>();
        try {
            int served = 0;
            for (int i = 0; i < 6; i++) { // as many as max_connections: without a per-client limit it takes them all
                Socket s = connectFrom("127.0.0.1");
                greedy.add(s); // held open: the slowloris's connections
                if (ask(s, HEALTH).equals("HTTP/1.1 200 OK")) {
                    served++;
                }
            }
            assertEquals(3, served, "127.0.0.1 holds its share, 3 of max_connections 6; the others are closed on accept");
            try (Socket other = connectFrom("127.0.0.2")) {
                assertEquals("HTTP/1.1 200 OK", ask(other, HEALTH), "another client is still served");
            }
            String page = closingExchange("127.0.0.2", "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\n");
            assertTrue(page.startsWith("HTTP/1.1 200 OK"), page);
            assertTrue(page.contains("kvgate_shed_total{reason=\"max_connections_per_client\"} 3"), page);
            greedy.remove(0).close(); // one that was served
            // The slot comes back when the gateway sees the close: a new connection of 127.0.0.1 is served once it has.
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (true) {
                try (Socket again = connectFrom("127.0.0.1")) {
                    if (ask(again, HEALTH).equals("HTTP/1.1 200 OK")) {
                        break;
                    }
                }
                assertTrue(System.nanoTime() < deadline, "the closed connection's per-client slot was never returned");
                Thread.sleep(10); // waits for the gateway's I/O thread to process a close on loopback (no clock to inject)
            }
        } finally {
            for (Socket s : greedy) {
                s.close();
            }
        }
    }
}
