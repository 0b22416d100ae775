package io.kvgate.perf.path;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * How many of the gateway's classes one request runs through before its first byte reaches the engine, and end to
 * end: the review's "classes on one request's path" (about 65 before the first upstream byte on 2026-12-07, counted by
 * reading), measured instead of read, so it can be run again on any commit.
 *
 * <p>Method: an embedded gateway with one {@code kv_exact} vLLM rule (the qwen3 tokenizer of {@code deploy/models},
 * one I/O thread, so the routing stage runs on it: the default shape at one thread) in front of an in-process fake
 * engine. Two warm-up requests, then one streaming chat request (a prompt the warm-ups did not send) is traced with
 * JFR's method tracing ({@code jdk.MethodTrace}, JDK 25) over every class of the kvgate jars. A class counts when one
 * of its methods or constructors starts on the gateway's I/O or routing thread from the moment the I/O thread takes the
 * connection ({@code ClientChannelInitializer}) while the request is in flight. The
 * engine holds its answer {@link #ENGINE_HOLD_MS}, so "before the first upstream byte" is every call that started
 * before the engine got the request, plus {@link #CLOCK_SLACK_MS} for the difference between JFR's clock and the
 * engine's (well under it; the gateway's next housekeeping is 10-100 ms away, so nothing else lands in that slack).
 * Lambdas count as the class that declares their body; an interface counts only by a default or static method
 * that runs; a record read only through fields (none here) would not count.
 *
 * <p>Run with {@code perf/request-path.sh}; it prints the counts per module, then each class in first-call order.
 * Single-threaded client; takes a few seconds.
 */
public final class RequestPathClasses {
    /** How long the fake engine holds its answer: separates the request's calls from the response's. */
    static final long ENGINE_HOLD_MS = 200;
    /** Calls up to this long after the engine got the request still count as the request's. */
    static final long CLOCK_SLACK_MS = 5;
    /** The first class of the request's path: the connection's pipeline set up on its I/O thread. */
    private static final String ACCEPTED = "io.kvgate.dataplane.http.ClientChannelInitializer";
    /** The kvgate modules whose classes are traced. */
    private static final List<String> MODULES = List.of("control", "index", "ingest", "dataplane");

    private RequestPathClasses() {
    }

    public static void main(String[] args) throws Exception {
        Path root = Path.of(System.getProperty("kvgate.home", ".")).toAbsolutePath().normalize();
        Path libs = root.resolve("perf/target/lib");
        Map<String, String> moduleOf = tracedClasses(libs);
        if (moduleOf.isEmpty()) {
            throw new IllegalStateException("no kvgate jars under " + libs + ": build perf first (perf/request-path.sh does)");
        }
        FakeEngine engine = new FakeEngine();
        int kvPort;
        try (ServerSocket s = new ServerSocket(0)) {
            kvPort = s.getLocalPort(); // a SUB socket connects here; nothing publishes (the index stays empty)
        }
        String yaml = """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            io_threads: 1
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: kv_exact
                fallback: least_outstanding
                tokenizer: %s
                block_size: 16
                hash_seed: "0"
                hash_algo: sha256_cbor
                kv_capacity_blocks: 100000
                endpoints:
                  - url: http://127.0.0.1:%d
                    kv_events: tcp://127.0.0.1:%d
            """.formatted(root.resolve("deploy/models/qwen3"), engine.port(), kvPort);
        try (Gateway gw = Gateway.start(GatewayConfig.parse(yaml))) {
            for (int i = 0; i < 2; i++) {
                post(gw.port(), "warm-up conversation " + i + " about the weather in a city by the sea");
            }
            Path jfr = Files.createTempFile("kvgate-request-path", ".jfr");
            try (Recording rec = new Recording()) {
                rec.enable("jdk.MethodTrace").with("filter", String.join(";", moduleOf.keySet())).withStackTrace();
                rec.start();
                post(gw.port(), "a new conversation: which classes does this request pass through on its way?");
                rec.stop();
                rec.dump(jfr);
            }
            report(jfr, engine.firstRequestAfterWarmUp(), moduleOf);
            Files.deleteIfExists(jfr);
        } finally {
            engine.close();
        }
    }

    /** Every class of the kvgate module jars, by binary name, with its module. */
    private static Map<String, String> tracedClasses(Path libs) throws IOException {
        Map<String, String> out = new TreeMap<>();
        for (String module : MODULES) {
            Path jar;
            try (var files = Files.list(libs)) {
                jar = files.filter(p -> p.getFileName().toString().matches("kvgate-" + module + "-.*\\.jar")).findFirst().orElse(null);
            }
            if (jar == null) {
                continue;
            }
            try (JarFile jf = new JarFile(jar.toFile())) {
                for (Enumeration<JarEntry> e = jf.entries(); e.hasMoreElements(); ) {
                    String name = e.nextElement().getName();
                    if (name.endsWith(".class") && !name.endsWith("module-info.class") && !name.endsWith("package-info.class")) {
                        out.put(name.substring(0, name.length() - ".class".length()).replace('/', '.'), module);
                    }
                }
            }
        }
        return out;
    }

    private static void report(Path jfr, Instant engineGotRequest, Map<String, String> moduleOf) throws IOException {
        Instant cut = engineGotRequest.plus(Duration.ofMillis(CLOCK_SLACK_MS));
        Map<String, Instant> firstCall = new LinkedHashMap<>();
        List<RecordedEvent> events = new ArrayList<>(RecordingFile.readAllEvents(jfr));
        events.sort((a, b) -> a.getStartTime().compareTo(b.getStartTime()));
        boolean accepted = false;
        for (RecordedEvent e : events) {
            String thread = e.getThread() == null ? "" : e.getThread().getJavaName();
            if (thread == null || !(thread.startsWith("kvgate-io") || thread.startsWith("kvgate-router"))) {
                continue; // health, load and model probes, admin, ingest: not the request's path
            }
            String cls = topLevel(((String) e.getValue("method.type.name")).replace('/', '.'));
            // The path starts where the I/O thread takes the new connection: the routing stage's housekeeping, which
            // the same loop runs on a timer, may come first and is not the request's.
            accepted |= cls.equals(ACCEPTED);
            if (accepted) {
                firstCall.putIfAbsent(cls, e.getStartTime());
            }
        }
        Map<String, Integer> before = new TreeMap<>();
        Map<String, Integer> all = new TreeMap<>();
        List<String> lines = new ArrayList<>();
        for (var entry : firstCall.entrySet()) {
            String module = moduleOf.getOrDefault(entry.getKey(), "?");
            boolean request = entry.getValue().isBefore(cut);
            all.merge(module, 1, Integer::sum);
            if (request) {
                before.merge(module, 1, Integer::sum);
            }
            lines.add((request ? "  request   " : "  response  ") + module + "  " + entry.getKey());
        }
        System.out.println("classes before the first upstream byte: " + sum(before) + " " + before);
        System.out.println("classes end to end:                     " + sum(all) + " " + all);
        System.out.println("(top-level classes: a nested class counts as its outer one; first call order)");
        lines.forEach(System.out::println);
    }

    private static int sum(Map<String, Integer> m) {
        return m.values().stream().mapToInt(Integer::intValue).sum();
    }

    /** {@code a.B$C} and {@code a.B$1} count as {@code a.B}: one file a reader opens. */
    private static String topLevel(String binaryName) {
        int d = binaryName.indexOf('$');
        return d < 0 ? binaryName : binaryName.substring(0, d);
    }

    /** A streaming chat request over a fresh connection; reads the whole answer. */
    private static void post(int port, String prompt) throws IOException {
        String body = "{\"model\":\"qwen3\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"" + prompt + "\"}]}";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(30_000);
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + "Content-Length: " + b.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(b);
            out.flush();
            String answer = new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!answer.startsWith("HTTP/1.1 200") || !answer.contains("[DONE]")) {
                throw new IllegalStateException("the gateway did not relay the engine's stream: " + answer);
            }
        }
    }

    /** An engine that answers probes with 200 and a chat request, after {@link #ENGINE_HOLD_MS}, with a short stream. */
    private static final class FakeEngine implements AutoCloseable {
        private final HttpServer server;
        private final List<Instant> chatRequests = new ArrayList<>();

        FakeEngine() throws IOException {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
            server.createContext("/", this::handle);
            server.start();
        }

        int port() {
            return server.getAddress().getPort();
        }

        private void handle(HttpExchange x) throws IOException {
            if (!x.getRequestMethod().equals("POST")) {
                send(x, "application/json", "{}");
                return;
            }
            synchronized (chatRequests) {
                chatRequests.add(Instant.now());
            }
            try (InputStream in = x.getRequestBody()) {
                in.readAllBytes();
            }
            try {
                Thread.sleep(ENGINE_HOLD_MS); // the hold that separates the request's calls from the response's
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            String chunk = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\","
                + "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n";
            String usage = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen3\","
                + "\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1,\"total_tokens\":21}}\n\n";
            send(x, "text/event-stream", chunk + usage + "data: [DONE]\n\n");
        }

        private static void send(HttpExchange x, String type, String body) throws IOException {
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            x.getResponseHeaders().set("Content-Type", type);
            x.sendResponseHeaders(200, b.length);
            try (OutputStream out = x.getResponseBody()) {
                out.write(b);
            }
        }

        /** When the traced (third) chat request reached the engine. */
        Instant firstRequestAfterWarmUp() {
            synchronized (chatRequests) {
                if (chatRequests.size() != 3) {
                    throw new IllegalStateException("the engine saw " + chatRequests.size() + " chat requests, not 3");
                }
                return chatRequests.get(2);
            }
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }
}
