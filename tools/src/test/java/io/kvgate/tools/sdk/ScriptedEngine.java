package io.kvgate.tools.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;

/**
 * A scripted OpenAI-compatible engine for the SDK system test: a blocking HTTP/1.1 server on loopback whose answer to
 * {@code POST /v1/chat/completions} is chosen by the last message's content, {@code "scenario:<name>"}:
 * <ul>
 *   <li>{@code ok} — a chat completion, as JSON or (with {@code stream: true}) as SSE chunks {@link #STREAM_PIECES};
 *   <li>{@code flat_error} — HTTP 400 in the older vLLM/SGLang flat shape {@code {"object":"error","message":…}};
 *   <li>{@code die_mid_stream} — SSE head and two complete content frames, then the connection closes without the
 *       terminating chunk (what the gateway sees when an engine process dies);
 *   <li>{@code die_mid_frame} — the same, but the connection dies in the middle of a third frame;
 *   <li>{@code flat_error_frame} — two content frames, then an in-stream error event in the flat shape
 *       {@code data: {"object":"error",…}} (no {@code error} key, which is all the SDKs look for), then
 *       {@code [DONE]}: the stream ends properly, the answer is not complete;
 *   <li>{@code slow_stream} — the {@code ok} stream, held open after its first frame until a {@code release}
 *       request arrives ({@link #HOLD_MS} at most): a request kept in flight without depending on timing;
 *   <li>{@code release} — the {@code ok} JSON answer, and one held {@code slow_stream} goes on.
 * </ul>
 * A body without {@code messages} or that is not JSON gets a flat-shape 400, as an older vLLM would answer. Every
 * request is recorded ({@link #requests()}).
 *
 * <p>It speaks raw HTTP on purpose: a server library finishes a chunked response properly when the handler stops,
 * and the point of the death scenarios is a stream that is NOT finished properly. (The bundled simulator was not on
 * main when this test was written.)
 *
 * <p>Threading: one acceptor thread, one virtual thread per connection (at most {@link #MAX_CONNECTIONS} at once,
 * further connections are closed at accept); the request log is thread-safe.
 */
final class ScriptedEngine implements AutoCloseable {
    /** The message of {@code flat_error_frame}'s in-stream error event. */
    static final String FLAT_ERROR_FRAME_MESSAGE = "the engine failed while generating";

    static final List<String> STREAM_PIECES = List.of("Hello", " from", " the", " scripted", " engine.");
    static final String CONTENT = String.join("", STREAM_PIECES);
    static final List<String> DYING_PIECES = List.of("Partial", " answer");
    static final String FLAT_ERROR_MESSAGE = "This model's maximum context length is 4096 tokens. However, you requested "
        + "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.";
    static final String FLAT_ERROR_TYPE = "BadRequestError";

    /** Longest {@code slow_stream} holds its stream open after the role frame, waiting for a {@code release}. */
    static final long HOLD_MS = 30_000;
    /** One permit per {@code release} request: each lets one held {@code slow_stream} go on. */
    private final Semaphore slowStreamReleases = new Semaphore(0);
    private static final int MAX_CONNECTIONS = 64;
    private static final int MAX_HEAD_BYTES = 64 << 10;
    private static final int MAX_BODY_BYTES = 1 << 20;
    private static final int SOCKET_READ_TIMEOUT_MS = 30_000;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One request as the engine received it; header names are lower-case. */
    record Received(String method, String path, Map<String, String> headers, String body, String scenario, String model,
                    boolean stream) {}

    private final ServerSocket server;
    private final Thread acceptor;
    private final Semaphore connectionSlots = new Semaphore(MAX_CONNECTIONS);
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    private final List<Received> received = new CopyOnWriteArrayList<>();
    private volatile boolean closed;
    private long completionSeq;

    private ScriptedEngine(ServerSocket server) {
        this.server = server;
        this.acceptor = Thread.ofPlatform().daemon().name("scripted-engine-accept").unstarted(this::acceptLoop);
    }

