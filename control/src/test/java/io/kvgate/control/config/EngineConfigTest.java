package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** {@code engine: trtllm|llamacpp}: which policies each accepts, and the llama.cpp/text-prefix keys. */
class EngineConfigTest {
    private static String rule(String engine, String policy, String extra) {
        String endpoints = "pd".equals(policy)
            ? "      - url: http://127.0.0.1:9001\n        role: prefill\n      - url: http://127.0.0.1:9002\n        role: decode\n"
            : "      - url: http://127.0.0.1:9001\n      - url: http://127.0.0.1:9002\n";
        return "rules:\n  - name: r\n    models: [m]\n    engine: " + engine + "\n    policy: " + policy + "\n" + extra
            + "    endpoints:\n" + endpoints;
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    /** {@code hash_seed: auto} finds a sha256_cbor engine's seed; xxhash_cbor without PYTHONHASHSEED has none to find. */
    @Test
    void hashSeedAutoAndVllmDefaultSeed() throws Exception {
        RuleConfig auto = GatewayConfig.parse(rule("vllm", "kv_exact", "    hash_seed: auto\n")).rules().get(0);
        assertTrue(auto.hashSeedAuto());
        assertEquals("vllm-none-hash", auto.withHashSeed("vllm-none-hash").hashSeed());
        assertFalse(auto.withHashSeed("vllm-none-hash").hashSeedAuto());
        assertEquals("vllm-none-hash", GatewayConfig.parse(rule("vllm", "kv_exact", "    hash_seed: vllm-none-hash\n"))
            .rules().get(0).hashSeed());
        assertEquals("0", GatewayConfig.parse(rule("vllm", "kv_exact", "")).rules().get(0).hashSeed(), "the default stays \"0\"");
        String xx = problems(rule("vllm", "kv_exact", "    hash_seed: auto\n    hash_algo: xxhash_cbor\n"));
        assertTrue(xx.contains("rules[0] (name=r).hash_seed: value 'auto' needs hash_algo sha256_cbor"), xx);
    }

    /** TensorRT-LLM's KvCacheConfig.tokens_per_block defaults to 32 (review T9): a trtllm rule's block_size does too. */
    @Test
    void blockSizeDefaultsAreTheEnginesOwn() throws Exception {
        assertEquals(32, GatewayConfig.parse(rule("trtllm", "kv_exact", "")).rules().get(0).blockSize());
        assertEquals(16, GatewayConfig.parse(rule("vllm", "kv_exact", "")).rules().get(0).blockSize());
        assertEquals(1, GatewayConfig.parse(rule("sglang", "kv_exact", "")).rules().get(0).blockSize());
        assertEquals(64, GatewayConfig.parse(rule("trtllm", "kv_exact", "    block_size: 64\n")).rules().get(0).blockSize());
    }

    @Test
    void llamacppServesPlainChwblAndSession() throws Exception {
        for (String policy : new String[] {"round_robin", "weighted", "least_outstanding", "chwbl", "session"}) {
            RuleConfig r = GatewayConfig.parse(rule("llamacpp", policy, "")).rules().get(0);
            assertEquals(RuleConfig.Engine.LLAMACPP, r.engineKind(), policy);
        }
    }

    @Test
    void llamacppKvExactAndPdAreErrorsThatSayWhy() {
        String kv = problems(rule("llamacpp", "kv_exact", ""));
        assertTrue(kv.contains("rules[0] (name=r).policy: value 'kv_exact' engine 'llamacpp' cannot serve it: llama-server publishes"
            + " no KV-cache events (kv_exact routes on them)"), kv);
        String pd = problems(rule("llamacpp", "pd", ""));
        assertTrue(pd.contains("rules[0] (name=r).policy: value 'pd' engine 'llamacpp' cannot serve it: llama-server publishes"
            + " no KV-cache events and has no prefill/decode disaggregation"), pd);
    }

    @Test
    void trtllmServesEveryPolicyKvExactOnLearnedKeysFromItsDrainingEndpoint() throws Exception {
        for (String policy : new String[] {"round_robin", "chwbl", "session", "pd", "kv_exact"}) {
            RuleConfig r = GatewayConfig.parse(rule("trtllm", policy, "")).rules().get(0);
            assertEquals(RuleConfig.Engine.TRTLLM, r.engineKind(), policy);
            assertEquals("learned", r.kvKeyMode(), "TensorRT-LLM's block hashes are internal: learned keys by default");
        }
        RuleConfig r = GatewayConfig.parse(rule("trtllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n        kv_poll_ms: 20\n"
                + "        dp_ranks: 2\n")).rules().get(0);
        EndpointConfig e = r.endpoints().get(1);
        assertTrue(e.kvEventsOverHttp());
        assertEquals("http://127.0.0.1:9002/kv_cache_events", e.kvEvents());
        assertEquals(20, e.kvPollMs());
        assertEquals(2, e.dpRanks());
        assertEquals(50, r.endpoints().get(0).kvPollMs(), "kv_poll_ms defaults to 50");
    }

    @Test
    void trtllmExactKeysNeedItsStreamingPublisher() throws Exception {
        String exact = problems(rule("trtllm", "kv_exact", "    kv_key_mode: exact\n    hash_algo: sha256_cbor\n"));
        assertTrue(exact.contains("rules[0] (name=r).kv_key_mode: value 'exact' cannot match engine 'trtllm' with hash_algo"
            + " sha256_cbor: exact keys need hash_algo v2_sha256_64 with kv_events tcp://"), exact);
        String sglangAlgo = problems(rule("trtllm", "kv_exact", "    hash_algo: sha256_sglang\n"));
        assertTrue(sglangAlgo.contains("hash_algo: value 'sha256_sglang' cannot match engine 'trtllm' (trtllm publishes"
            + " v2_sha256_64|v1_block_key|sha256_cbor|xxhash_cbor"), sglangAlgo);
        String drained = problems(rule("trtllm", "kv_exact", "    kv_key_mode: exact\n").replace(
            "      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n"));
        assertTrue(drained.contains("rules[0] (name=r).endpoints (url=http://127.0.0.1:9002): kv_events"
            + " http://127.0.0.1:9002/kv_cache_events cannot serve kv_key_mode exact with hash_algo v2_sha256_64"), drained);
        assertTrue(drained.contains("set hash_algo: v1_block_key"), drained);
        // POST /kv_cache_events carries TensorRT-LLM's v1 block key, which the gateway reproduces.
        RuleConfig v1 = GatewayConfig.parse(rule("trtllm", "kv_exact", "    kv_key_mode: exact\n    hash_algo: v1_block_key\n")
            .replace("      - url: http://127.0.0.1:9002\n",
                "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n")).rules().get(0);
        assertEquals("exact", v1.kvKeyMode());
        assertEquals(RuleConfig.TRTLLM_V1_BLOCK_KEY, v1.hashAlgo());
        String v1Streaming = problems(rule("trtllm", "kv_exact", "    kv_key_mode: exact\n    hash_algo: v1_block_key\n")
            .replace("      - url: http://127.0.0.1:9002\n",
                "      - url: http://127.0.0.1:9002\n        kv_events: tcp://127.0.0.1:5557\n"));
        assertTrue(v1Streaming.contains("rules[0] (name=r).endpoints (url=http://127.0.0.1:9002): kv_events"
            + " tcp://127.0.0.1:5557 cannot serve kv_key_mode exact with hash_algo v1_block_key: TensorRT-LLM's streaming"
            + " publisher sends the KV cache manager V2 radix key"), v1Streaming);
        // TensorRT-LLM's streaming publisher (PR #17023): ZeroMQ events, exact or learned keys.
        String streaming = rule("trtllm", "kv_exact", "    kv_key_mode: exact\n").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: tcp://127.0.0.1:5557\n        kv_replay: tcp://127.0.0.1:5600\n");
        RuleConfig r = GatewayConfig.parse(streaming).rules().get(0);
        assertEquals("exact", r.kvKeyMode());
        assertEquals("v2_sha256_64", r.hashAlgo());
        assertFalse(r.endpoints().get(1).kvEventsOverHttp());
        assertEquals("tcp://127.0.0.1:5600", r.endpoints().get(1).kvReplay());
        RuleConfig learned = GatewayConfig.parse(streaming.replace("    kv_key_mode: exact\n", "")).rules().get(0);
        assertEquals("learned", learned.kvKeyMode());
        assertEquals("tcp://127.0.0.1:5557", learned.endpoints().get(1).kvEvents());
    }

    @Test
    void kvEventsTransportsPerEngine() {
        String vllm = problems(rule("vllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n"));
        assertTrue(vllm.contains("kv_events http://127.0.0.1:9002/kv_cache_events must be tcp://host:port for engine 'vllm'"), vllm);
        String poll = problems(rule("vllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: tcp://127.0.0.1:5557\n        kv_poll_ms: 20\n"));
        assertTrue(poll.contains("rules[0] (name=r).endpoints[1] (url=http://127.0.0.1:9002).kv_poll_ms: value 20 applies only to an http:// kv_events"
            + " endpoint"), poll);
        String bounds = problems(rule("trtllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n        kv_poll_ms: 0\n"));
        assertTrue(bounds.contains("kv_poll_ms: value 0 must be in [1, 60000]"), bounds);
        String bad = problems(rule("trtllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: https://127.0.0.1:9002/kv_cache_events\n"));
        assertTrue(bad.contains("kv_events: value 'https://127.0.0.1:9002/kv_cache_events' must be tcp://host:port"), bad);
        String replay = problems(rule("trtllm", "kv_exact", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: http://127.0.0.1:9002/kv_cache_events\n"
                + "        kv_replay: tcp://127.0.0.1:5558\n"));
        assertTrue(replay.contains("kv_replay: value 'tcp://127.0.0.1:5558' applies only to a ZeroMQ kv_events publisher"), replay);
    }

    @Test
    void pdMinUncachedTokensDefaultsAndSglangRefusal() throws Exception {
        assertEquals(256, GatewayConfig.parse(rule("vllm", "pd", "")).rules().get(0).pd().minUncachedTokens());
        assertEquals(256, GatewayConfig.parse(rule("trtllm", "pd", "")).rules().get(0).pd().minUncachedTokens());
        assertEquals(0, GatewayConfig.parse(rule("sglang", "pd", "")).rules().get(0).pd().minUncachedTokens(),
            "SGLang never skips the prefill leg");
        assertEquals(1000, GatewayConfig.parse(rule("vllm", "pd", "    pd: {min_uncached_tokens: 1000}\n")).rules().get(0)
            .pd().minUncachedTokens());
        String sg = problems(rule("sglang", "pd", "    pd: {min_uncached_tokens: 64}\n"));
        assertTrue(sg.contains("rules[0] (name=r).pd.min_uncached_tokens: value 64 cannot apply to engine 'sglang': an SGLang"
            + " decode server (--disaggregation-mode decode) serves a request only through the bootstrap rendezvous"), sg);
        String neg = problems(rule("vllm", "pd", "    pd: {min_uncached_tokens: -1}\n"));
        assertTrue(neg.contains("rules[0] (name=r).pd.min_uncached_tokens: value -1 must be in [0, 16777216]"), neg);
    }

    @Test
    void unknownEngineNamesTheChoices() {
        String p = problems(rule("tgi", "round_robin", ""));
        assertTrue(p.contains("rules[0] (name=r).engine") && p.contains("vllm|sglang|trtllm|llamacpp"), p);
    }

    @Test
    void chwblPrefixCharsDefaultsAndBounds() throws Exception {
        assertEquals(1024, GatewayConfig.parse(rule("vllm", "chwbl", "")).rules().get(0).chwbl().prefixChars());
        assertEquals(64, GatewayConfig.parse(rule("llamacpp", "chwbl", "    chwbl: {prefix_chars: 64}\n")).rules().get(0)
            .chwbl().prefixChars());
        String p = problems(rule("llamacpp", "chwbl", "    chwbl: {prefix_chars: 0}\n"));
        assertTrue(p.contains("rules[0] (name=r).chwbl.prefix_chars: value 0 must be in [1, 16384]"), p);
    }

    @Test
    void pinSlotOnlyForLlamacppSessionRules() throws Exception {
        RuleConfig r = GatewayConfig.parse(rule("llamacpp", "session", "    session: {pin_slot: true, slots: 8}\n")).rules().get(0);
        assertTrue(r.session().pinSlot());
        assertEquals(8, r.session().slots());
        assertEquals(4, GatewayConfig.parse(rule("llamacpp", "session", "")).rules().get(0).session().slots());
        String vllm = problems(rule("vllm", "session", "    session: {pin_slot: true}\n"));
        assertTrue(vllm.contains("rules[0] (name=r).session.pin_slot: value true pins a llama.cpp slot (id_slot): only valid with"
            + " engine 'llamacpp' (this rule's engine is 'vllm')"), vllm);
        String chwbl = problems(rule("llamacpp", "chwbl", "    session: {pin_slot: true}\n"));
        assertTrue(chwbl.contains("session.pin_slot: value true pins the slot of a session-affine request: only valid under"
            + " policy 'session' (this rule's policy is 'chwbl')"), chwbl);
        String slots = problems(rule("llamacpp", "session", "    session: {pin_slot: true, slots: 0}\n"));
        assertTrue(slots.contains("rules[0] (name=r).session.slots: value 0 must be in [1, 4096]"), slots);
    }

    @Test
    void zmqKvEventsOnlyForEnginesThatPublishThem() {
        String p = problems(rule("llamacpp", "chwbl", "").replace("      - url: http://127.0.0.1:9002\n",
            "      - url: http://127.0.0.1:9002\n        kv_events: tcp://127.0.0.1:5557\n"));
        assertTrue(p.contains("rules[0] (name=r).endpoints (url=http://127.0.0.1:9002): kv_events tcp://127.0.0.1:5557 is only valid"
            + " for engines that publish KV events (vllm, sglang over ZeroMQ; trtllm over HTTP or ZeroMQ); engine 'llamacpp' publishes none"), p);
    }
}
