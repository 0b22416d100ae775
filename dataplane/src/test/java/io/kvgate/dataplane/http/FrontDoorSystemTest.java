package io.kvgate.dataplane.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
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
 * The front door on a real loopback listener, where the kernel matters: a refused head whose body keeps coming must
 * still reach the client (lingering close, not a reset), and max_connections closes the connection over it.
 */
@Timeout(30)
@Tag("system")
class FrontDoorSystemTest {
    private Gateway gw;

    @BeforeEach
    void setUp() throws Exception {
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            limits:
              max_body_bytes: 8388608
              max_connections: 4
              max_connections_per_client: 0 # every connection here is 127.0.0.1's: only max_connections is tested
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

    private Socket connect() throws IOException {
        Socket s = new Socket("127.0.0.1", gw.port());
        s.setSoTimeout(10_000);
        return s;
    }

    private static String readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        try {
            for (int n; (n = in.read(buf)) > 0; ) {
                out.write(buf, 0, n);
            }
        } catch (IOException reset) {
            // a reset after the answer was read is fine; the assertion is on what arrived
        }
        return out.toString(StandardCharsets.ISO_8859_1);
    }

    @Test
    void l4_anUnauthorizedClientStillSendingItsBodyReadsIts401() throws Exception {
        try (Socket s = connect()) {
            OutputStream out = s.getOutputStream();
            int length = 1 << 20;
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                + length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            byte[] chunk = new byte[64 << 10];
            try {
                for (int sent = 0; sent < length; sent += chunk.length) {
                    out.write(chunk); // the gateway answered on the head and drains (never buffers) what follows
                }
            } catch (IOException closedAfterLinger) {
                // the gateway may close its side once the linger time is over; the answer was sent first
            }
            String answer = readAll(s.getInputStream());
            assertTrue(answer.startsWith("HTTP/1.1 401 Unauthorized"), answer);
            assertTrue(answer.toLowerCase().contains("connection: close"), answer);
        }
    }

    @Test
    void m2_aConnectionOverMaxConnectionsIsClosedOnAccept() throws Exception {
        List<Socket> open = new ArrayList<>();
        try {
            for (int i = 0; i < 4; i++) {
                Socket s = connect();
                open.add(s);
                s.getOutputStream().write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                byte[] b = new byte[15];
                assertEquals(15, s.getInputStream().readNBytes(b, 0, 15));
                assertEquals("HTTP/1.1 200 OK", new String(b, StandardCharsets.US_ASCII));
            }
            try (Socket over = connect()) {
                assertEquals(-1, over.getInputStream().read(), "the 5th connection is closed before anything is read");
            }
            open.remove(0).close();
            // The slot is returned when the gateway sees the close: a new connection is served once it has.
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (true) {
                try (Socket again = connect()) {
                    again.getOutputStream().write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    if (again.getInputStream().read() == 'H') {
                        break;
                    }
                } catch (IOException stillOverTheLimit) {
                    // closed on accept with our request unread: the kernel resets instead of a clean end of stream
                }
                assertTrue(System.nanoTime() < deadline, "the closed connection's slot was never returned");
                Thread.sleep(10); // waits for the gateway's I/O thread to process a close on loopback (no clock to inject)
            }
        } finally {
            for (Socket s : open) {
                s.close();
            }
        }
    }
}
