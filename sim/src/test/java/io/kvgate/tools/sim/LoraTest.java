package io.kvgate.tools.sim;

import static io.kvgate.tools.sim.SimHttp.chat;
import static io.kvgate.tools.sim.SimHttp.get;
import static io.kvgate.tools.sim.SimHttp.json;
import static io.kvgate.tools.sim.SimHttp.post;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.EventForm;
import java.net.http.HttpResponse;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.msgpack.core.MessagePack;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.MapValue;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/**
 * LoRA adapters as each engine serves them: vLLM under the adapter's own name (listed in /v1/models with
 * {@code parent}) with the adapter name hashed into every block key; SGLang as {@code base:adapter} or
 * {@code lora_path}, with its page hash unchanged.
 */
@Timeout(60)
@Tag("system")
class LoraTest {
    static final int[] TOKENS_1_32 = BlockKeyerTest.range(1, 32, 1);

    @Test
    void vllmLoraBlockKeysMatchTheContractVectorsAndTheGatewayHasher() {
        long[] sim = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(TOKENS_1_32, 16, null, "my-lora");
        // engine-contracts §3.3: sha256_cbor, seed "0", tokens 1..32, bs 16, LoRA name "my-lora"
        assertArrayEquals(new long[] {Long.parseUnsignedLong("15444946753610453501"),
            Long.parseUnsignedLong("6571079245177515926")}, sim);
        for (String salt : new String[] {null, "salt-1"}) {
            for (HashAlgo algo : List.of(HashAlgo.SHA256_CBOR, HashAlgo.XXHASH_CBOR)) {
                long[] gateway = new long[2];
                assertEquals(2, new BlockHasher(BlockHashSpec.vllm(algo, 16, "0", "my-lora"))
                    .hash(TOKENS_1_32, 32, salt, gateway));
                assertArrayEquals(gateway, BlockKeyer.forAlgo(algo.configName(), "0")
                    .blockKeys(TOKENS_1_32, 16, salt, "my-lora"), algo + " salt=" + salt);
            }
        }
        long[] base = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(TOKENS_1_32, 16, null, null);
        assertTrue(base[0] != sim[0] && base[1] != sim[1], "base-model keys never equal adapter keys");
        assertArrayEquals(BlockKeyer.forAlgo("sha256_sglang", "").blockKeys(TOKENS_1_32, 16, null, null),
            BlockKeyer.forAlgo("sha256_sglang", "").blockKeys(TOKENS_1_32, 16, null, "my-lora"),
            "SGLang's page hash ignores the adapter");
    }

    @Test
    void vllmMapEventsCarryTheAdapterIdNameAndExtraKeys() throws Exception {
        KvEventEncoder enc = new KvEventEncoder(EventForm.MAP, true, false);
        long[] keys = BlockKeyer.forAlgo("sha256_cbor", "0").blockKeys(TOKENS_1_32, 16, "s", "my-lora");
        enc.blockStored(keys, 0, 2, false, 0, TOKENS_1_32, 16, "s", 3, "my-lora");
        ArrayValue events = MessagePack.newDefaultUnpacker(enc.finishBatch(1.0, 0)).unpackValue().asArrayValue()
            .get(1).asArrayValue();
        MapValue stored = events.get(0).asMapValue();
        assertEquals(3, field(stored, "lora_id").asIntegerValue().asInt());
        assertEquals("my-lora", field(stored, "lora_name").asStringValue().asString());
        ArrayValue extra = field(stored, "extra_keys").asArrayValue();
        assertEquals("[\"my-lora\",\"s\"]", extra.get(0).toJson(), "block 0: adapter, then the salt");
        assertEquals("[\"my-lora\"]", extra.get(1).toJson(), "later blocks: the adapter only");

        KvEventEncoder arr = new KvEventEncoder(EventForm.ARRAY, true, false);
        arr.blockStored(keys, 0, 2, false, 0, TOKENS_1_32, 16, "s", 3, "my-lora");
        ArrayValue positional = MessagePack.newDefaultUnpacker(arr.finishBatch(1.0, 0)).unpackValue().asArrayValue()
            .get(1).asArrayValue().get(0).asArrayValue();
        assertEquals(3, positional.get(5).asIntegerValue().asInt(), "lora_id after block_size");
        assertEquals("my-lora", positional.get(7).asStringValue().asString(), "lora_name after medium");
    }

