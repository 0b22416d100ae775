package io.kvgate.dataplane.route;

import static io.kvgate.dataplane.route.RouteFixtures.config;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.config.RuleConfig;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A rule's block keys for LoRA requests: salted with the adapter name exactly where the engine salts them. */
class RuleHasherTest {

    private static RuleConfig rule(String engine, String settings) {
        String y = "  - name: r\n    models: [r]\n    engine: " + engine + "\n    policy: kv_exact\n" + settings
            + "    endpoints:\n      - url: http://127.0.0.1:20000\n        kv_events: tcp://127.0.0.1:30000\n";
        return config("", y).rules().get(0);
    }

    private static long[] keys(RuleHasher h, int[] tokens, String salt, String lora) {
        long[] out = new long[tokens.length / h.blockSize()];
        int n = h.hash(tokens, salt, lora, out, Integer.MAX_VALUE);
        return Arrays.copyOf(out, n);
    }

    /**
     * Golden vector {@code random_006_sha256_cbor_bs7} of index/src/test/resources/fixtures/kv_hash_random_vectors.json
     * (generated with python3-cbor2 + hashlib, independent of our encoder): seed "", block size 7, cache_salt "salt-1",
     * LoRA "a"×24. Its block-0 CBOR ends {@code 82 78 18 'a'×24 66 'salt-1'}: vLLM's extra keys
     * ({@code generate_block_hash_extra_keys} = lora keys + mm keys + cache-salt keys, the LoRA key being
     * {@code lora_request.lora_name}) as the array [lora_name, cache_salt]. The rule must reach that key through the
     * request's adapter name, with or without its prefix-hash cache.
     */
    @Test
    void vllmAdapterKeysMatchTheReferenceVector() {
        int[] tokens = {19, 2040, 23351, 12, 44, 14, 1439775152, 3, 6, 3, 3821, 17094, (int) 3586930504L};
        String lora = "a".repeat(24);
        long expected = Long.parseUnsignedLong("2269608370498428872");
        for (int cache : new int[] {0, 1 << 10}) {
            RuleHasher h = new RuleHasher(rule("vllm", "    block_size: 7\n    hash_seed: \"\"\n    hash_algo: sha256_cbor\n"), cache);
            assertArrayEquals(new long[] {expected}, keys(h, tokens, "salt-1", lora), "prefix cache " + cache);
            assertNotEquals(expected, keys(h, tokens, "salt-1", null)[0], "the base model's key must differ");
            assertEquals("2269608370498428872", h.format(expected));
        }
    }

    /**
     * vLLM's seed for sha256_cbor without PYTHONHASHSEED ("vllm-none-hash", PR #51875) is a configurable seed, and
     * {@code hash_seed: auto} writes no keys (a guessed seed would pass for a cold cache) until the parity probe
     * resolves it; the resolved rule ({@link RuleConfig#withHashSeed}) then hashes exactly as the configured seed.
     * Expected keys: the golden vector of BlockHasherTest.vllmDefaultNoneHashSeedVector (Python cbor2 + hashlib).
     */
    @Test
    void vllmDefaultSeedAndAutoSeed() {
        int[] tokens = new int[32];
        Arrays.setAll(tokens, i -> i + 1);
        long[] expected = {Long.parseUnsignedLong("8866452693264111234"), Long.parseUnsignedLong("807986237951177663")};
        RuleHasher configured = new RuleHasher(rule("vllm", "    block_size: 16\n    hash_seed: vllm-none-hash\n"), 0);
        assertArrayEquals(expected, keys(configured, tokens, null, null));

        RuleConfig auto = rule("vllm", "    block_size: 16\n    hash_seed: auto\n");
        RuleHasher unresolved = new RuleHasher(auto, 1 << 10);
        assertTrue(unresolved.seedUnresolved());
        assertArrayEquals(new long[0], keys(unresolved, tokens, null, null));
        assertArrayEquals(new long[0], keys(unresolved, tokens, null, "adapter-a"));
        RuleHasher resolved = new RuleHasher(auto.withHashSeed("vllm-none-hash"), 1 << 10);
        assertFalse(resolved.seedUnresolved());
        assertArrayEquals(expected, keys(resolved, tokens, null, null));
        // auto is about vLLM's seed only: SGLang and learned keys have none, so nothing waits.
        assertFalse(new RuleHasher(rule("sglang", "    hash_seed: auto\n"), 0).seedUnresolved());
        assertFalse(new RuleHasher(rule("vllm", "    hash_seed: auto\n    kv_key_mode: learned\n"), 0).seedUnresolved());
    }

    @Test
    void vllmBaseAndAdapterKeysNeverCoincideAndAdaptersAreDistinct() {
        RuleHasher h = new RuleHasher(rule("vllm", "    hash_seed: \"0\"\n"), 1 << 10);
        int[] tokens = new int[64];
        Arrays.setAll(tokens, i -> 1000 + i);
        long[] base = keys(h, tokens, null, null);
        long[] a = keys(h, tokens, null, "adapter-a");
        long[] b = keys(h, tokens, null, "adapter-b");
        assertEquals(4, base.length);
        for (int i = 0; i < 4; i++) {
            assertNotEquals(base[i], a[i]);
            assertNotEquals(a[i], b[i]);
        }
        // Base after adapter: the adapter hashers do not disturb the base chain or its cache.
        assertArrayEquals(base, keys(h, tokens, null, null));
        assertArrayEquals(a, keys(h, tokens, null, "adapter-a"));
    }

