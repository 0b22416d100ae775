package io.kvgate.dataplane.pd;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A strict P/D engine for gateway tests, enforcing each dialect's protocol the way the engines do: a vLLM decode
 * accepts only kv_transfer_params a prefill of this fleet issued; an SGLang prefill answers only once its decode has
 * joined the same bootstrap room (so a sequential proxy deadlocks and fails the test), and an SGLang decode produces
 * nothing before that prefill has "sent" its KV (so a dead prefill leaves decode waiting, as in the engine).
 */
final class PdFakeEngine implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();

    /** Shared by one test's engines: issued vLLM params and SGLang rooms. */
    static final class Fleet {
        final Map<String, String> issued = new ConcurrentHashMap<>();
        final Map<Long, CountDownLatch> rooms = new ConcurrentHashMap<>();
        final Map<Long, CountDownLatch> transferred = new ConcurrentHashMap<>();

        /** Counted down when a decode joins the room. */
        CountDownLatch room(long id) {
            return rooms.computeIfAbsent(id, k -> new CountDownLatch(1));
        }

        /** Counted down when the room's prefill has sent its KV (a decode produces nothing before that). */
        CountDownLatch transferred(long id) {
            return transferred.computeIfAbsent(id, k -> new CountDownLatch(1));
        }
    }

    enum Fault { NONE, HTTP_500, HTTP_400, CLOSE_BEFORE_ANSWER, NO_PARAMS }

    final HttpServer server;
    final String dialect;
    final String role;
    final Fleet fleet;
    volatile Fault fault = Fault.NONE;
    volatile int faultCount = Integer.MAX_VALUE;
    final AtomicInteger requests = new AtomicInteger();
    final List<JsonNode> bodies = new CopyOnWriteArrayList<>();
    final List<String> requestIds = new CopyOnWriteArrayList<>();
    /** The {@code traceparent} of every request ("null" when it had none): whose span the engine would parent to. */
    final List<String> traceparents = new CopyOnWriteArrayList<>();
    final AtomicInteger decodesWithParams = new AtomicInteger();
    final AtomicInteger rejected = new AtomicInteger();

    PdFakeEngine(String dialect, String role, Fleet fleet) throws IOException {
        this.dialect = dialect;
        this.role = role;
        this.fleet = fleet;
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "pd-fake-" + dialect + "-" + role);
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/health", ex -> respond(ex, 200, "{}"));
        // The gateway's readiness probe lists models; like a real engine, that is not a request the tests count.
        server.createContext("/v1/models", ex -> respond(ex, 200, "{\"object\":\"list\",\"data\":[{\"id\":\"m\"}]}"));
        server.createContext("/v1/", this::handle);
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private boolean faulty() {
        return fault != Fault.NONE && faultCount-- > 0;
    }

    private void handle(HttpExchange ex) throws IOException {
        requests.incrementAndGet();
        JsonNode body = JSON.readTree(ex.getRequestBody().readAllBytes());
        bodies.add(body);
        requestIds.add(String.valueOf(ex.getRequestHeaders().getFirst("X-Request-Id")));
        traceparents.add(String.valueOf(ex.getRequestHeaders().getFirst("traceparent")));
        Fault f = faulty() ? fault : Fault.NONE;
        if (f == Fault.CLOSE_BEFORE_ANSWER) {
            ex.getHttpContext().getServer();
            ex.close(); // no response at all
            return;
        }
        if (f == Fault.HTTP_500) {
            respond(ex, 500, "{\"object\":\"error\",\"message\":\"engine exploded\",\"type\":\"InternalServerError\",\"code\":500}");
            return;
        }
        if (f == Fault.HTTP_400) {
            respond(ex, 400, "{\"object\":\"error\",\"message\":\"prompt too long\",\"type\":\"BadRequestError\",\"code\":400}");
            return;
        }
        if (dialect.equals("vllm")) {
            vllm(ex, body, f);
        } else {
            sglang(ex, body);
        }
    }

    private void vllm(HttpExchange ex, JsonNode body, Fault f) throws IOException {
        JsonNode kv = body.get("kv_transfer_params");
        if (role.equals("prefill")) {
            if (kv == null || !kv.path("do_remote_decode").asBoolean() || body.path("stream").asBoolean(true)
                // vLLM refuses stream_options unless stream is true; null is no stream_options (check_stream_options)
                || body.path("max_tokens").asInt() != 1 || body.hasNonNull("stream_options")) {
                rejected.incrementAndGet();
                respond(ex, 400, "{\"error\":{\"message\":\"bad prefill request\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}");
                return;
            }
            if (f == Fault.NO_PARAMS) {
                respond(ex, 200, "{\"id\":\"p\",\"choices\":[{\"index\":0,\"text\":\"x\"}]}");
                return;
            }
            String token = "blk-" + java.util.UUID.randomUUID();
            fleet.issued.put(token, ex.getRequestHeaders().getFirst("X-Request-Id"));
            respond(ex, 200, "{\"id\":\"p\",\"choices\":[{\"index\":0,\"text\":\"x\"}],\"kv_transfer_params\":{\"do_remote_prefill\":true,"
                + "\"do_remote_decode\":false,\"remote_block_ids\":[[1,2,3]],\"remote_engine_id\":\"" + token
                + "\",\"remote_host\":\"10.0.0.7\",\"remote_port\":5600,\"tp_size\":1}}");
            return;
        }
        if (kv != null) {
            String token = kv.path("remote_engine_id").asText();
            String rid = fleet.issued.remove(token);
            if (rid == null || !rid.equals(ex.getRequestHeaders().getFirst("X-Request-Id")) || !kv.path("do_remote_prefill").asBoolean()) {
                rejected.incrementAndGet();
                respond(ex, 400, "{\"error\":{\"message\":\"unknown kv_transfer_params\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}");
                return;
            }
            decodesWithParams.incrementAndGet();
        }
        answer(ex, body, true);
    }

    private void sglang(HttpExchange ex, JsonNode body) throws IOException {
        if (!body.has("bootstrap_room") || !body.has("bootstrap_host") || !body.has("bootstrap_port")) {
            rejected.incrementAndGet();
            respond(ex, 400, "{\"object\":\"error\",\"message\":\"missing bootstrap\",\"code\":400}");
            return;
        }
        long room = body.get("bootstrap_room").isArray() ? body.get("bootstrap_room").get(0).asLong() : body.get("bootstrap_room").asLong();
        if (role.equals("prefill")) {
            try {
                if (!fleet.room(room).await(3, TimeUnit.SECONDS)) {
                    respond(ex, 500, "{\"object\":\"error\",\"message\":\"decode never joined room " + room + "\",\"code\":500}");
                    return;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            fleet.transferred(room).countDown();
            respond(ex, 200, "{\"id\":\"p\",\"choices\":[{\"index\":0,\"text\":\"\"}]}");
            return;
        }
        fleet.room(room).countDown();
        try {
            // As SGLang's decode: nothing is produced before the prefill's KV has arrived.
            if (!fleet.transferred(room).await(3, TimeUnit.SECONDS)) {
                respond(ex, 500, "{\"object\":\"error\",\"message\":\"prefill never sent KV for room " + room + "\",\"code\":500}");
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        answer(ex, body, false);
    }

    private void answer(HttpExchange ex, JsonNode body, boolean withParamsLeak) throws IOException {
        if (body.path("stream").asBoolean(false)) {
            ex.getResponseHeaders().set("Content-Type", "text/event-stream");
            ex.sendResponseHeaders(200, 0);
            try (OutputStream os = ex.getResponseBody()) {
                for (int i = 0; i < 3; i++) {
                    os.write(("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"d" + i + "\"}}]}\n\n").getBytes(StandardCharsets.UTF_8));
                    os.flush();
                }
                os.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
            }
            return;
        }
        ObjectNode r = JSON.createObjectNode();
        r.put("id", "d");
        r.putArray("choices").addObject().put("index", 0).putObject("message").put("role", "assistant").put("content", "decoded");
        if (withParamsLeak) {
            r.putObject("kv_transfer_params").put("remote_host", "10.0.0.8");
        }
        respond(ex, 200, r.toString());
    }

    private static void respond(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
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
