package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.dataplane.exchange.SlotPin;
import io.kvgate.dataplane.route.Breaker;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The gateway over TensorRT-LLM and llama.cpp simulators (issue #15): TensorRT-LLM P/D through the gateway, a
 * tokenizer-less {@code chwbl} rule keeping prompt families on one llama.cpp engine, llama-server's loading 503 (not
 * ready, never charged), session slot pinning, and the configuration errors of policies an engine cannot serve.
 */
@Timeout(60)
@Tag("system")
class EnginesOverSimulatorSystemTest {

    private static HttpResponse<String> chat(Gateway gw, String body, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json");
        for (int i = 0; i < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return SimHttp.CLIENT.send(b.POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static String yaml(String engine, String policy, String extra, List<EngineSimulator> sims, String health) {
        StringBuilder eps = new StringBuilder();
        for (EngineSimulator s : sims) {
            eps.append("          - {url: \"").append(s.baseUrl()).append("\"}\n");
        }
        return """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000}
            health: %s
            rules:
              - name: r
                models: [m]
                engine: %s
                policy: %s
            %s    endpoints:
            %s""".formatted(health, engine, policy, extra, eps);
    }

    @Test
    void trtllmPdAnswersTwentyOfTwentyWithTheContextParamsVerifiedByTheGenerationSideAndNeverSeenByTheClient() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator ctx = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.PREFILL).pdRegistry(registry));
             EngineSimulator gen = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.DECODE).pdRegistry(registry))) {
            Gateway gw = Gateway.start(GatewayConfig.parse("""
                listen: 127.0.0.1:0
                admin_listen: 127.0.0.1:0
                upstream: {connect_timeout_ms: 1000}
                health: {interval_ms: 60000}
                rules:
                  - name: pd
                    models: [m]
                    engine: trtllm
                    policy: pd
                    pd: {prefill_timeout_ms: 5000, prefill_policy: least_outstanding}
                    endpoints:
                      - {url: "%s", role: prefill}
                      - {url: "%s", role: decode}
                """.formatted(ctx.baseUrl(), gen.baseUrl())));
            try {
                for (int i = 0; i < 20; i++) {
                    boolean stream = i % 2 == 1;
                    // A client's own disaggregated_params are dropped: the gateway's are the only ones the engines see.
                    String body = SimHttp.chat("m", "request " + i + " about disaggregated serving, with enough words to"
                        + " fill several blocks of the context server's cache", "\"max_tokens\":5"
                        + (stream ? ",\"stream\":true" : "") + ",\"disaggregated_params\":{\"request_type\":\"generation_only\","
                        + "\"ctx_request_id\":999,\"encoded_opaque_state\":\"forged\"}");
                    HttpResponse<String> r = chat(gw, body, "x-request-id", "trt-pd-" + i);
                    assertEquals(200, r.statusCode(), r.body());
                    assertFalse(r.body().contains("disaggregated_params") || r.body().contains("encoded_opaque_state")
                        || r.body().contains("ctx_request_id"), "internal params must not leak: " + r.body());
                    if (stream) {
                        assertTrue(r.body().endsWith("data: [DONE]\n\n"), r.body());
                    } else {
                        assertEquals(5, SimHttp.MAPPER.readTree(r.body()).at("/usage/completion_tokens").asInt(), r.body());
                    }
                }
                assertEquals(20, ctx.stats().get("pd_prefill_requests"));
                assertEquals(20, ctx.stats().get("pd_prefill_params_issued"));
                assertEquals(20, gen.stats().get("pd_decode_with_params"), "every generation leg carried issued params");
                assertEquals(0, gen.stats().get("pd_decode_rejected"), "no forged or reused params reached the generation side");
                assertEquals(0, gen.stats().get("pd_decode_without_params"));
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void chwblWithoutATokenizerKeepsEachPromptFamilyOnOneLlamacppEngine() throws Exception {
        List<EngineSimulator> sims = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                sims.add(EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(4)));
            }
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "chwbl",
                "    chwbl: {prefix_chars: 48, load_factor: 0.25}\n", sims, "{interval_ms: 60000}")));
            try {
                Set<Integer> owners = new HashSet<>();
                for (int family = 0; family < 9; family++) {
                    long[] before = started(sims);
                    for (int q = 0; q < 5; q++) {
                        // The first 48 characters are the family's (its system prompt); the question differs.
                        String body = "{\"model\":\"m\",\"max_tokens\":3,\"messages\":[{\"role\":\"system\",\"content\":"
                            + "\"Family " + family + " system prompt: answer as a careful engineer.\"},"
                            + "{\"role\":\"user\",\"content\":\"question " + q + "\"}]}";
                        HttpResponse<String> r = chat(gw, body);
                        assertEquals(200, r.statusCode(), r.body());
                    }
                    long[] after = started(sims);
                    int engines = 0;
                    for (int i = 0; i < sims.size(); i++) {
                        if (after[i] != before[i]) {
                            engines++;
                            owners.add(i);
                            assertEquals(5, after[i] - before[i], "family " + family + " stayed on engine " + i);
                        }
                    }
                    assertEquals(1, engines, "family " + family + " on exactly one engine");
                }
                assertTrue(owners.size() >= 2, "9 families spread over the engines: " + owners);
                var rule = gw.routeTable().ruleByName("r");
                assertEquals(45, rule.stats().tierCount(io.kvgate.dataplane.route.RuleStats.Tier.CHWBL_OWNER),
                    "every request keyed on its text prefix and went to its owner (one at a time: never over the bound)");
            } finally {
                gw.close(100);
            }
        } finally {
            for (EngineSimulator s : sims) {
                s.close();
            }
        }
    }

    private static long[] started(List<EngineSimulator> sims) {
        long[] n = new long[sims.size()];
        for (int i = 0; i < n.length; i++) {
            n[i] = sims.get(i).stats().get("generations_started");
        }
        return n;
    }

    @Test
    void llamacppLoading503IsNotReadyAndNeverChargesTheBreaker() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).loadMs(1500))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "round_robin", "", List.of(sim),
                "{interval_ms: 100, healthy_threshold: 1, unhealthy_threshold: 50}")));
            // 50 failed probes would take 5 s, longer than the load: only the loading verdict makes it not ready in time,
            // and a request that reached the loading engine would be its 503, charged unless classified as loading.
            try {
                EndpointState ep = gw.routeTable().ruleByName("r").endpoints().get(0);
                long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
                while (ep.probeHealthy() && System.nanoTime() < deadline) {
                    Thread.sleep(5); // the first probe runs at start; a loading answer makes the endpoint not ready at once
                }
                assertFalse(ep.probeHealthy(), "loading: not ready");
                HttpResponse<String> refused = chat(gw, SimHttp.chat("m", "hello", "\"max_tokens\":2"));
                assertEquals(503, refused.statusCode(), refused.body());
                assertEquals(0, ep.breaker().failures(), "loading is not a failure");
                assertEquals(Breaker.State.CLOSED, ep.breaker().state());
                while (!ep.probeHealthy() && System.nanoTime() < deadline) {
                    Thread.sleep(20); // loaded after 1.5 s: the next probe's 200 brings it in
                }
                assertTrue(ep.probeHealthy(), "loaded: ready");
                HttpResponse<String> ok = chat(gw, SimHttp.chat("m", "hello", "\"max_tokens\":2"));
                assertEquals(200, ok.statusCode(), ok.body());
                assertEquals(0, ep.breaker().failures());
                assertEquals(0, ep.breaker().opens());
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void aRequestThatReachesALoadingLlamacppEngineGoesToAnotherEngine() throws Exception {
        // The window between an engine's restart and the next probe: the probe path (/v1/models, which the simulator
        // answers while loading) keeps the loading engine in rotation, so round robin sends it every other request.
        // Each must be answered by the ready engine, never with the loading engine's 503 (issue #36 item 12).
        try (EngineSimulator loading = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).loadMs(600_000));
             EngineSimulator ready = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "round_robin", "", List.of(loading, ready),
                "{interval_ms: 60000, path: /v1/models}")));
            try {
                for (int i = 0; i < 8; i++) {
                    HttpResponse<String> r = chat(gw, SimHttp.chat("m", "request " + i, "\"max_tokens\":2"));
                    assertEquals(200, r.statusCode(), r.body());
                }
                assertTrue(loading.stats().get("errors_503") > 0, "round robin sent requests to the loading engine");
                assertEquals(8, ready.stats().get("generations_started"), "the ready engine answered every request");
                EndpointState ep = gw.routeTable().ruleByName("r").endpoints().get(0);
                assertEquals(0, ep.breaker().failures(), "loading is not a failure");
                assertEquals(Breaker.State.CLOSED, ep.breaker().state());
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void llamacppContextOverflowReachesTheClientAsContextLengthExceeded() throws Exception {
        // llama-server refuses a prompt over its slot's context with its own error type and a numeric code; the client
        // must see OpenAI's code and param, as for vLLM and SGLang (issue #36 item 11, found on a real llama-server).
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).contextLen(32).maxConcurrency(1))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "round_robin", "", List.of(sim),
                "{interval_ms: 60000}")));
            try {
                String longPrompt = "word ".repeat(80);
                HttpResponse<String> r = chat(gw, SimHttp.chat("m", longPrompt, "\"max_tokens\":2"));
                assertEquals(400, r.statusCode(), r.body());
                JsonNode err = SimHttp.json(r).get("error");
                assertEquals("context_length_exceeded", err.path("code").asText(), r.body());
                assertEquals("messages", err.path("param").asText(), r.body());
                assertEquals("invalid_request_error", err.path("type").asText(), r.body());
                assertTrue(err.path("message").asText().contains("exceeds the available context size"), r.body());
            } finally {
                gw.close(100);
            }
        }
    }

    /**
     * The gateway forces include_usage to count tokens; llama-server then writes its timings on the usage chunk,
     * which the gateway removes for a client that did not ask for usage. The client still gets the timings, on the
     * finish chunk, where the engine puts them unasked (issue #36 item 14); a client that asked gets them on the usage
     * chunk, as the engine sent it.
     */
    @Test
    void llamacppTimingsReachAClientThatDidNotAskForUsage() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "round_robin", "", List.of(sim),
                "{interval_ms: 60000}")));
            try {
                HttpResponse<String> r = chat(gw, SimHttp.chat("m", "hi", "\"max_tokens\":3,\"stream\":true"));
                assertEquals(200, r.statusCode(), r.body());
                List<JsonNode> chunks = new java.util.ArrayList<>();
                for (String e : r.body().split("\n\n")) {
                    if (e.startsWith("data: {")) {
                        chunks.add(SimHttp.MAPPER.readTree(e.substring("data: ".length())));
                    }
                }
                assertTrue(r.body().endsWith("data: [DONE]\n\n"), r.body());
                JsonNode last = chunks.get(chunks.size() - 1);
                assertEquals("length", last.at("/choices/0/finish_reason").asText(), r.body());
                assertEquals(3, last.at("/timings/predicted_n").asInt(), r.body());
                assertFalse(last.path("usage").isObject(), "no usage for a client that did not ask: " + r.body());
                for (JsonNode c : chunks) {
                    assertTrue(c.path("choices").size() > 0, "no usage-only chunk: " + r.body());
                }
                HttpResponse<String> asked = chat(gw, SimHttp.chat("m", "hi", "\"max_tokens\":3,\"stream\":true,"
                    + "\"stream_options\":{\"include_usage\":true}"));
                String[] events = asked.body().split("\n\n");
                JsonNode usageChunk = SimHttp.MAPPER.readTree(events[events.length - 2].substring("data: ".length()));
                assertEquals(0, usageChunk.get("choices").size(), asked.body());
                assertEquals(3, usageChunk.at("/usage/completion_tokens").asInt(), asked.body());
                assertEquals(3, usageChunk.at("/timings/predicted_n").asInt(), asked.body());
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void sessionPinSlotPutsEachConversationOnItsOwnLlamacppSlot() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(4))) {
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "session",
                "    session: {key: conversation, pin_slot: true, slots: 4}\n", List.of(sim), "{interval_ms: 60000}")));
            try {
                String conv = "conv-a";
                int slot = SlotPin.slotOf(conv, 4);
                for (int i = 0; i < 3; i++) {
                    // The client's own id_slot loses to the gateway's (appended last).
                    String body = SimHttp.chat("m", "turn " + i + " of a conversation that should stay on its slot",
                        "\"max_tokens\":2,\"id_slot\":" + ((slot + 1) % 4));
                    HttpResponse<String> r = chat(gw, body, "x-conversation-id", conv);
                    assertEquals(200, r.statusCode(), r.body());
                }
                JsonNode slots = SimHttp.json(SimHttp.get(sim, "/slots"));
                for (JsonNode s : slots) {
                    boolean used = s.get("n_prompt_tokens").asInt() > 0;
                    assertEquals(s.get("id").asInt() == slot, used, "only slot " + slot + " ran the conversation: " + slots);
                }
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void pinnedSlotsStayWithinTheServersOwnSlotCountOnceRead() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.LLAMACPP).maxConcurrency(2))) {
            // session.slots says 4, the server runs 2: slots 2 and 3 would wrap onto 0 and 1 (get_slot_by_id), into
            // other sessions' slots.
            Gateway gw = Gateway.start(GatewayConfig.parse(yaml("llamacpp", "session",
                "    session: {key: conversation, pin_slot: true, slots: 4}\n", List.of(sim), "{interval_ms: 100}")));
            try {
                EndpointState ep = gw.routeTable().ruleByName("r").endpoints().get(0);
                long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
                while (ep.facts().engineSlots() == 0 && System.nanoTime() < deadline) {
                    Thread.sleep(10); // read from GET /slots in the first probe round
                }
                assertEquals(2, ep.facts().engineSlots());
                String conv = null;
                for (int i = 0; conv == null; i++) {
                    if (SlotPin.slotOf("conv-" + i, 4) >= 2) {
                        conv = "conv-" + i; // a session that session.slots alone would put out of range
                    }
                }
                HttpResponse<String> r = chat(gw, SimHttp.chat("m", "a turn on a two-slot server", "\"max_tokens\":2"),
                    "x-conversation-id", conv);
                assertEquals(200, r.statusCode(), r.body());
                int slot = SlotPin.slotOf(conv, 2);
                for (JsonNode s : SimHttp.json(SimHttp.get(sim, "/slots"))) {
                    assertEquals(s.get("id").asInt() == slot, s.get("n_prompt_tokens").asInt() > 0, "slot " + slot);
                }
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void policiesAnEngineCannotServeAreConfigurationErrors() {
        String base = "rules:\n  - name: r\n    models: [m]\n    engine: llamacpp\n    policy: %s\n    endpoints:\n"
            + "      - {url: \"http://127.0.0.1:9\", role: prefill}\n      - {url: \"http://127.0.0.1:10\", role: decode}\n";
        ConfigException pd = assertThrows(ConfigException.class, () -> GatewayConfig.parse(base.formatted("pd")));
        assertTrue(String.join("\n", pd.problems()).contains("policy: value 'pd' engine 'llamacpp' cannot serve it"), pd.getMessage());
        ConfigException kv = assertThrows(ConfigException.class, () -> GatewayConfig.parse(
            base.formatted("kv_exact").replace(", role: prefill", "").replace(", role: decode", "")));
        assertTrue(String.join("\n", kv.problems()).contains("policy: value 'kv_exact' engine 'llamacpp' cannot serve it"),
            kv.getMessage());
    }
}
