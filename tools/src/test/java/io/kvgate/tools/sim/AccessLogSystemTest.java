package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.log.Log;
import io.kvgate.control.log.LogSetup;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Isolated;

/**
 * The access log of a real gateway in front of the engine simulator: one JSON line per request, whatever way it
 * ended (success streamed and not, a refusal before the body and one after, an engine that is down, a client that
 * left mid-stream), with the request's id, trace, key id (never the key), tokens and timings; and the operator log
 * in {@code logging.format: json}.
 */
@Timeout(60)
@Tag("system")
@Isolated // the operator-log test swaps System.err and the process's log configuration
class AccessLogSystemTest {
    private static final String KEY = "sk-access-log-test-secret";
    private static final Pattern ISO_UTC = Pattern.compile("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z");
    private static final String TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

    @TempDir
    Path dir;

    private static String yaml(Path accessLog, EngineSimulator sim, RefusedPort dead) {
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: ["%s"]
            upstream: {connect_timeout_ms: 1000, max_connect_attempts: 1}
            health: {interval_ms: 60000}
            logging:
              access_log: %s
            rules:
              - name: chat
                models: [m]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: "%s"
              - name: down
                models: [gone]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: "%s"
            """.formatted(KEY, accessLog, sim.baseUrl(), dead.url());
    }

    private static HttpResponse<String> send(Gateway gw, String body, String requestId, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json").header("x-request-id", requestId)
            .POST(HttpRequest.BodyPublishers.ofString(body));
        for (int i = 0; i + 1 < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return SimHttp.CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    /** Sends a streaming request on a raw socket, reads until the first event arrived, and leaves. */
    private static void abortMidStream(Gateway gw, String body, String requestId) throws Exception {
        try (Socket s = new Socket("127.0.0.1", gw.port())) {
            s.setSoTimeout(10_000);
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            OutputStream out = s.getOutputStream();
            out.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Authorization: Bearer " + KEY + "\r\nX-Request-Id: " + requestId + "\r\nContent-Length: " + b.length
                + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(b);
            out.flush();
            InputStream in = s.getInputStream();
            StringBuilder seen = new StringBuilder();
            byte[] buf = new byte[4096];
            while (!seen.toString().contains("\"content\"")) {
                int n = in.read(buf);
                assertTrue(n > 0, "the stream started: " + seen);
                seen.append(new String(buf, 0, n, StandardCharsets.UTF_8));
            }
        } // closed with the stream still running
    }

    /** The lines written so far, by request id, once {@code count} of them are there (bounded wait on the writer). */
    private static Map<String, JsonNode> lines(Path file, int count) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (true) {
            List<String> lines = Files.exists(file) ? Files.readAllLines(file) : List.of();
            if (lines.size() >= count || System.nanoTime() > deadline) {
                Map<String, JsonNode> byId = new HashMap<>();
                for (String l : lines) {
                    JsonNode n = SimHttp.MAPPER.readTree(l);
                    JsonNode prev = byId.put(n.path("request_id").asText(), n);
                    assertEquals(null, prev, "one line per request: " + l);
                }
                assertEquals(count, lines.size(), String.join("\n", lines));
                return byId;
            }
            Thread.sleep(20); // the writer thread flushes within its idle park (10 ms)
        }
    }

    @Test
    void oneLinePerRequestOnEveryPath() throws Exception {
        Path file = dir.resolve("access.jsonl");
        String chat = SimHttp.chat("m", "hello there", "\"max_tokens\":4");
        String stream = SimHttp.chat("m", "hello there", "\"max_tokens\":4,\"stream\":true");
        String longStream = SimHttp.chat("m", "hello there", "\"max_tokens\":400,\"stream\":true");
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).itlMs(20));
             RefusedPort dead = TestPorts.refused()) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml(file, sim, dead)));
            try {
                String auth = "Bearer " + KEY;
                assertEquals(200, send(gw, chat, "al-json", "authorization", auth,
                    "traceparent", "00-" + TRACE + "-00f067aa0ba902b7-01").statusCode());
                HttpResponse<String> s = send(gw, stream, "al-sse", "authorization", auth);
                assertEquals(200, s.statusCode());
                assertTrue(s.body().endsWith("data: [DONE]\n\n"), s.body());
                assertEquals(400, send(gw, "{\"model\":\"m\",", "al-400", "authorization", auth).statusCode());
                assertEquals(401, send(gw, chat, "al-401").statusCode());
                int down = send(gw, chat.replace("\"m\"", "\"gone\""), "al-down", "authorization", auth).statusCode();
                assertTrue(down == 502 || down == 503, "engine down: " + down);
                abortMidStream(gw, longStream, "al-abort");

                Map<String, JsonNode> log = lines(file, 6);
                JsonNode json = log.get("al-json");
                assertEquals(200, json.get("status").asInt());
                assertFalse(json.get("stream").asBoolean());
                assertEquals(TRACE, json.get("trace_id").asText());
                assertEquals("chat", json.get("rule").asText());
                assertEquals("m", json.get("model").asText());
                assertEquals(sim.baseUrl().substring("http://".length()), json.get("endpoint").asText());
                assertTrue(json.get("key_id").asText().startsWith("sha256:"), json.toString());
                assertTrue(json.get("prompt_tokens").asInt() > 0, json.toString());
                assertTrue(json.get("bytes_in").asInt() == chat.length() && json.get("bytes_out").asInt() > 0, json.toString());
                assertTrue(json.get("ttft_ms").asDouble() > 0 && json.get("duration_ms").asDouble() >= json.get("ttft_ms").asDouble());
                assertTrue(json.get("error_code").isNull());
                assertTrue(ISO_UTC.matcher(json.get("time").asText()).matches(), json.toString());

                JsonNode sse = log.get("al-sse");
                assertEquals(200, sse.get("status").asInt());
                assertTrue(sse.get("stream").asBoolean());
                assertTrue(sse.get("ttft_ms").asDouble() > 0, sse.toString());
                assertTrue(sse.get("trace_id").isNull());
                assertTrue(sse.get("error_code").isNull(), sse.toString());

                assertEquals(400, log.get("al-400").get("status").asInt());
                assertNotNull(log.get("al-400").get("error_code").textValue());
                assertEquals(401, log.get("al-401").get("status").asInt());
                assertEquals("unauthorized", log.get("al-401").get("error_code").asText());
                assertTrue(log.get("al-401").get("key_id").isNull(), "no key presented");
                assertEquals(down, log.get("al-down").get("status").asInt());
                assertEquals("down", log.get("al-down").get("rule").asText());
                assertNotNull(log.get("al-down").get("error_code").textValue());
                JsonNode abort = log.get("al-abort");
                assertEquals(499, abort.get("status").asInt(), abort.toString());
                assertEquals("client_gone", abort.get("error_code").asText());
                assertTrue(abort.get("ttft_ms").asDouble() > 0, "the first token went out before the client left");

                String text = Files.readString(file);
                assertFalse(text.contains(KEY), "the API key never reaches the access log");
                String metrics = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                    + "/metrics")).header("authorization", auth).build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("\nkvgate_access_log_dropped_total 0"), metrics);
                assertTrue(metrics.contains("kvgate_time_to_first_token_seconds_count{rule=\"chat\"}"), metrics);
                assertTrue(metrics.contains("kvgate_inter_token_latency_seconds_count{rule=\"chat\"}"), metrics);
            } finally {
                gw.close(100);
            }
        }
    }

    /** {@code logging.format: json}: the gateway's operator lines are JSON objects with an ISO-8601 UTC time. */
    @Test
    void jsonOperatorLogLinesParse() throws Exception {
        PrintStream realErr = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM));
             RefusedPort dead = TestPorts.refused()) {
            GatewayConfig cfg = GatewayConfig.parse(yaml(dir.resolve("a.jsonl"), sim, dead).replace(
                "logging:\n", "logging:\n  format: json\n"));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            LogSetup.configure(cfg.logging().format(), cfg.logging().level());
            Gateway gw = Gateway.start(cfg);
            gw.close(100);
            LogSetup.configure(LogSetup.Format.TEXT, Log.Level.INFO); // writes what the JSON loggers held
        } finally {
            System.setErr(realErr);
        }
        List<String> lines = err.toString(StandardCharsets.UTF_8).lines().toList();
        assertTrue(lines.stream().anyMatch(l -> l.contains("routing stage")), String.join("\n", lines));
        for (String l : lines) {
            JsonNode n = SimHttp.MAPPER.readTree(l);
            assertTrue(ISO_UTC.matcher(n.path("time").asText()).matches(), l);
            assertFalse(n.path("level").asText().isEmpty(), l);
            assertFalse(n.path("message").asText().isEmpty(), l);
        }
    }
}
