package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** P/D legs enforced like the engines (engine-contracts §4): vLLM sequential params, SGLang rendezvous. */
@Timeout(60)
@Tag("system")
class PdProtocolTest {
    static final String LONG_PROMPT = "one two three four five six seven eight nine ten eleven twelve thirteen "
        + "fourteen fifteen sixteen seventeen eighteen nineteen twenty twentyone twentytwo twentythree twentyfour "
        + "twentyfive twentysix twentyseven twentyeight twentynine thirty thirtyone thirtytwo thirtythree";

    static String prefillBody(String prompt) {
        return "{\"model\":\"m\",\"prompt\":\"" + prompt + "\",\"max_tokens\":1,\"stream\":false,"
            + "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
            + "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}}";
    }

    static String decodeBody(String prompt, JsonNode params) {
        ObjectNode body = SimHttp.MAPPER.createObjectNode();
        body.put("model", "m").put("prompt", prompt).put("max_tokens", 4);
        if (params != null) {
            body.set("kv_transfer_params", params);
        }
        return body.toString();
    }

    @Test
    void vllmSequentialLegsWithSharedRegistry() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.PREFILL)
                 .pdRegistry(registry));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.DECODE)
                 .pdRegistry(registry))) {
            JsonNode p = json(post(prefill, "/v1/completions", prefillBody(LONG_PROMPT), "x-request-id", "pd-1"));
            JsonNode params = p.get("kv_transfer_params");
            assertTrue(params.isObject(), p.toString());
            assertTrue(params.get("do_remote_prefill").asBoolean());
            assertEquals(prefill.engineId(), params.get("remote_engine_id").asText());
            int blocks = params.get("remote_block_ids").size();
            assertEquals(p.at("/usage/prompt_tokens").asInt() / 16, blocks);
            assertTrue(params.has("remote_request_id") && params.has("remote_host") && params.has("remote_port")
                && params.has("tp_size"));

            // a different X-Request-Id on the decode leg is refused
            HttpResponse<String> wrongId = post(decode, "/v1/completions", decodeBody(LONG_PROMPT, params),
                "x-request-id", "pd-other");
            assertEquals(400, wrongId.statusCode());
            assertTrue(json(wrongId).at("/error/message").asText().contains("X-Request-Id"));

            HttpResponse<String> ok = post(decode, "/v1/completions", decodeBody(LONG_PROMPT, params),
                "x-request-id", "pd-1");
            assertEquals(200, ok.statusCode(), ok.body());
            assertEquals(blocks * 16, json(ok).at("/usage/prompt_tokens_details/cached_tokens").asInt(),
                "pulled KV counts as cached and costs no prefill time");
            assertEquals(1, decode.stats().get("pd_decode_with_params"));

            // params are consumed once, and forged ones are refused
            assertEquals(400, post(decode, "/v1/completions", decodeBody(LONG_PROMPT, params), "x-request-id", "pd-1")
                .statusCode());
            ObjectNode forged = params.deepCopy();
            forged.put("remote_request_id", "made-up");
            assertEquals(400, post(decode, "/v1/completions", decodeBody(LONG_PROMPT, forged), "x-request-id", "pd-1")
                .statusCode());
            assertEquals(3, decode.stats().get("pd_decode_rejected"));

            // no params: the decode recomputes, counted
            assertEquals(200, post(decode, "/v1/completions", decodeBody(LONG_PROMPT, null)).statusCode());
            assertEquals(1, decode.stats().get("pd_decode_without_params"));

            // prompt shorter than one block: no params back
            JsonNode shortAnswer = json(post(prefill, "/v1/completions", prefillBody("tiny"), "x-request-id", "pd-2"));
            assertTrue(shortAnswer.get("kv_transfer_params").isNull());
        }
    }

    @Test
    void vllmSecretWorksAcrossRegistriesAndRejectsOtherSecrets() throws Exception {
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.PREFILL).pdSecret("s1"));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.DECODE).pdSecret("s1"));
             EngineSimulator stranger = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).role(Role.DECODE).pdSecret("s2"))) {
            JsonNode params = json(post(prefill, "/v1/completions", prefillBody(LONG_PROMPT), "x-request-id", "r"))
                .get("kv_transfer_params");
            assertTrue(params.has("sim_signature"));
            assertEquals(200, post(decode, "/v1/completions", decodeBody(LONG_PROMPT, params), "x-request-id", "r")
                .statusCode());
            assertEquals(400, post(stranger, "/v1/completions", decodeBody(LONG_PROMPT, params), "x-request-id", "r")
                .statusCode());
        }
    }

    static String sglangBody(int bootstrapPort, long room, boolean stream) {
        return "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + LONG_PROMPT + "\"}],"
            + "\"max_tokens\":5,\"stream\":" + stream + ",\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":"
            + bootstrapPort + ",\"bootstrap_room\":" + room + "}";
    }

    static CompletableFuture<HttpResponse<String>> postAsync(EngineSimulator sim, String body) {
        return SimHttp.CLIENT.sendAsync(HttpRequest.newBuilder(URI.create(sim.baseUrl() + "/v1/chat/completions"))
            .header("content-type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void sglangConcurrentLegsRendezvous() throws Exception {
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.PREFILL)
                 .bootstrapPort(0));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.DECODE))) {
            int bp = prefill.bootstrapPort();
            assertTrue(bp > 0);
            for (long room : new long[] {42L, Long.MAX_VALUE}) {
                String body = sglangBody(bp, room, true);
                CompletableFuture<HttpResponse<String>> d = postAsync(decode, body);
                CompletableFuture<HttpResponse<String>> p = postAsync(prefill, body);
                HttpResponse<String> dr = d.get();
                assertEquals(200, dr.statusCode(), dr.body());
                assertTrue(dr.body().endsWith("data: [DONE]\n\n"));
                assertEquals(200, p.get().statusCode());
            }
            // counters move right after the last byte is written: wait for them, not for time
            FaultInjectionTest.awaitCounter(decode, "generations_finished", 2);
            FaultInjectionTest.awaitCounter(prefill, "generations_finished", 2);
            assertEquals(2, prefill.stats().get("pd_rendezvous"));
            assertEquals(2, decode.stats().get("pd_kv_received"));
            // the prefill produced only the first token; the decode produced the answer
            assertEquals(2, prefill.stats().get("completion_tokens"));
            assertEquals(10, decode.stats().get("completion_tokens"));
            JsonNode nonStream = json(postAsync(decode, sglangBody(bp, 7, false)).thenCombine(
                postAsync(prefill, sglangBody(bp, 7, false)), (a, b) -> a).get());
            assertTrue(nonStream.at("/usage/prompt_tokens_details/cached_tokens").asInt() > 0);
        }
    }

    @Test
    void b12_sglangLegsTakeBootstrapListsAsTheGatewaySendsThemForNAboveOne() throws Exception {
        // PdBodies.sglang: chat n > 1 and batched prompts carry one host, port and room per sequence.
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.PREFILL)
                 .bootstrapPort(0));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.DECODE))) {
            int bp = prefill.bootstrapPort();
            String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"" + LONG_PROMPT + "\"}],"
                + "\"max_tokens\":5,\"n\":2,\"stream\":false,\"bootstrap_host\":[\"127.0.0.1\",\"127.0.0.1\"],"
                + "\"bootstrap_port\":[" + bp + "," + bp + "],\"bootstrap_room\":[31,32]}";
            CompletableFuture<HttpResponse<String>> d = postAsync(decode, body);
            CompletableFuture<HttpResponse<String>> p = postAsync(prefill, body);
            HttpResponse<String> dr = d.get();
            assertEquals(200, dr.statusCode(), dr.body());
            assertEquals(200, p.get().statusCode(), p.get().body());
            assertEquals(2, json(dr).get("choices").size(), dr.body());
            FaultInjectionTest.awaitCounter(prefill, "generations_finished", 1);
            assertEquals(1, prefill.stats().get("pd_rendezvous"));
        }
    }

    @Test
    void sglangSequentialProxyDeadlocksUntilTheBootstrapTimeout() throws Exception {
        try (EngineSimulator prefill = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.PREFILL)
                 .bootstrapPort(0).bootstrapTimeoutMs(300));
             EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.DECODE)
                 .bootstrapTimeoutMs(300))) {
            // prefill first, waiting for its answer before sending the decode: it never comes
            HttpResponse<String> p = post(prefill, "/v1/chat/completions", sglangBody(prefill.bootstrapPort(), 9, false));
            assertEquals(500, p.statusCode());
            assertTrue(json(p).get("message").asText().contains("never joined bootstrap_room 9"), p.body());
            assertEquals(1, prefill.stats().get("pd_bootstrap_timeouts"));
            assertEquals(0, prefill.stats().get("generations_started"), "it never ran");
            // decode alone: joins, but no KV ever arrives
            HttpResponse<String> d = post(decode, "/v1/chat/completions", sglangBody(prefill.bootstrapPort(), 10, false));
            assertEquals(500, d.statusCode());
            assertEquals(1, decode.stats().get("pd_bootstrap_timeouts"));
        }
    }

    @Test
    void sglangLegsNeedBootstrapFieldsAndAReachableBootstrapServer() throws Exception {
        try (EngineSimulator decode = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).role(Role.DECODE))) {
            HttpResponse<String> missing = post(decode, "/v1/chat/completions", SimHttp.chat("m", "x", ""));
            assertEquals(400, missing.statusCode());
            assertTrue(json(missing).get("message").asText().contains("bootstrap_room"));
            try (RefusedPort closed = TestPorts.refused()) {
                HttpResponse<String> unreachable = post(decode, "/v1/chat/completions", sglangBody(closed.port(), 1, false));
                assertEquals(500, unreachable.statusCode());
            }
            assertEquals(1, decode.stats().get("pd_bootstrap_unreachable"));
        }
        try (EngineSimulator both = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG))) {
            assertEquals(200, post(both, "/v1/chat/completions", sglangBody(1, 1, false)).statusCode(),
                "a non-disaggregated server ignores bootstrap fields");
        }
    }
}