    /** SGLang's page hash has no LoRA input (its events carry one key for base and adapter), nor do learned keys. */
    @Test
    void sglangAndLearnedKeysIgnoreTheAdapter() {
        int[] tokens = new int[32];
        Arrays.setAll(tokens, i -> 7 + i);
        RuleHasher sglang = new RuleHasher(rule("sglang", "    block_size: 16\n"), 0);
        assertArrayEquals(keys(sglang, tokens, null, null), keys(sglang, tokens, null, "adapter-a"));
        RuleHasher learned = new RuleHasher(rule("vllm", "    kv_key_mode: learned\n"), 0);
        assertArrayEquals(keys(learned, tokens, null, null), keys(learned, tokens, null, "adapter-a"));
    }

    @Test
    void anAdapterNameThatCannotBeHashedGivesNoKeysInsteadOfAWrongOne() {
        RuleHasher h = new RuleHasher(rule("vllm", "    hash_seed: \"0\"\n"), 0);
        int[] tokens = new int[32];
        assertEquals(0, keys(h, tokens, null, "\uD800").length, "unpaired surrogate has no UTF-8 form");
        for (int i = 0; i < RuleHasher.MAX_ADAPTERS; i++) {
            assertEquals(2, keys(h, tokens, null, "a" + i).length);
        }
        assertEquals(0, keys(h, tokens, null, "one-too-many").length);
        assertEquals(2, keys(h, tokens, null, "a0").length, "known adapters keep hashing");
    }

    /**
     * TensorRT-LLM's streaming publisher: exact keys are the V2 radix key (golden vector of
     * BlockHasherTest.contractVectorsTrtllmV2, Python hashlib after the engine's _block_radix_tree.py). A salted or
     * adapter request has a reuse scope whose digest the gateway cannot form (BLAKE3 salt id, adapter task id): it
     * gets no keys, never the base model's.
     */
    @Test
    void trtllmStreamingKeysAndTheScopesTheyCannotReach() {
        int[] tokens = new int[64];
        Arrays.setAll(tokens, i -> i + 1);
        for (int cache : new int[] {0, 1 << 10}) {
            RuleHasher h = new RuleHasher(rule("trtllm", "    kv_key_mode: exact\n"), cache);
            assertArrayEquals(new long[] {7626725223439765602L, -2732255166055541250L}, keys(h, tokens, null, null));
            assertEquals("-2732255166055541250", h.format(-2732255166055541250L), "signed, as the events carry it");
            assertEquals(0, keys(h, tokens, "tenant-a", null).length);
            assertEquals(0, keys(h, tokens, null, "adapter-a").length);
        }
    }

    /**
     * TensorRT-LLM learned keys (review T5): its drained blocks name their cache_salt and lora_id and the ingest roots
     * them in that namespace (LearnedNamespaceIngestTest), so a salted prompt is keyed from its salt's root, never
     * the base model's, and a LoRA prompt gets none. Other engines' learned keys stay the tokens' alone.
     */
    @Test
    void trtllmLearnedKeysAreNamespacedBySaltAndAdapter() {
        int[] tokens = new int[64];
        Arrays.setAll(tokens, i -> i + 1);
        RuleHasher learned = new RuleHasher(rule("trtllm", "    block_size: 32\n"), 0);
        var h = io.kvgate.index.block.Fmix64ChainedTokenHasher.INSTANCE;
        long root = io.kvgate.index.block.LearnedNamespace.root(h, io.kvgate.index.block.LearnedNamespace.ofSalt("tenant-a"));
        long first = h.blockKey(root, tokens, 0, 32);
        assertArrayEquals(new long[] {first, h.blockKey(first, tokens, 32, 32)}, keys(learned, tokens, "tenant-a", null));
        long plain = h.blockKey(h.rootKey(), tokens, 0, 32);
        assertEquals(plain, keys(learned, tokens, null, null)[0]);
        assertNotEquals(plain, first);
        assertEquals(0, keys(learned, tokens, null, "adapter-a").length, "its engine id is not in the request");
        RuleHasher vllmLearned = new RuleHasher(rule("vllm", "    kv_key_mode: learned\n    block_size: 32\n"), 0);
        assertEquals(plain, keys(vllmLearned, tokens, "tenant-a", null)[0], "vLLM's events name no salt per block");
    }

    /**
     * TensorRT-LLM's v1 block key (the hash of its POST /kv_cache_events): the first vector of
     * testkit/src/test/python/trtllm_v1_block_key.py ({@code three_blocks_32}, the engine's hash_v1_block_key). A
     * salted request gets no keys (the engine's salt id is a digest its builds do not agree on), nor does a LoRA
     * request (its task id is not in the request the gateway reads).
     */
    @Test
    void trtllmV1KeysAreTheEnginesHashOfItsDrainedEvents() {
        String y = "  - name: r\n    models: [r]\n    engine: trtllm\n    policy: kv_exact\n    block_size: 32\n"
            + "    kv_key_mode: exact\n    hash_algo: v1_block_key\n    endpoints:\n      - url: http://127.0.0.1:20000\n"
            + "        kv_events: http://127.0.0.1:20000/kv_cache_events\n";
        RuleConfig rc = config("", y).rules().get(0);
        RuleHasher h = new RuleHasher(rc, 1 << 10);
        assertEquals(null, RuleHasher.spec(rc), "a 64-bit chain, no digest");
        int[] tokens = new int[96];
        Arrays.setAll(tokens, i -> (i * 7919 + 13) % 151936);
        long[] k = keys(h, tokens, null, null);
        assertArrayEquals(new long[] {3862795136993660333L, -6936126416497205348L, 1527226618173287550L}, k);
        assertEquals(Long.toUnsignedString(-6936126416497205348L), h.format(k[1]), "size_t, as its JSON events carry it");
        assertEquals(0, keys(h, tokens, "tenant-a", null).length);
        assertEquals(0, keys(h, tokens, "", null).length, "an empty salt is still a salt id");
        assertEquals(0, keys(h, tokens, null, "adapter-a").length);
    }
}