    static ScriptedEngine start() throws IOException {
        ScriptedEngine e = new ScriptedEngine(new ServerSocket(0, 128, InetAddress.getLoopbackAddress()));
        e.acceptor.start();
        return e;
    }

    int port() {
        return server.getLocalPort();
    }

    String url() {
        return "http://127.0.0.1:" + port();
    }

    /** Requests received so far, in arrival order. */
    List<Received> requests() {
        return List.copyOf(received);
    }

    private void acceptLoop() {
        while (!closed) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                if (closed) {
                    return;
                }
                continue;
            }
            if (!connectionSlots.tryAcquire()) {
                closeQuietly(s);
                continue;
            }
            open.add(s);
            Thread.ofVirtual().name("scripted-engine-conn").start(() -> {
                try {
                    serve(s);
                } finally {
                    open.remove(s);
                    closeQuietly(s);
                    connectionSlots.release();
                }
            });
        }
    }

    /** Serves requests on one keep-alive connection until the peer closes, a scenario kills it, or the engine stops. */
    private void serve(Socket s) {
        try {
            s.setSoTimeout(SOCKET_READ_TIMEOUT_MS);
            s.setTcpNoDelay(true);
            InputStream in = new BufferedInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            while (!closed) {
                Request req = readRequest(in);
                if (req == null) {
                    return;
                }
                if (!handle(req, out)) {
                    return;
                }
            }
        } catch (IOException e) {
            // Peer gone, read timeout or engine closing: the connection ends, as a real server's would.
        }
    }

    private record Request(String method, String path, Map<String, String> headers, byte[] body, String problem) {}

    /** Reads one request; null at a clean end of stream before any byte of a new request. */
    private static Request readRequest(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream(512);
        int matched = 0;
        while (matched < 4) {
            int b = in.read();
            if (b < 0) {
                if (head.size() == 0) {
                    return null;
                }
                throw new IOException("connection closed inside a request head");
            }
            head.write(b);
            if (head.size() > MAX_HEAD_BYTES) {
                throw new IOException("request head over " + MAX_HEAD_BYTES + " bytes");
            }
            matched = (b == '\r' && (matched == 0 || matched == 2)) || (b == '\n' && (matched == 1 || matched == 3)) ? matched + 1
                : b == '\r' ? 1 : 0;
        }
        String[] lines = head.toString(StandardCharsets.ISO_8859_1).split("\r\n");
        String[] requestLine = lines[0].split(" ");
        if (requestLine.length != 3) {
            throw new IOException("bad request line: " + lines[0]);
        }
        Map<String, String> headers = new TreeMap<>();
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            if (colon > 0) {
                headers.put(lines[i].substring(0, colon).trim().toLowerCase(Locale.ROOT), lines[i].substring(colon + 1).trim());
            }
        }
        if (headers.containsKey("transfer-encoding")) {
            // The gateway always sends Content-Length; a chunked request here would be a change worth noticing.
            return new Request(requestLine[0], requestLine[1], headers, new byte[0], "chunked request bodies are not supported");
        }
        int length;
        try {
            length = Integer.parseInt(headers.getOrDefault("content-length", "0"));
        } catch (NumberFormatException e) {
            throw new IOException("bad Content-Length: " + headers.get("content-length"), e);
        }
        if (length < 0 || length > MAX_BODY_BYTES) {
            throw new IOException("Content-Length " + length + " outside 0.." + MAX_BODY_BYTES);
        }
        byte[] body = in.readNBytes(length);
        if (body.length != length) {
            throw new IOException("connection closed inside a request body");
        }
        return new Request(requestLine[0], requestLine[1], headers, body, null);
    }

    /** Answers one request; false when the connection must end (scenario death or Connection: close). */
    private boolean handle(Request req, OutputStream out) throws IOException {
        boolean keepAlive = !"close".equalsIgnoreCase(req.headers().get("connection"));
        String body = new String(req.body(), StandardCharsets.UTF_8);
        if (req.problem() != null) {
            record(req, body, null, null, false);
            writeJson(out, 501, flatError(req.problem()), false);
            return false;
        }
        if (req.method().equals("GET")) {
            record(req, body, null, null, false);
            switch (req.path()) {
                case "/health" -> writeJson(out, 200, "{}", keepAlive);
                case "/v1/models" -> writeJson(out, 200, "{\"object\":\"list\",\"data\":[]}", keepAlive);
                default -> writeJson(out, 404, flatError("no route " + req.path()), keepAlive);
            }
            return keepAlive;
        }
        if (!req.method().equals("POST") || !req.path().equals("/v1/chat/completions")) {
            record(req, body, null, null, false);
            writeJson(out, 404, flatError("no route " + req.method() + " " + req.path()), keepAlive);
            return keepAlive;
        }
        JsonNode json;
        try {
            json = JSON.readTree(body);
        } catch (IOException e) {
            json = null;
        }
        if (json == null || !json.isObject() || !json.path("messages").isArray() || json.path("messages").isEmpty()) {
            record(req, body, null, json == null ? null : json.path("model").asText(null), false);
            writeJson(out, 400, flatError("messages: a non-empty array is required"), keepAlive);
            return keepAlive;
        }
        JsonNode messages = json.get("messages");
        String content = messages.get(messages.size() - 1).path("content").asText("");
        String scenario = content.startsWith("scenario:") ? content.substring("scenario:".length()) : "ok";
        String model = json.path("model").asText("unknown");
        boolean stream = json.path("stream").asBoolean(false);
        record(req, body, scenario, model, stream);
        String id = nextId();
        return switch (scenario) {
            case "ok" -> {
                if (stream) {
                    writeSseHead(out);
                    writeChunk(out, frame(chunk(id, model, null, true, null)));
                    for (String piece : STREAM_PIECES) {
                        writeChunk(out, frame(chunk(id, model, piece, false, null)));
                    }
                    writeChunk(out, frame(chunk(id, model, null, false, "stop")));
                    writeChunk(out, "data: [DONE]\n\n");
                    out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                    out.flush();
                } else {
                    writeJson(out, 200, completion(id, model), keepAlive);
                }
                yield keepAlive;
            }
            case "slow_stream" -> {
                // The ok stream, held after its role frame until a release request arrives (HOLD_MS at most): the
                // request stays in flight for as long as the client needs, however slow the machine.
                writeSseHead(out);
                writeChunk(out, frame(chunk(id, model, null, true, null)));
                try {
                    slowStreamReleases.tryAcquire(HOLD_MS, java.util.concurrent.TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    yield false;
                }
                for (String piece : STREAM_PIECES) {
                    writeChunk(out, frame(chunk(id, model, piece, false, null)));
                }
                writeChunk(out, frame(chunk(id, model, null, false, "stop")));
                writeChunk(out, "data: [DONE]\n\n");
                out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                yield keepAlive;
            }
            case "release" -> {
                slowStreamReleases.release();
                writeJson(out, 200, completion(id, model), keepAlive);
                yield keepAlive;
            }
            case "flat_error" -> {
                writeJson(out, 400, flatError(FLAT_ERROR_MESSAGE), keepAlive);
                yield keepAlive;
            }
            case "die_mid_stream", "die_mid_frame" -> {
                writeSseHead(out);
                for (String piece : DYING_PIECES) {
                    writeChunk(out, frame(chunk(id, model, piece, false, null)));
                }
                if (scenario.equals("die_mid_frame")) {
                    String next = frame(chunk(id, model, " that never", false, null));
                    writeChunk(out, next.substring(0, next.length() / 2));
                }
                // The engine is gone: FIN after the last flushed byte, no terminating chunk, no [DONE].
                yield false;
            }
            case "flat_error_frame" -> {
                writeSseHead(out);
                for (String piece : DYING_PIECES) {
                    writeChunk(out, frame(chunk(id, model, piece, false, null)));
                }
                writeChunk(out, "data: " + flatError(FLAT_ERROR_FRAME_MESSAGE) + "\n\n");
                writeChunk(out, "data: [DONE]\n\n");
                out.write("0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                yield keepAlive;
            }
            default -> {
                writeJson(out, 400, flatError("unknown scenario '" + scenario + "'"), keepAlive);
                yield keepAlive;
            }
        };
    }

    private void record(Request req, String body, String scenario, String model, boolean stream) {
        received.add(new Received(req.method(), req.path(), Map.copyOf(req.headers()), body, scenario, model, stream));
    }

    private synchronized String nextId() {
        return "chatcmpl-scripted-" + (++completionSeq);
    }

    static String flatError(String message) {
        ObjectNode n = JSON.createObjectNode();
        n.put("object", "error");
        n.put("message", message);
        n.put("type", FLAT_ERROR_TYPE);
        n.putNull("param");
        n.put("code", 400);
        return n.toString();
    }

    private static String completion(String id, String model) {
        ObjectNode n = JSON.createObjectNode();
        n.put("id", id);
        n.put("object", "chat.completion");
        n.put("created", 1_764_460_800L);
        n.put("model", model);
        ObjectNode choice = n.putArray("choices").addObject();
        choice.put("index", 0);
        choice.putObject("message").put("role", "assistant").put("content", CONTENT);
        choice.put("finish_reason", "stop");
        n.putObject("usage").put("prompt_tokens", 9).put("completion_tokens", STREAM_PIECES.size())
            .put("total_tokens", 9 + STREAM_PIECES.size());
        return n.toString();
    }

    private static String chunk(String id, String model, String piece, boolean roleOnly, String finishReason) {
        ObjectNode n = JSON.createObjectNode();
        n.put("id", id);
        n.put("object", "chat.completion.chunk");
        n.put("created", 1_764_460_800L);
        n.put("model", model);
        ArrayNode choices = n.putArray("choices");
        ObjectNode choice = choices.addObject();
        choice.put("index", 0);
        ObjectNode delta = choice.putObject("delta");
        if (roleOnly) {
            delta.put("role", "assistant").put("content", "");
        } else if (piece != null) {
            delta.put("content", piece);
        }
        if (finishReason == null) {
            choice.putNull("finish_reason");
        } else {
            choice.put("finish_reason", finishReason);
        }
        return n.toString();
    }

    private static String frame(String json) {
        return "data: " + json + "\n\n";
    }

    private static void writeJson(OutputStream out, int status, String json, boolean keepAlive) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        String head = "HTTP/1.1 " + status + " " + reason(status) + "\r\ncontent-type: application/json\r\ncontent-length: "
            + b.length + "\r\n" + (keepAlive ? "" : "connection: close\r\n") + "\r\n";
        out.write(head.getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.flush();
    }

    private static void writeSseHead(OutputStream out) throws IOException {
        out.write(("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ncache-control: no-cache\r\n"
            + "transfer-encoding: chunked\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    /** One HTTP chunk, flushed: each SSE frame leaves the engine as its own write, as a token-by-token engine does. */
    private static void writeChunk(OutputStream out, String data) throws IOException {
        byte[] b = data.getBytes(StandardCharsets.UTF_8);
        out.write((Integer.toHexString(b.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
        out.write(b);
        out.write("\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    private static String reason(int status) {
        return switch (status) {
            case 200 -> "OK";
            case 400 -> "Bad Request";
            case 404 -> "Not Found";
            case 501 -> "Not Implemented";
            default -> "Status";
        };
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // Closing a socket that is already broken.
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            server.close();
        } catch (IOException ignored) {
            // Already closed.
        }
        for (Socket s : open) {
            closeQuietly(s);
        }
        try {
            acceptor.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
