package io.kvgate.dataplane.accesslog;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Access-log lines (JSON encoding, escaping, fields) and its bounded queue (drops counted, nothing blocks). */
class AccessLogTest {
    /** 2026-12-07T14:39:59.045Z */
    private static final long T = 1_796_654_399_045L;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> FIELDS = List.of("time", "request_id", "trace_id", "key_id", "rule", "model",
        "endpoint", "status", "stream", "bytes_in", "bytes_out", "prompt_tokens", "cached_tokens", "reachable_tokens",
        "predicted_tokens", "route_loss", "ttft_ms", "duration_ms", "tier", "error_code", "tenant", "migrated_from");

    private static AccessRecord full() {
        AccessRecord r = new AccessRecord();
        r.requestId = "req-1";
        r.traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
        r.keyId = "sha256:0123456789ab";
        r.rule = "chat";
        r.model = "qwen3";
        r.endpoint = "127.0.0.1:9001";
        r.status = 200;
        r.stream = true;
        r.bytesIn = 1024;
        r.bytesOut = 5120;
        r.promptTokens = 300;
        r.cachedTokens = 256;
        r.reachableTokens = 288;
        r.predictedTokens = 272;
        r.routeLoss = "load_bound";
        r.ttftNs = 12_345_678;
        r.durationNs = 1_500_000_001;
        r.tier = "kv_exact";
        r.tenant = "acme";
        r.migratedFrom = "127.0.0.1:9002,127.0.0.1:9003";
        return r;
    }

    private static JsonNode line(AccessRecord r) throws Exception {
        r.timeMillis = T;
        String text = new AccessLogLine().encode(r).toString();
        assertTrue(text.endsWith("}\n") && text.indexOf('\n') == text.length() - 1, "one line: " + text);
        return JSON.readTree(text);
    }

    @Test
    void aLineHasExactlyTheDocumentedFieldsInOrder() throws Exception {
        JsonNode n = line(full());
        List<String> names = new ArrayList<>();
        n.fieldNames().forEachRemaining(names::add);
        assertEquals(FIELDS, names);
        assertEquals("2026-12-07T14:39:59.045Z", n.get("time").asText());
        assertEquals("req-1", n.get("request_id").asText());
        assertEquals(200, n.get("status").asInt());
        assertTrue(n.get("stream").asBoolean());
        assertEquals(256, n.get("cached_tokens").asLong());
        assertEquals(288, n.get("reachable_tokens").asLong());
        assertEquals(272, n.get("predicted_tokens").asLong());
        assertEquals("load_bound", n.get("route_loss").asText());
        assertEquals(12.345, n.get("ttft_ms").asDouble());
        assertEquals(1500.0, n.get("duration_ms").asDouble());
        assertTrue(n.get("error_code").isNull());
    }

    @Test
    void unknownValuesAreNull() throws Exception {
        AccessRecord r = new AccessRecord();
        r.status = 401;
        r.errorCode = "unauthorized";
        r.durationNs = 42_000;
        JsonNode n = line(r);
        for (String f : List.of("request_id", "trace_id", "key_id", "rule", "model", "endpoint", "prompt_tokens",
            "cached_tokens", "reachable_tokens", "predicted_tokens", "route_loss", "ttft_ms", "tier", "tenant", "migrated_from")) {
            assertTrue(n.get(f).isNull(), f);
        }
        assertEquals(0.042, n.get("duration_ms").asDouble());
        assertEquals("unauthorized", n.get("error_code").asText());
    }

    /** A client's request id or model cannot break the line or add a member: quotes, backslashes, controls escaped. */
    @Test
    void clientStringsAreEscaped() throws Exception {
        AccessRecord r = full();
        r.requestId = "a\"b\\c\nd\re\tf\u0001g\u2028h";
        r.model = "\",\"status\":999,\"x\":\"";
        JsonNode n = line(r);
        assertEquals(r.requestId, n.get("request_id").asText());
        assertEquals(r.model, n.get("model").asText());
        assertEquals(200, n.get("status").asInt());
        assertFalse(n.has("x"));
    }

    @Test
    void fullQueueDropsAndCountsAndNeverBlocks() throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        AccessLog log = new AccessLog(64, sink, false, () -> T, false);
        AccessRecord r = full();
        for (int i = 0; i < 100; i++) {
            r.requestId = "r" + i;
            log.log(r);
        }
        assertEquals(36, log.dropped());
        assertTrue(log.drain());
        List<String> lines = sink.toString(StandardCharsets.UTF_8).lines().toList();
        assertEquals(64, lines.size());
        assertEquals("r0", JSON.readTree(lines.get(0)).get("request_id").asText());
        assertEquals("r63", JSON.readTree(lines.get(63)).get("request_id").asText(), "the oldest are kept, the newest dropped");
        log.log(r); // room again once drained
        assertTrue(log.drain());
        assertEquals(36, log.dropped());
        io.prometheus.metrics.model.registry.PrometheusRegistry registry = new io.prometheus.metrics.model.registry.PrometheusRegistry();
        log.register(registry);
        String metrics = io.kvgate.dataplane.metrics.MetricsExposition.text(registry);
        assertTrue(metrics.contains("\nkvgate_access_log_dropped_total 36.0\n"), metrics);
        assertFalse(log.drain(), "nothing queued");
        log.close();
    }

    @Test
    void theQueuedCopyIsTakenAtLogTime() throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        AccessLog log = new AccessLog(64, sink, false, () -> T, false);
        AccessRecord r = full();
        log.log(r);
        r.reset(); // the connection's next request reuses its record at once
        r.requestId = "next";
        log.drain();
        assertEquals("req-1", JSON.readTree(sink.toString(StandardCharsets.UTF_8)).get("request_id").asText());
    }

    @Test
    void offLogsNothing() {
        assertFalse(AccessLog.OFF.enabled());
        AccessLog.OFF.log(full());
        assertEquals(0, AccessLog.OFF.dropped());
    }

    @Test
    void traceIdFromTraceparent() {
        assertEquals("4bf92f3577b34da6a3ce929d0e0e4736",
            TraceIds.fromTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assertEquals("4bf92f3577b34da6a3ce929d0e0e4736",
            TraceIds.fromTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future"));
        assertNull(TraceIds.fromTraceparent(null));
        assertNull(TraceIds.fromTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), "all-zero id is invalid");
        assertNull(TraceIds.fromTraceparent("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), "uppercase is invalid");
        assertNull(TraceIds.fromTraceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "version ff is invalid");
        assertNull(TraceIds.fromTraceparent("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"));
        assertNull(TraceIds.fromTraceparent("garbage"));
    }
}
