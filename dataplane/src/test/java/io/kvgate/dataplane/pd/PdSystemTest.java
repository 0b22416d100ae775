package io.kvgate.dataplane.pd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** P/D through the real gateway against strict fake engines of both dialects, including the failure paths. */
@Timeout(60)
@Tag("system")
class PdSystemTest {
    private final PdFakeEngine.Fleet fleet = new PdFakeEngine.Fleet();
    private PdFakeEngine prefill;
    private PdFakeEngine prefill2;
    private PdFakeEngine decode;
    private Gateway gw;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        for (PdFakeEngine e : new PdFakeEngine[] {prefill, prefill2, decode}) {
            if (e != null) {
                e.close();
            }
        }
    }

    private void start(String engine, boolean twoPrefills, String extraPrefill) throws Exception {
        prefill = new PdFakeEngine(engine, "prefill", fleet);
        decode = new PdFakeEngine(engine, "decode", fleet);
        String bootstrap = engine.equals("sglang") ? "\n        bootstrap_port: 8998" : "";
        String second = "";
        if (twoPrefills) {
            prefill2 = new PdFakeEngine(engine, "prefill", fleet);
            second = "      - url: " + prefill2.url() + "\n        role: prefill" + bootstrap + "\n";
        }
        String yaml = """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 500}
            health: {interval_ms: 60000}
            rules:
              - name: pd
                models: [m]
                engine: %s
                policy: pd
                pd: {prefill_timeout_ms: 2000, prefill_policy: least_outstanding}
                endpoints:
                  - url: %s
                    role: prefill%s
            %s%s      - url: %s
                    role: decode
            """.formatted(engine, extraPrefill != null ? extraPrefill : prefill.url(), bootstrap, second,
            extraPrefill != null ? "      - url: " + prefill.url() + "\n        role: prefill" + bootstrap + "\n" : "", decode.url());
        gw = Gateway.start(GatewayConfig.parse(yaml));
    }

    private HttpResponse<String> chat(String body) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .header("Content-Type", "application/json").header("X-Request-Id", "rid-" + System.nanoTime())
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static final String BODY = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"keep \\\"max_tokens\\\": 99 here\"}],"
        + "\"max_tokens\":50,\"min_tokens\":2,"
        + "\"kv_transfer_params\":{\"client\":\"sent\"}}";

    @Test
    void vllmSequentialNonStream() throws Exception {
        start("vllm", false, null);
        HttpResponse<String> r = chat(BODY);
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("decoded"));
        assertFalse(r.body().contains("kv_transfer_params"), "never leaks to the client: " + r.body());
        JsonNode p = prefill.bodies.get(0);
        assertEquals(1, p.get("max_tokens").asInt());
        assertFalse(p.get("stream").asBoolean());
        assertEquals(0, p.get("min_tokens").asInt(), "neutralised in place (the last occurrence is the one vLLM reads)");
        assertTrue(p.get("kv_transfer_params").get("do_remote_decode").asBoolean());
        assertFalse(p.get("kv_transfer_params").has("client"), "client-sent params replaced, not merged");
        assertEquals("keep \"max_tokens\": 99 here", p.get("messages").get(0).get("content").asText());
        JsonNode d = decode.bodies.get(0);
        assertEquals(50, d.get("max_tokens").asInt(), "decode gets the original request");
        assertEquals(prefill.requestIds.get(0), decode.requestIds.get(0), "same X-Request-Id on both legs");
        assertEquals(1, decode.decodesWithParams.get());
        assertEquals(0, decode.rejected.get() + prefill.rejected.get());
        assertEquals(1, gw.pdMetrics().paramsFound());
    }

    @Test
    void vllmStreamRelaysDecodeSse() throws Exception {
        start("vllm", false, null);
        // stream_options is only valid with stream: true (the gateway refuses it otherwise, as OpenAI does)
        HttpResponse<String> r = chat(BODY.replace("\"max_tokens\":50",
            "\"max_tokens\":50,\"stream\":true,\"stream_options\":{\"include_usage\":true}"));
        assertEquals(200, r.statusCode());
        assertTrue(r.body().contains("\"d2\"") && r.body().endsWith("data: [DONE]\n\n"), r.body());
        assertFalse(prefill.bodies.get(0).get("stream").asBoolean());
        assertTrue(prefill.bodies.get(0).get("stream_options").isNull(), "the prefill leg does not stream");
        assertTrue(decode.bodies.get(0).has("stream_options"), "the decode leg keeps the client's fields");
    }

    @Test
    void vllmMissingParamsDecodesWithoutThem() throws Exception {
        start("vllm", false, null);
        prefill.fault = PdFakeEngine.Fault.NO_PARAMS;
        HttpResponse<String> r = chat(BODY);
        assertEquals(200, r.statusCode(), r.body());
        assertFalse(decode.bodies.get(0).has("kv_transfer_params"), "neither the client's nor anyone's params");
        assertEquals(1, gw.pdMetrics().paramsMissing());
    }

    @Test
    void prefill4xxIsRelayedAnd5xxIs502NamingTheLeg() throws Exception {
        start("vllm", false, null);
        prefill.fault = PdFakeEngine.Fault.HTTP_400;
        HttpResponse<String> r = chat(BODY);
        assertEquals(400, r.statusCode());
        assertTrue(r.body().startsWith("{\"error\":{\"message\":\"prompt too long\""), r.body());
        prefill.fault = PdFakeEngine.Fault.HTTP_500;
        r = chat(BODY);
        assertEquals(502, r.statusCode());
        assertTrue(r.body().contains("prefill leg") && r.body().contains("engine exploded"), r.body());
        assertEquals(0, decode.requests.get());
    }

    @Test
    void prefillConnectFailureTriesAnotherPrefill() throws Exception {
        try (RefusedPort dead = TestPorts.refused()) {
            start("vllm", false, dead.url());
            for (int i = 0; i < 4; i++) {
                assertEquals(200, chat(BODY).statusCode());
            }
            assertEquals(4, decode.decodesWithParams.get());
        }
    }

    @Test
    void prefillTransportDeathIsRetriedOnce() throws Exception {
        start("vllm", false, null);
        prefill.fault = PdFakeEngine.Fault.CLOSE_BEFORE_ANSWER;
        prefill.faultCount = 1;
        HttpResponse<String> r = chat(BODY);
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(2, prefill.requests.get());
        // A reused keep-alive connection that dies silently is first re-sent once on a fresh connection
        // (indistinguishable from the keep-alive race), then the P/D retry applies: three silent deaths → 502.
        prefill.faultCount = 3;
        r = chat(BODY);
        assertEquals(502, r.statusCode(), r.body());
        assertTrue(r.body().contains("prefill leg"));
    }

    @Test
    void sglangConcurrentRendezvous() throws Exception {
        start("sglang", false, null);
        HttpResponse<String> r = chat(BODY.replace("\"max_tokens\":50", "\"max_tokens\":50,\"stream\":true"));
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("\"d2\""));
        JsonNode p = prefill.bodies.get(0);
        JsonNode d = decode.bodies.get(0);
        assertEquals(p.get("bootstrap_room").asLong(), d.get("bootstrap_room").asLong());
        assertTrue(p.get("bootstrap_room").asLong() >= 0);
        assertEquals("127.0.0.1", d.get("bootstrap_host").asText());
        assertEquals(8998, d.get("bootstrap_port").asInt());
        assertTrue(d.get("stream").asBoolean(), "SGLang legs carry the client's request unchanged");
    }

    @Test
    void sglangBatchedChatGetsRoomArrays() throws Exception {
        start("sglang", false, null);
        HttpResponse<String> r = chat(BODY.replace("\"max_tokens\":50", "\"max_tokens\":50,\"n\":3"));
        assertEquals(200, r.statusCode(), r.body());
        JsonNode d = decode.bodies.get(0);
        assertEquals(3, d.get("bootstrap_room").size());
        assertEquals(3, d.get("bootstrap_host").size());
    }

    @Test
    void sglangPrefillFailureAbortsDecodeAndRetriesPairWithFreshRoom() throws Exception {
        start("sglang", false, null);
        prefill.fault = PdFakeEngine.Fault.CLOSE_BEFORE_ANSWER;
        prefill.faultCount = 1;
        HttpResponse<String> r = chat(BODY);
        // The decode waits for the dead prefill's KV: only the pair retry can answer.
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(1, gw.pdMetrics().pairRetries.sum(), "exactly one pair retry");
        assertEquals(1, gw.pdMetrics().failures("prefill", "early_close"));
        assertEquals(2, decode.requests.get(), "the first decode was aborted, a second one joined the fresh room");
        assertNotEquals(decode.bodies.get(0).get("bootstrap_room").asLong(), decode.bodies.get(1).get("bootstrap_room").asLong(),
            "the retry uses a fresh room");

        prefill.fault = PdFakeEngine.Fault.HTTP_400;
        prefill.faultCount = 1;
        r = chat(BODY);
        // The prefill refuses before any KV moved, so decode has produced nothing: the 4xx is relayed and decode aborted.
        assertEquals(400, r.statusCode(), r.body());
        assertTrue(r.body().contains("prompt too long"), r.body());
        assertEquals(1, gw.pdMetrics().pairRetries.sum(), "a 4xx is not retried");
        assertEquals(1, gw.pdMetrics().failures("prefill", "http_400"));
    }

    @Test
    void sessionAffinityKeepsAConversationOnTheSamePair() throws Exception {
        prefill = new PdFakeEngine("vllm", "prefill", fleet);
        prefill2 = new PdFakeEngine("vllm", "prefill", fleet);
        decode = new PdFakeEngine("vllm", "decode", fleet);
        PdFakeEngine decode2 = new PdFakeEngine("vllm", "decode", fleet);
        try {
            gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                health: {interval_ms: 60000}
                rules:
                  - name: pd
                    models: [m]
                    engine: vllm
                    policy: pd
                    session: {key: user}
                    pd: {session_affinity: true, prefill_policy: least_outstanding}
                    endpoints:
                      - {url: %s, role: prefill}
                      - {url: %s, role: prefill}
                      - {url: %s, role: decode}
                      - {url: %s, role: decode}
                """.formatted(prefill.url(), prefill2.url(), decode.url(), decode2.url())));
            for (int i = 0; i < 6; i++) {
                assertEquals(200, chat(BODY.replace("\"max_tokens\":50", "\"max_tokens\":50,\"user\":\"alice\"")).statusCode());
            }
            assertTrue(prefill.requests.get() == 6 || prefill2.requests.get() == 6, "one prefill serves the whole conversation");
            assertTrue(decode.requests.get() == 6 || decode2.requests.get() == 6, "one decode serves the whole conversation");
        } finally {
            decode2.close();
        }
    }
}
