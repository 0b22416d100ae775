package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.io.InputStream;
import java.math.BigInteger;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code --dialect trtllm}: trtllm-serve's drained {@code /kv_cache_events} (shapes checked against the fixtures of
 * KVCacheEventSerializer's output), {@code disaggregated_params} P/D, its error and health shapes.
 */
@Timeout(60)
@Tag("system")
class TrtllmDialectTest {
    static JsonNode fixtures() throws Exception {
        try (InputStream in = TrtllmDialectTest.class.getResourceAsStream("trtllm/kv_cache_events.json")) {
            return SimHttp.MAPPER.readTree(in).get("events");
        }
    }

    /** Every key path of a JSON value (arrays contribute their elements' paths under "[]"). */
    static Set<String> shape(JsonNode n, String prefix, Set<String> out) {
        if (n.isObject()) {
            Iterator<String> it = n.fieldNames();
            while (it.hasNext()) {
                String f = it.next();
                out.add(prefix + "." + f);
                shape(n.get(f), prefix + "." + f, out);
            }
        } else if (n.isArray()) {
            for (JsonNode e : n) {
                shape(e, prefix + "[]", out);
            }
        }
        return out;
    }

    static JsonNode fixture(String type) throws Exception {
        for (JsonNode e : fixtures()) {
            if (e.at("/data/type").asText().equals(type) && !e.has("attention_dp_rank")) {
                return e;
            }
        }
        throw new AssertionError("no fixture of type " + type);
    }

    static JsonNode drain(EngineSimulator sim) throws Exception {
        HttpResponse<String> r = post(sim, "/kv_cache_events", "");
        assertEquals(200, r.statusCode());
        return json(r);
    }

    static String tokenPrompt(int from, int count) {
        return MetricsTest.tokens(from, count);
    }

