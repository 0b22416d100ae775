package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.ManualClock;
import io.kvgate.control.config.GatewayConfig;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The shutdown a signal starts, on a real gateway over loopback, with the delay and the drain on a manual clock:
 * {@code /ready} answers 503 at once, requests (on open keep-alive connections and on new ones) are still served,
 * each with {@code Connection: close}, until {@code shutdown.drain_delay_ms} has passed on the clock; then the listener
 * is gone.
 */
@Timeout(60)
@Tag("system")
class GatewayShutdownSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

    private final ManualClock clock = new ManualClock();
    private FakeEngine engine;
    private Gateway gw;

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        if (engine != null) {
            engine.close();
        }
    }

    private record Answer(int status, Map<String, String> headers, String body) {}

    /** One HTTP/1.1 request on {@code s}, keep-alive unless the server says otherwise; reads one whole answer. */
    private static Answer exchange(Socket s, String method, String path, String body) throws IOException {
        byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
        String head = method + " " + path + " HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            + (body == null ? "" : "content-type: application/json\r\ncontent-length: " + b.length + "\r\n") + "\r\n";
        s.getOutputStream().write(head.getBytes(StandardCharsets.US_ASCII));
        s.getOutputStream().write(b);
        s.getOutputStream().flush();
        InputStream in = s.getInputStream();
        String status = line(in);
        Map<String, String> headers = new HashMap<>();
        for (String h; !(h = line(in)).isEmpty(); ) {
            int c = h.indexOf(':');
            headers.put(h.substring(0, c).trim().toLowerCase(Locale.ROOT), h.substring(c + 1).trim());
        }
        byte[] content = in.readNBytes(Integer.parseInt(headers.getOrDefault("content-length", "0")));
        return new Answer(Integer.parseInt(status.split(" ")[1]), headers, new String(content, StandardCharsets.UTF_8));
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (int c; (c = in.read()) != '\n'; ) {
            if (c < 0) {
                throw new IOException("connection closed mid-answer after '" + out + "'");
            }
            if (c != '\r') {
                out.write(c);
            }
        }
        return out.toString(StandardCharsets.US_ASCII);
    }

    private Socket connect() throws IOException {
        Socket s = new Socket();
        s.connect(new InetSocketAddress("127.0.0.1", gw.port()), 5_000);
        s.setSoTimeout(10_000);
        return s;
    }

    /** A request on a fresh connection; asserts it is served and that the gateway closes the connection after it. */
    private Answer servedAndClosed(String method, String path, String body) throws IOException {
        try (Socket s = connect()) {
            Answer a = exchange(s, method, path, body);
            assertEquals("close", a.headers().get("connection"), path + " during the shutdown: " + a);
            assertEquals(-1, s.getInputStream().read(), "the connection is closed after the answer");
            return a;
        }
    }

    @Test
    void notReadyAtOnceServesThroughTheDelayThenStopsAccepting() throws Exception {
        engine = new FakeEngine("a");
        gw = Gateway.start(new Gateway.Options(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: off
            rules:
              - name: chat
                models: [qwen3]
                endpoints:
                  - url: %s
            """.formatted(engine.url())), clock, null, null));
        try (Socket keptAlive = connect()) {
            Answer before = exchange(keptAlive, "GET", "/ready", null);
            assertEquals(200, before.status(), before.body());
            assertEquals(null, before.headers().get("connection"), "keep-alive before the shutdown");

            ShutdownSequence seq = gw.shutdown(5_000, 30_000);
            Answer ready = servedAndClosed("GET", "/ready", null);
            assertEquals(503, ready.status());
            assertEquals("{\"ready\":false,\"waiting_for\":[\"the gateway is shutting down (serving until"
                + " shutdown.drain_delay_ms ends, then draining)\"]}", ready.body());
            assertEquals(503, servedAndClosed("GET", "/health", null).status(), "balancers that check /health move too");
            // The connection opened before the signal is served once more, and told to go.
            Answer kept = exchange(keptAlive, "POST", "/v1/chat/completions", CHAT);
            assertEquals(200, kept.status(), kept.body());
            assertEquals("close", kept.headers().get("connection"));
            assertEquals(-1, keptAlive.getInputStream().read());
        }
        ShutdownSequence seq = gw.shutdown(5_000, 30_000);
        assertEquals(ShutdownSequence.Phase.ANNOUNCED, seq.step());
        clock.advance(4_999, TimeUnit.MILLISECONDS);
        assertEquals(ShutdownSequence.Phase.ANNOUNCED, seq.step());
        Answer late = servedAndClosed("POST", "/v1/chat/completions", CHAT);
        assertEquals(200, late.status(), "a new connection 1 ms before the delay ends is still served: " + late.body());
        assertEquals(2, engine.requests.get());
        clock.advance(1, TimeUnit.MILLISECONDS);
        assertNotEquals(ShutdownSequence.Phase.ANNOUNCED, seq.step(), "the delay is over");
        assertThrows(ConnectException.class, this::connect, "the listener is closed");
        // The last request's endpoint slot is given back by the routing thread: the drain waits for it, not for the
        // clock (which stays put, 30 s short of the drain timeout).
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (seq.step() != ShutdownSequence.Phase.STOPPED) {
            assertTrue(System.nanoTime() < deadline, "the drain did not see the finished requests");
            Thread.sleep(5);
        }
        assertThrows(ConnectException.class, this::connect, "the listener is closed");
    }
}
