package io.kvgate.dataplane;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A scriptable stand-in engine for dataplane tests (the full simulator lives in tools): answers chat/completions in
 * the mode set by the test, records what it received.
 */
final class FakeEngine implements AutoCloseable {
    enum Mode { OK_JSON, SSE, SSE_DIE_MIDWAY, FLAT_ERROR_400, OPENAI_ERROR_400, HANG, SLOW_SSE, SSE_THEN_HANG }

    final HttpServer server;
    volatile Mode mode = Mode.OK_JSON;
    /** What {@code GET /v1/models} lists (readiness probes it). */
    volatile String servedModel = "qwen3";
    final AtomicInteger requests = new AtomicInteger();
    final List<String> bodies = new CopyOnWriteArrayList<>();
    final List<String> requestIds = new CopyOnWriteArrayList<>();
    /** The {@code traceparent} of every request ("null" when it had none): whose span the engine would parent to. */
    final List<String> traceparents = new CopyOnWriteArrayList<>();
    final String name;

    FakeEngine(String name) throws IOException {
        this.name = name;
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 128);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "fake-engine-" + name);
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/health", ex -> respond(ex, 200, "application/json", "{}"));
        server.createContext("/v1/models", ex -> respond(ex, 200, "application/json",
            "{\"object\":\"list\",\"data\":[{\"id\":\"" + servedModel + "\",\"object\":\"model\"}]}"));
        server.createContext("/v1/", this::handle);
        server.start();
    }

    int port() {
        return server.getAddress().getPort();
    }

    String url() {
        return "http://127.0.0.1:" + port();
    }

    private void handle(HttpExchange ex) throws IOException {
        requests.incrementAndGet();
        String body = new String(ex.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
        bodies.add(body);
        requestIds.add(String.valueOf(ex.getRequestHeaders().getFirst("X-Request-Id")));
        traceparents.add(String.valueOf(ex.getRequestHeaders().getFirst("traceparent")));
        switch (mode) {
            case OK_JSON -> respond(ex, 200, "application/json",
                "{\"id\":\"x\",\"object\":\"chat.completion\",\"model\":\"m\",\"engine\":\"" + name + "\",\"choices\":[{\"index\":0,"
                    + "\"message\":{\"role\":\"assistant\",\"content\":\"hello\"},\"finish_reason\":\"stop\"}],"
                    + "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}");
            case FLAT_ERROR_400 -> respond(ex, 400, "application/json",
                "{\"object\":\"error\",\"message\":\"n must be 1 when using greedy sampling\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}");
            case OPENAI_ERROR_400 -> respond(ex, 400, "application/json",
                "{\"error\":{\"message\":\"bad thing\",\"type\":\"BadRequestError\",\"param\":\"n\",\"code\":400}}");
            case HANG -> {
                try {
                    Thread.sleep(30_000);
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
                ex.close();
            }
            case SSE_THEN_HANG -> {
                ex.getResponseHeaders().set("Content-Type", "text/event-stream");
                ex.sendResponseHeaders(200, 0);
                OutputStream os = ex.getResponseBody();
                os.write("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t0\"}}]}\n\n".getBytes(StandardCharsets.UTF_8));
                os.flush();
                try {
                    Thread.sleep(30_000); // a long generation: the stream stays open
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
                ex.close();
            }
            case SSE, SSE_DIE_MIDWAY, SLOW_SSE -> {
                ex.getResponseHeaders().set("Content-Type", "text/event-stream");
                ex.sendResponseHeaders(200, 0);
                OutputStream os = ex.getResponseBody();
                int chunks = 5;
                for (int i = 0; i < chunks; i++) {
                    if (mode == Mode.SSE_DIE_MIDWAY && i == 2) {
                        os.write("data: {\"choices\":[{\"delta\":{\"con".getBytes(StandardCharsets.UTF_8));
                        os.flush();
                        // Abort the exchange without a terminating chunk: the gateway sees a mid-body close.
                        ex.getHttpContext().getServer();
                        throw new IOException("die mid-stream");
                    }
                    os.write(("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t" + i + "\"}}]}\n\n").getBytes(StandardCharsets.UTF_8));
                    os.flush();
                    if (mode == Mode.SLOW_SSE) {
                        try {
                            Thread.sleep(50);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                }
                os.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
                os.close();
            }
        }
    }

    private static void respond(HttpExchange ex, int status, String ct, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", ct);
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
