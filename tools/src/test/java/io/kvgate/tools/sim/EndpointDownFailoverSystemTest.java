package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An engine stopped with SIGTERM stops answering but keeps its open connections silent (seen on a real llama-server,
 * issue #36 item 13): once the health probe finds it down, a request waiting on it for its first byte goes to another
 * engine, and a stream it had started ends at once with a retryable error — neither waits for the upstream timeouts,
 * which are set here far beyond the test's own timeout.
 */
@Timeout(30)
@Tag("system")
class EndpointDownFailoverSystemTest {

    /**
     * An engine that answers {@code /health} until a generation request arrives, then goes silent on every connection:
     * the generation gets nothing (or, when {@code streamFirst}, an SSE head and one event) and later probes are read
     * and never answered.
     */
    private static final class SilencedEngine implements AutoCloseable {
        final ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        final AtomicBoolean alive = new AtomicBoolean(true);
        final AtomicInteger generations = new AtomicInteger();
        final List<Socket> open = new CopyOnWriteArrayList<>();
        final boolean streamFirst;
        final Thread acceptor;

        SilencedEngine(boolean streamFirst) throws IOException {
            this.streamFirst = streamFirst;
            acceptor = Thread.ofVirtual().start(() -> {
                while (!server.isClosed()) {
                    try {
                        Socket s = server.accept();
                        open.add(s);
                        Thread.ofVirtual().start(() -> serve(s));
                    } catch (IOException e) {
                        return;
                    }
                }
            });
        }

        String url() {
            return "http://127.0.0.1:" + server.getLocalPort();
        }

        private void serve(Socket s) {
            try (s) {
                InputStream in = s.getInputStream();
                OutputStream out = s.getOutputStream();
                while (true) {
                    String head = readHead(in);
                    if (head == null) {
                        return;
                    }
                    int len = contentLength(head);
                    in.readNBytes(len);
                    if (head.startsWith("POST ")) {
                        generations.incrementAndGet();
                        alive.set(false); // the engine is being stopped: from here on nothing more is answered
                        if (streamFirst) {
                            out.write(("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                                .getBytes(StandardCharsets.US_ASCII));
                            byte[] event = ("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
                                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
                                .getBytes(StandardCharsets.UTF_8);
                            out.write((Integer.toHexString(event.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
                            out.write(event);
                            out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
                            out.flush();
                        }
                        in.readAllBytes(); // silent until the gateway closes the connection
                        return;
                    }
                    if (!alive.get()) {
                        in.readAllBytes(); // a probe after the stop: read, never answered
                        return;
                    }
                    out.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
                        .getBytes(StandardCharsets.US_ASCII));
                    out.flush();
                }
            } catch (IOException e) {
                // the gateway closed the connection
            }
        }

        private static String readHead(InputStream in) throws IOException {
            StringBuilder sb = new StringBuilder();
            int c;
            while ((c = in.read()) >= 0) {
                sb.append((char) c);
                if (sb.length() >= 4 && sb.lastIndexOf("\r\n\r\n") == sb.length() - 4) {
                    return sb.toString();
                }
            }
            return null;
        }

        private static int contentLength(String head) {
            for (String line : head.split("\r\n")) {
                int colon = line.indexOf(':');
                if (colon > 0 && line.substring(0, colon).trim().equalsIgnoreCase("content-length")) {
                    return Integer.parseInt(line.substring(colon + 1).trim());
                }
            }
            return 0;
        }

        @Override
        public void close() throws IOException {
            server.close();
            for (Socket s : open) {
                s.close();
            }
        }
    }

    private static String config(String silent, EngineSimulator good) {
        // Probes every 100 ms, down after two unanswered ones; the upstream timeouts far beyond the test's own.
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 600000, idle_timeout_ms: 600000}
            health: {interval_ms: 100, timeout_ms: 100, unhealthy_threshold: 2, healthy_threshold: 1}
            rules:
              - name: r
                models: [m]
                engine: vllm
                policy: round_robin
                endpoints:
                  - {url: "%s"}
                  - {url: "%s"}
            """.formatted(silent, good.baseUrl());
    }

    private static HttpResponse<String> chat(Gateway gw, boolean stream) throws Exception {
        String body = SimHttp.chat("m", "hello", "\"max_tokens\":2" + (stream ? ",\"stream\":true" : ""));
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(25)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void aRequestWaitingForItsFirstByteOnAnEngineFoundDownGoesToAnotherEngine() throws Exception {
        try (SilencedEngine silent = new SilencedEngine(false);
             EngineSimulator good = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(config(silent.url(), good)));
            try {
                // Round robin: of two requests one goes to the engine that goes silent on it.
                for (int i = 0; i < 2; i++) {
                    HttpResponse<String> r = chat(gw, false);
                    assertEquals(200, r.statusCode(), r.body());
                }
                assertEquals(1, silent.generations.get(), "one request reached the engine that went silent");
                assertEquals(2, good.stats().get("generations_started"), "both were answered by the other engine");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void aStreamFromAnEngineFoundDownEndsAtOnceWithARetryableError() throws Exception {
        try (SilencedEngine silent = new SilencedEngine(true);
             EngineSimulator good = EngineSimulator.start(SimHttp.fast(Dialect.VLLM))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(config(silent.url(), good)));
            try {
                String silentStream = null;
                for (int i = 0; i < 2; i++) {
                    HttpResponse<String> r = chat(gw, true);
                    assertEquals(200, r.statusCode(), r.body());
                    if (r.body().contains("upstream_unhealthy")) {
                        silentStream = r.body();
                    }
                }
                assertEquals(1, silent.generations.get(), "one stream started on the engine that went silent");
                assertTrue(silentStream != null, "the stream from the silent engine ended with the unhealthy error");
                assertTrue(silentStream.contains("\"content\":\"hi\""), silentStream);
                assertTrue(silentStream.strip().endsWith("data: [DONE]"), silentStream);
            } finally {
                gw.close(100);
            }
        }
    }
}