    @Test
    void eventsAreDrainedWithTheSerializersShapesAndUnsignedHashes() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).blockSize(4).cacheBlocks(4))) {
            JsonNode start = drain(sim);
            assertEquals(1, start.size());
            assertEquals(shape(fixture("created"), "", new TreeSet<>()), shape(start.get(0), "", new TreeSet<>()));
            assertEquals(0, start.get(0).get("event_id").asLong());
            assertEquals(8192, start.get(0).get("window_size").asInt());
            assertEquals(0, drain(sim).size(), "a read removes what it returned");

            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + tokenPrompt(1, 9) + ",\"max_tokens\":1}");
            JsonNode stored = drain(sim);
            assertEquals(1, stored.size(), "one stored event for the run of new blocks");
            JsonNode e = stored.get(0);
            assertEquals(1, e.get("event_id").asLong());
            assertEquals(shape(fixture("stored"), "", new TreeSet<>()), shape(e, "", new TreeSet<>()));
            assertTrue(e.at("/data/parent_hash").isNull());
            JsonNode blocks = e.at("/data/blocks");
            assertEquals(2, blocks.size(), "two full blocks of 4 tokens, the 9th token is not announced");
            assertEquals(List.of(5, 6, 7, 8), tokenIds(blocks.get(1)));
            assertTrue(blocks.get(0).get("block_hash").isIntegralNumber());
            assertTrue(new BigInteger(blocks.get(0).get("block_hash").asText()).signum() >= 0, "size_t: unsigned");

            // a second prompt evicts both blocks (capacity 4): the removal names the engine's hashes
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + tokenPrompt(100, 16) + ",\"max_tokens\":1}");
            JsonNode next = drain(sim);
            List<String> types = new ArrayList<>();
            for (JsonNode ev : next) {
                types.add(ev.at("/data/type").asText());
            }
            assertEquals(List.of("removed", "stored"), types);
            assertEquals(shape(fixture("removed"), "", new TreeSet<>()), shape(next.get(0), "", new TreeSet<>()));
            assertEquals(Set.of(blocks.get(0).get("block_hash").asText(), blocks.get(1).get("block_hash").asText()),
                Set.of(next.get(0).at("/data/block_hashes/0").asText(), next.get(0).at("/data/block_hashes/1").asText()));
            assertEquals(2, next.get(0).get("event_id").asLong());
            assertEquals(3, next.get(1).get("event_id").asLong());

            HttpResponse<String> wrongMethod = get(sim, "/kv_cache_events");
            assertEquals(405, wrongMethod.statusCode());
        }
    }

    static List<Integer> tokenIds(JsonNode block) {
        List<Integer> ids = new ArrayList<>();
        for (JsonNode t : block.get("tokens")) {
            assertEquals("unique_token", t.get("type").asText());
            ids.add(t.get("token_id").asInt());
        }
        return ids;
    }

    @Test
    void aFullBufferDropsTheOldestEventsSoIdsJumpAndARestartStartsOver() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).blockSize(4).kvEventBuffer(2))) {
            for (int i = 0; i < 3; i++) {
                post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + tokenPrompt(1000 * (i + 1), 4)
                    + ",\"max_tokens\":1}");
            }
            JsonNode kept = drain(sim);
            assertEquals(2, kept.size());
            assertEquals(2, kept.get(0).get("event_id").asLong(), "events 0 (created) and 1 were dropped");
            assertEquals(3, kept.get(1).get("event_id").asLong());

            String prompt = "{\"model\":\"m\",\"prompt\":" + tokenPrompt(1000, 4) + ",\"max_tokens\":1}";
            String before = kept.get(0).at("/data/blocks/0/block_hash").asText();
            sim.restart();
            JsonNode fresh = drain(sim);
            assertEquals(0, fresh.get(0).get("event_id").asLong(), "a new process counts from 0 again");
            assertEquals("created", fresh.get(0).at("/data/type").asText());
            post(sim, "/v1/completions", prompt);
            JsonNode again = drain(sim);
            assertNotEquals(before, again.get(0).at("/data/blocks/0/block_hash").asText(),
                "internal hashes change with the process: only the tokens identify a block");
        }
    }

    @Test
    void attentionDpRanksAreLabelled() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).blockSize(4).dpRanks(2))) {
            JsonNode created = drain(sim);
            assertEquals(2, created.size());
            assertEquals(0, created.get(0).get("attention_dp_rank").asInt());
            assertEquals(1, created.get(1).get("attention_dp_rank").asInt());
            assertEquals(0, created.get(1).get("event_id").asLong(), "ids count per rank");
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + tokenPrompt(1, 4) + ",\"max_tokens\":1}",
                "x-data-parallel-rank", "1");
            assertEquals(1, drain(sim).get(0).get("attention_dp_rank").asInt());
        }
    }

    @Test
    void disaggregatedContextThenGeneration() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator ctx = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.PREFILL)
                .pdRegistry(registry));
             EngineSimulator gen = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.DECODE)
                 .pdRegistry(registry))) {
            String prompt = "\"prompt\":" + tokenPrompt(1, 40);
            HttpResponse<String> c = post(ctx, "/v1/completions", "{\"model\":\"m\"," + prompt + ",\"max_tokens\":1,"
                + "\"disaggregated_params\":{\"request_type\":\"context_only\"}}");
            assertEquals(200, c.statusCode(), c.body());
            JsonNode cb = json(c);
            JsonNode params = cb.at("/choices/0/disaggregated_params");
            assertEquals("context_only", params.get("request_type").asText());
            assertTrue(params.get("ctx_request_id").isIntegralNumber());
            assertEquals(1, params.get("first_gen_tokens").size());
            assertFalse(params.get("encoded_opaque_state").asText().isEmpty());
            assertEquals(40, cb.get("prompt_token_ids").size(), "a context-only answer carries the prompt ids");
            assertEquals(1, cb.at("/usage/completion_tokens").asInt());
            assertFalse(cb.has("kv_transfer_params"));

            ObjectNode genParams = params.deepCopy();
            genParams.put("request_type", "generation_only");
            String genBody = "{\"model\":\"m\"," + prompt + ",\"max_tokens\":5,\"disaggregated_params\":" + genParams + "}";
            JsonNode g = json(post(gen, "/v1/completions", genBody));
            assertEquals(5, g.at("/usage/completion_tokens").asInt());
            assertEquals(40, g.at("/usage/prompt_tokens_details/cached_tokens").asInt(), "the KV came from the context");
            assertFalse(g.at("/choices/0").has("disaggregated_params"));

            HttpResponse<String> replayed = post(gen, "/v1/completions", genBody);
            assertEquals(500, replayed.statusCode(), "the opaque state is used once");
            assertEquals("{\"object\":\"error\",\"message\":\"KV cache transfer failed: encoded_opaque_state was not "
                + "issued by a known context server or was already used" + PdRegistry.IN_MEMORY_HINT
                + "\",\"type\":\"InternalServerError\",\"param\":null,"
                + "\"code\":500}", replayed.body());
            assertEquals(400, post(gen, "/v1/completions", "{\"model\":\"m\"," + prompt
                + ",\"disaggregated_params\":{\"request_type\":\"context_only\"}}").statusCode(), "wrong role");
        }
    }

    @Test
    void unknownFieldsAreRefusedLikePydanticExtraForbid() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM))) {
            HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m", "hi",
                "\"kv_transfer_params\":{\"do_remote_decode\":true}"));
            assertEquals(400, r.statusCode());
            String error = json(r).get("error").asText();
            assertTrue(error.contains("'extra_forbidden'") && error.contains("'kv_transfer_params'"), error);
            assertEquals(1, json(r).size(), "{\"error\": text}, not an OpenAI error object");
            HttpResponse<String> malformed = post(sim, "/v1/chat/completions", "{\"model\":");
            assertEquals(400, malformed.statusCode());
            assertTrue(json(malformed).get("error").isTextual());
            assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "hi", "\"max_tokens\":1")).statusCode());
        }
    }

    @Test
    void healthModelsMetricsAndTheAbortedStream() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM))) {
            assertEquals("{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\",\"created\":1700000000,"
                + "\"owned_by\":\"tensorrt_llm\"}]}", get(sim, "/v1/models").body());
            JsonNode stats = json(get(sim, "/metrics"));
            assertEquals(0, stats.at("/0/numActiveRequests").asInt());
            assertEquals(32, stats.at("/0/kvCacheStats/tokensPerBlock").asInt());
            assertEquals(200, get(sim, "/health").statusCode());
            assertEquals("Generation health check OK", get(sim, "/health_generate").body());

            sim.injectFaults("{\"error_after_chunks\":1}");
            String cut;
            try {
                cut = post(sim, "/v1/chat/completions", chat("m", "hi", "\"stream\":true,\"max_tokens\":5")).body();
            } catch (java.io.IOException aborted) {
                cut = ""; // the JDK client may report the aborted chunked body as an error
            }
            assertFalse(cut.contains("[DONE]") || cut.contains("\"error\""), "no error frame, no [DONE]: " + cut);

            sim.injectFaults("{\"unhealthy\":true}");
            HttpResponse<String> down = get(sim, "/health");
            assertEquals(503, down.statusCode());
            assertEquals("LLM is unavailable. Please check the server logs for more details.", down.body());
            assertEquals(500, get(sim, "/health_generate").statusCode());
        }
    }
}
