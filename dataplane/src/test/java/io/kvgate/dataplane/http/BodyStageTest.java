package io.kvgate.dataplane.http;

import static io.kvgate.dataplane.http.FrontDoorHarness.AUTH;
import static io.kvgate.dataplane.http.FrontDoorHarness.ascii;
import static io.kvgate.dataplane.http.FrontDoorHarness.output;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The body stage through the real front door: typed validation (param, reason), duplicate keys, the rule's
 * {@code max_n}, and the removal of client-sent engine-internal fields, each with the body split at every byte.
 */
class BodyStageTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private FrontDoorHarness h;

    @BeforeEach
    void setUp() throws Exception {
        h = new FrontDoorHarness();
    }

    @AfterEach
    void tearDown() {
        h.close();
    }

    private static String post(String path, String body) {
        return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + AUTH + "\r\nContent-Type: application/json\r\nContent-Length: "
            + body.getBytes(StandardCharsets.UTF_8).length + "\r\n\r\n" + body;
    }

    /** Sends one request and returns what the front door wrote ("" when it started an exchange). */
    private String send(String path, String body) {
        EmbeddedChannel ch = h.channel();
        ch.writeInbound(ascii(post(path, body)));
        String out = output(ch);
        ch.finishAndReleaseAll();
        return out;
    }

    private static JsonNode error(String out) throws Exception {
        return JSON.readTree(out.substring(out.indexOf("\r\n\r\n") + 4)).get("error");
    }

    private void assertRefused(String path, String body, String param, String reason) throws Exception {
        String out = send(path, body);
        assertTrue(out.startsWith("HTTP/1.1 400 "), out);
        JsonNode e = error(out);
        assertEquals(param == null ? "null" : param, e.get("param").isNull() ? "null" : e.get("param").asText(), out);
        assertEquals("invalid_request_error", e.get("type").asText());
        assertTrue(h.metrics.render().contains("kvgate_bad_requests_total{reason=\"" + reason + "\"}"), reason);
    }

    // ---- typed validation -------------------------------------------------------------------------------------

    @Test
    void eachProblemNamesItsParamAndReason() throws Exception {
        assertRefused("/v1/chat/completions", "", null, "empty_body");
        assertRefused("/v1/chat/completions", "[1]", null, "not_an_object");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[", null, "malformed_json");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[]} {}", null, "malformed_json");
        assertRefused("/v1/chat/completions", "{\"model\":5,\"messages\":[]}", "model", "invalid_model");
        assertRefused("/v1/chat/completions", "{\"messages\":[]}", "model", "missing_model");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\"}", "messages", "missing_messages");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":\"hi\"}", "messages", "invalid_messages");
        assertRefused("/v1/completions", "{\"model\":\"m\"}", "prompt", "missing_prompt");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"n\":0}", "n", "invalid_n");
        assertEquals(0, h.started.size());
    }

    @Test
    void malformedJsonDeepInsideTheBodyIsRefused() throws Exception {
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\",}]}", null,
            "malformed_json");
    }

    // ---- L6: duplicate keys ------------------------------------------------------------------------------------

    @Test
    void l6_duplicateModelKeysNeverRouteOnAValueTheEngineDoesNotRead() throws Exception {
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"model\":null,\"messages\":[]}", "model", "missing_model");
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"model\":{\"a\":1},\"messages\":[]}", "model", "invalid_model");
        assertEquals("", send("/v1/chat/completions", "{\"model\":7,\"model\":\"m\",\"messages\":[]}"));
        assertEquals("m", h.started.get(0).model(), "the last model wins, as in the engines' JSON parser");
    }

    // ---- H5 (front-door half): n and batches -------------------------------------------------------------------

    @ParameterizedTest
    @ValueSource(strings = {"129", "2147483647", "2147483648", "99999999999999999999999", "1e10", "1.5e3"})
    void h5_nAboveMaxNIsRefusedBeforeAnyExchange(String n) throws Exception {
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"n\":" + n + "}", "n", "n_over_max");
        assertEquals(0, h.started.size());
    }

    @ParameterizedTest
    @ValueSource(strings = {"\"5\"", "2.5", "true", "[1]", "{}"})
    void nThatIsNotAnIntegerIsRefused(String n) throws Exception {
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"n\":" + n + "}", "n", "invalid_n");
    }

    @Test
    void nUpToMaxNIsAccepted() {
        assertEquals("", send("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"n\":128}"));
        assertEquals("", send("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"n\":4.0}"));
        assertEquals(128, h.started.get(0).n());
        assertEquals(4, h.started.get(1).n());
    }

    @Test
    void maxNIsPerRule() throws Exception {
        assertEquals("", send("/v1/chat/completions", "{\"model\":\"small\",\"messages\":[],\"n\":4}"));
        String out = send("/v1/chat/completions", "{\"model\":\"small\",\"messages\":[],\"n\":5}");
        assertTrue(error(out).get("message").asText().contains("rule 'small' allows at most 4 choices"), out);
    }

    @Test
    void h5_batchedPromptsAboveMaxNAreRefused() throws Exception {
        StringBuilder five = new StringBuilder("[");
        for (int i = 0; i < 5; i++) {
            five.append(i == 0 ? "" : ",").append("\"p").append(i).append('"');
        }
        five.append(']');
        assertRefused("/v1/completions", "{\"model\":\"small\",\"prompt\":" + five + "}", "prompt", "batch_over_max");
        assertRefused("/v1/completions", "{\"model\":\"small\",\"prompt\":[[1],[2],[3],[4],[5]]}", "prompt", "batch_over_max");
        // One token-id prompt is one prompt however long it is; four prompts are within max_n: 4.
        assertEquals("", send("/v1/completions", "{\"model\":\"small\",\"prompt\":[1,2,3,4,5,6,7,8,9,10]}"));
        assertEquals("", send("/v1/completions", "{\"model\":\"small\",\"prompt\":[\"a\",\"b\",\"c\",\"d\"]}"));
        assertEquals(1, h.started.get(0).promptCount());
        assertEquals(4, h.started.get(1).promptCount());
    }

    // ---- M8: engine-internal fields -----------------------------------------------------------------------------

    private static String withoutInternal(String body) throws Exception {
        ObjectNode o = (ObjectNode) JSON.readTree(body);
        o.remove(java.util.List.of("kv_transfer_params", "bootstrap_host", "bootstrap_port", "bootstrap_room", "disaggregated_params"));
        return o.toString();
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "{\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_host\":\"10.0.0.99\"},\"model\":\"m\",\"messages\":[]}",
        "{\"model\":\"m\",\"kv_transfer_params\":{\"remote_block_ids\":[1,2]},\"messages\":[]}",
        "{\"model\":\"m\",\"messages\":[],\"kv_transfer_params\":{\"remote_port\":5600}}",
        "{\"model\":\"m\",\"messages\":[] , \"bootstrap_host\" : \"evil\" ,\n \"bootstrap_port\":1, \"bootstrap_room\":[1,2] }",
        "{\"bootstrap_room\":7,\"model\":\"m\",\"bootstrap_host\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"kv_transfer_params\"}],\"kv_transfer_params\":null}",
        "{\"model\":\"m\",\"messages\":[{\"kv_transfer_params\":{}}],\"user\":\"u\"}",
        "{\"model\":\"m\",\"disaggregated_params\":{\"request_type\":\"generation_only\",\"ctx_request_id\":9},\"messages\":[]}",
        "{\"model\":\"m\",\"messages\":[],\"disaggregated_params\":{\"request_type\":\"context_only\"}}"})
    void m8_clientEngineFieldsAreRemovedAtEverySplit(String body) throws Exception {
        String expected = withoutInternal(body);
        byte[] req = post("/v1/chat/completions", body).getBytes(StandardCharsets.UTF_8);
        for (int split = 1; split < req.length; split++) {
            EmbeddedChannel ch = h.channel();
            // A fresh copy each time: the inbound buffers belong to the gateway, which strips the fields in place.
            byte[] bytes = req.clone();
            ch.writeInbound(Unpooled.wrappedBuffer(bytes, 0, split));
            ch.writeInbound(Unpooled.wrappedBuffer(bytes, split, req.length - split));
            assertEquals(split, h.started.size(), "split " + split + ": " + output(ch));
            String forwarded = h.bodies.get(h.bodies.size() - 1);
            assertEquals(JSON.readTree(expected), JSON.readTree(forwarded), "split " + split + ": " + forwarded);
            ch.finishAndReleaseAll();
        }
        assertEquals(req.length - 1, h.started.size());
    }

    /**
     * No rule of this table is chwbl, so no request text is decoded for a prefix key (the lexer only validates it),
     * at every split; the body is forwarded whole and malformed content is still refused.
     */
    @Test
    void noTextIsDecodedWhenNoRuleKeysOnItAtEverySplit() throws Exception {
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + "plain text ".repeat(30) + "\"}]}";
        byte[] req = post("/v1/chat/completions", body).getBytes(StandardCharsets.UTF_8);
        for (int split = 1; split < req.length; split++) {
            EmbeddedChannel ch = h.channel();
            ch.writeInbound(Unpooled.wrappedBuffer(req, 0, split));
            ch.writeInbound(Unpooled.wrappedBuffer(req, split, req.length - split));
            var f = h.started.get(h.started.size() - 1).fields();
            assertEquals(0, f.textPrefixLimit, "split " + split);
            assertEquals("", f.textPrefix.toString(), "split " + split);
            assertEquals(body, h.bodies.get(h.bodies.size() - 1), "split " + split);
            ch.finishAndReleaseAll();
        }
        assertEquals(req.length - 1, h.started.size());
        assertRefused("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[{\"content\":\"" + "a".repeat(300) + "\u0001\"}]}",
            null, "malformed_json");
    }

    /**
     * A body that arrives whole in one read goes on as the decoder's slice of the read buffer (no copy); one that
     * fills less than half of its read buffer is copied (a long-held request never pins a large read buffer), and
     * so is a body that arrives in pieces. The bytes forwarded are the same every way.
     */
    @Test
    void aBodyThatArrivesWholeIsNotCopiedUnlessItsReadBufferIsMostlyEmpty() {
        String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + "a".repeat(600) + "\"}]}";
        byte[] req = post("/v1/chat/completions", body).getBytes(StandardCharsets.UTF_8);
        EmbeddedChannel whole = h.channel();
        whole.writeInbound(Unpooled.wrappedBuffer(req));
        assertSame(req, h.bodyArrays.get(0), "read whole: the body is a slice of the read buffer");
        whole.finishAndReleaseAll();

        EmbeddedChannel roomy = h.channel();
        io.netty.buffer.ByteBuf large = Unpooled.buffer(req.length * 4).writeBytes(req);
        byte[] largeArray = large.array();
        roomy.writeInbound(large);
        assertNotSame(largeArray, h.bodyArrays.get(1), "a quarter-full read buffer: the body is copied");
        roomy.finishAndReleaseAll();

        EmbeddedChannel pieces = h.channel();
        pieces.writeInbound(Unpooled.wrappedBuffer(req, 0, req.length - 10));
        pieces.writeInbound(Unpooled.wrappedBuffer(req, req.length - 10, 10));
        assertNotSame(req, h.bodyArrays.get(2), "in pieces: the body is gathered into its own buffer");
        pieces.finishAndReleaseAll();

        assertEquals(List.of(body, body, body), h.bodies);
    }

    @Test
    void m8_aBodyWithoutEngineFieldsIsForwardedByteForByte() {
        String body = "{ \"model\" : \"m\",\n  \"messages\":[{\"role\":\"user\",\"content\":\"bootstrap_host\"}] }";
        assertEquals("", send("/v1/chat/completions", body));
        assertEquals(body, h.bodies.get(0));
        assertTrue(h.metrics.render().contains("kvgate_client_engine_fields_removed_total 0"));
    }

    @Test
    void m8_removalsAreCounted() {
        send("/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"bootstrap_host\":\"x\",\"bootstrap_port\":1}");
        assertEquals("{\"model\":\"m\",\"messages\":[]}", h.bodies.get(0));
        assertTrue(h.metrics.render().contains("kvgate_client_engine_fields_removed_total 2"));
    }

    /**
     * vLLM's {@code vllm_xargs.kv_cache_report_mode} reaches the body stage's count and is removed on a kv_exact rule
     * only (a tokenizer is what kv_exact needs to route); every other byte survives.
     */
    @Test
    void v5_theReportModeXargIsRemovedOnKvExactRulesOnly() throws Exception {
        java.nio.file.Path d = java.nio.file.Path.of("").toAbsolutePath();
        while (d != null && !java.nio.file.Files.exists(d.resolve("mvnw"))) {
            d = d.getParent();
        }
        FrontDoorHarness kv = new FrontDoorHarness("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [k1]
            rules:
              - name: kv
                models: [kv]
                policy: kv_exact
                tokenizer: %s
                endpoints:
                  - url: http://127.0.0.1:3
              - name: plain
                models: [plain]
                endpoints:
                  - url: http://127.0.0.1:4
            """.formatted(d.resolve("deploy/models/qwen3")));
        try {
            String tail = ",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"vllm_xargs\":"
                + "{\"kv_cache_report_mode\":\"full\",\"my_ext\":1}}";
            for (String model : new String[] {"kv", "plain"}) {
                EmbeddedChannel ch = kv.channel();
                ch.writeInbound(ascii(post("/v1/chat/completions", "{\"model\":\"" + model + "\"" + tail)));
                assertEquals("", output(ch));
                ch.finishAndReleaseAll();
            }
            assertEquals("{\"model\":\"kv\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                + "\"vllm_xargs\":{\"my_ext\":1}}", kv.bodies.get(0));
            assertEquals("{\"model\":\"plain\"" + tail, kv.bodies.get(1));
            assertTrue(kv.metrics.render().contains("kvgate_client_engine_fields_removed_total 1"));
        } finally {
            kv.close();
        }
    }
}