    private static Value field(MapValue m, String name) {
        return m.map().get(ValueFactory.newString(name));
    }

    @Test
    void vllmServesTheAdapterUnderItsNameAndItsBlocksNeverServeTheBase() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).lora("my-lora"))) {
            JsonNode models = json(get(sim, "/v1/models"));
            assertEquals(2, models.get("data").size());
            JsonNode card = models.at("/data/1");
            assertEquals("my-lora", card.get("id").asText());
            assertEquals("m", card.get("parent").asText(), "adapter cards name the base model as parent");
            assertTrue(card.get("max_model_len").isNull());
            assertTrue(models.at("/data/0/parent").isNull());
            assertEquals(8192, models.at("/data/0/max_model_len").asInt());

            String prompt = Arrays.toString(BlockKeyerTest.range(1, 48, 1)).replace(" ", "");
            String lora = "{\"model\":\"my-lora\",\"prompt\":" + prompt + ",\"max_tokens\":1}";
            String base = "{\"model\":\"m\",\"prompt\":" + prompt + ",\"max_tokens\":1}";
            JsonNode first = json(post(sim, "/v1/completions", lora));
            assertEquals("my-lora", first.get("model").asText());
            assertEquals(0, first.at("/usage/prompt_tokens_details/cached_tokens").asInt());
            assertEquals(0, json(post(sim, "/v1/completions", base)).at("/usage/prompt_tokens_details/cached_tokens")
                .asInt(), "the base model must not hit the adapter's blocks");
            assertEquals(32, json(post(sim, "/v1/completions", lora)).at("/usage/prompt_tokens_details/cached_tokens")
                .asInt(), "the adapter hits its own blocks (the last token is always recomputed)");
            assertEquals(6, sim.cachedBlocks(0), "3 adapter blocks + 3 base blocks");

            HttpResponse<String> unknown = post(sim, "/v1/completions", "{\"model\":\"m:my-lora\",\"prompt\":\"x\"}");
            assertEquals(404, unknown.statusCode(), "vLLM has no base:adapter syntax");
        }
    }

    @Test
    void sglangTakesBaseColonAdapterOverLoraPath() throws Exception {
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).lora("sql", "py"))) {
            HttpResponse<String> r = post(sim, "/v1/chat/completions", chat("m:sql", "hi", "\"max_tokens\":2"));
            assertEquals(200, r.statusCode());
            assertEquals("m:sql", json(r).get("model").asText(), "SGLang echoes the requested name");
            assertEquals("sql", lastLora(sim));
            assertEquals(200, post(sim, "/v1/chat/completions", chat("m", "hi", "\"lora_path\":\"py\",\"max_tokens\":1"))
                .statusCode());
            assertEquals("py", lastLora(sim));
            post(sim, "/v1/chat/completions", chat("m:sql", "hi", "\"lora_path\":\"py\",\"max_tokens\":1"));
            assertEquals("sql", lastLora(sim), "the adapter in `model` wins over lora_path");
            assertEquals(200, post(sim, "/v1/chat/completions", chat("m: ", "hi", "\"max_tokens\":1")).statusCode(),
                "an empty adapter after the colon means the base model");

            HttpResponse<String> missing = post(sim, "/v1/chat/completions", chat("m:nope", "hi", ""));
            assertEquals(400, missing.statusCode());
            assertEquals("{\"object\":\"error\",\"message\":\"Got LoRA adapter that has never been loaded: nope\","
                + "\"type\":\"BadRequestError\",\"param\":null,\"code\":400}", missing.body());
        }
        try (EngineSimulator noLora = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG))) {
            HttpResponse<String> r = post(noLora, "/v1/chat/completions", chat("myorg/llama3:v2", "hi", ""));
            assertEquals(400, r.statusCode(), "a registry-style tag is read as a LoRA selector");
            String msg = json(r).get("message").asText();
            assertTrue(msg.startsWith("LoRA adapter 'v2' was requested, but LoRA is not enabled."), msg);
            assertTrue(msg.contains("--enable-lora"), msg);
        }
    }

    @Test
    void sglangAdapterBlocksAreSeparateInTheEngineButPublishedUnderTheBaseHash() throws Exception {
        List<long[]> storedKeys = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (EngineSimulator sim = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).lora("sql").blockSize(4)
            .cacheBlocks(4))) {
            sim.tapKvBatches((rank, payload) -> {
                try {
                    for (Value ev : MessagePack.newDefaultUnpacker(payload).unpackValue().asArrayValue().get(1)
                        .asArrayValue()) {
                        ArrayValue e = ev.asArrayValue();
                        if (e.get(0).asStringValue().asString().equals("BlockStored")) {
                            storedKeys.add(new long[] {e.get(1).asArrayValue().get(0).asIntegerValue().asLong()});
                        } else if (e.get(0).asStringValue().asString().equals("BlockRemoved")) {
                            storedKeys.add(new long[] {-1, e.get(1).asArrayValue().get(0).asIntegerValue().asLong()});
                        }
                    }
                } catch (java.io.IOException ex) {
                    throw new java.io.UncheckedIOException(ex);
                }
            });
            String prompt = Arrays.toString(BlockKeyerTest.range(1, 9, 1)).replace(" ", "");
            String base = "{\"model\":\"m\",\"prompt\":" + prompt + ",\"max_tokens\":1}";
            String sql = "{\"model\":\"m:sql\",\"prompt\":" + prompt + ",\"max_tokens\":1}";
            assertEquals(0, json(post(sim, "/v1/completions", sql)).at("/usage/prompt_tokens_details/cached_tokens").asInt());
            assertEquals(8, json(post(sim, "/v1/completions", sql)).at("/usage/prompt_tokens_details/cached_tokens").asInt());
            assertEquals(0, json(post(sim, "/v1/completions", base)).at("/usage/prompt_tokens_details/cached_tokens").asInt(),
                "the adapter's radix subtree is separate: its pages do not serve the base model");
            long[] pageHashes = BlockKeyer.forAlgo("sha256_sglang", "").blockKeys(BlockKeyerTest.range(1, 9, 1), 4, null);
            // both copies were announced with the same (adapter-blind) page hashes: 2 pages each
            List<Long> stored = new java.util.ArrayList<>();
            for (long[] k : storedKeys) {
                if (k.length == 1) {
                    stored.add(k[0]);
                }
            }
            assertEquals(List.of(pageHashes[0], pageHashes[1], pageHashes[0], pageHashes[1]), stored);
            // a third prompt evicts the adapter's copy (least recently used, capacity 4): the removal names the
            // published page hashes, not the engine's (tokens, adapter) keys
            post(sim, "/v1/completions", "{\"model\":\"m\",\"prompt\":" + Arrays.toString(BlockKeyerTest.range(100, 108, 1))
                .replace(" ", "") + ",\"max_tokens\":1}");
            List<Long> removed = new java.util.ArrayList<>();
            for (long[] k : storedKeys) {
                if (k.length == 2) {
                    removed.add(k[1]);
                }
            }
            assertEquals(1, removed.size(), "one BlockRemoved event");
            assertTrue(removed.get(0) == pageHashes[0] || removed.get(0) == pageHashes[1], "published, not internal: "
                + removed);
            assertEquals(8, json(post(sim, "/v1/completions", base)).at("/usage/prompt_tokens_details/cached_tokens")
                .asInt(), "the base copy survived");
        }
    }

    private static String lastLora(EngineSimulator sim) {
        JsonNode recent = sim.stats().toJson().get("recent");
        return recent.get(recent.size() - 1).path("lora").asText(null);
    }

    @Test
    void configRefusesAColonInAnSglangAdapterName() {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
            () -> SimHttp.fast(Dialect.SGLANG).lora("a:b").validate());
        assertTrue(e.getMessage().contains("lora=a:b"), e.getMessage());
    }
}
