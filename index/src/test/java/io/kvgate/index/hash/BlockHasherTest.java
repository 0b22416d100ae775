package io.kvgate.index.hash;

import static io.kvgate.index.hash.Fixtures.HEX;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.security.MessageDigest;
import java.util.Arrays;
import java.util.SplittableRandom;

import com.fasterxml.jackson.databind.JsonNode;
import net.openhft.hashing.LongTupleHashFunction;
import org.junit.jupiter.api.Test;

class BlockHasherTest {
    private static final BlockHashSpec VLLM_SHA_16 = new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "0", null);
    private static final BlockHashSpec VLLM_XXH_16 = new BlockHashSpec(HashAlgo.XXHASH_CBOR, 16, "0", null);

    private static long[] keys(BlockHashSpec spec, int[] tokens, String salt) {
        long[] out = new long[tokens.length / spec.blockSize()];
        int n = new BlockHasher(spec).hash(tokens, tokens.length, salt, out);
        assertEquals(out.length, n);
        return out;
    }

    private static int[] range(int fromInclusive, int toInclusive, int step) {
        int[] t = new int[(toInclusive - fromInclusive) / step + 1];
        for (int i = 0; i < t.length; i++) {
            t[i] = fromInclusive + i * step;
        }
        return t;
    }

    private static long[] unsigned(String... decimal) {
        return Arrays.stream(decimal).mapToLong(Long::parseUnsignedLong).toArray();
    }

    /** Hashes one block with an explicit parent (resuming at block 1 of a two-block array). */
    private static long hashWithParent(BlockHasher hasher, byte[] parent, int[] block, byte[] digestOut) {
        int bs = block.length;
        int[] tokens = new int[2 * bs];
        System.arraycopy(block, 0, tokens, bs, bs);
        long[] keys = new long[2];
        assertEquals(2, hasher.hashFrom(tokens, tokens.length, 1, parent, 0, null, keys));
        assertEquals(parent.length, hasher.copyLastDigest(digestOut, 0));
        return keys[1];
    }

    // ---- kv_hash_vectors.json (loxilb gateway fixtures, incl. live vLLM v0.17.0 Qwen2.5 blocks) ----

    @Test
    void everyVectorOfKvHashVectorsJson() {
        JsonNode doc = Fixtures.load("kv_hash_vectors.json");
        int checked = checkVectorDoc(doc);
        for (JsonNode model : doc.get("models")) {
            checked += checkVectorDoc(model);
        }
        assertEquals(12, checked);
    }

    private static int checkVectorDoc(JsonNode doc) {
        String seed = doc.get("none_hash_seed").asText();
        int bs = doc.get("block_size").asInt();
        byte[] none = new byte[32];
        BlockHasher sha = new BlockHasher(new BlockHashSpec(HashAlgo.SHA256_CBOR, bs, seed, null));
        assertEquals(32, sha.copyNoneHash(none, 0));
        assertEquals(doc.get("none_hash_sha256_hex").asText(), HEX.formatHex(none));
        BlockHasher xxh = new BlockHasher(new BlockHashSpec(HashAlgo.XXHASH_CBOR, bs, seed, null));
        assertEquals(16, xxh.copyNoneHash(none, 0));
        assertEquals(doc.get("none_hash_xxhash_hex").asText(), HEX.formatHex(none, 0, 16));
        int n = 0;
        for (JsonNode f : doc.get("fixtures")) {
            String name = f.get("name").asText();
            HashAlgo algo = HashAlgo.parse(f.get("hash_algo").asText());
            BlockHasher hasher = algo == HashAlgo.SHA256_CBOR ? sha : xxh;
            byte[] parent = HEX.parseHex(f.get("parent_hash_hex").asText());
            int[] block = Fixtures.tokens(f.get("tokens"));
            assertEquals(bs, block.length, name);
            if (f.has("cbor_hex")) {
                assertEquals(f.get("cbor_hex").asText(),
                    HEX.formatHex(hasher.vllmBlockInput(parent, block, 0, null)), name);
            }
            byte[] digest = new byte[algo.digestBytes()];
            long key = hashWithParent(hasher, parent, block, digest);
            assertEquals(f.get("expected_digest_hex").asText(), HEX.formatHex(digest), name);
            assertEquals(Fixtures.key(f.get("expected_hash_uint64")), key, name);
            n++;
        }
        return n;
    }

    // ---- engine-contracts §3.3 extra vectors ----

    @Test
    void contractVectorsVllm() {
        int[] t101 = range(101, 3232, 101);
        assertArrayEquals(unsigned("7876691182959014722", "8769878286166771163"), keys(VLLM_SHA_16, t101, null));
        assertArrayEquals(unsigned("11066090714971094433", "8162514883595054550"), keys(VLLM_XXH_16, t101, null));
        int[] t32 = range(1, 32, 1);
        assertArrayEquals(unsigned("3236607068019569386", "2758186210834249151"), keys(VLLM_SHA_16, t32, null));
        assertArrayEquals(unsigned("3236607068019569386", "2758186210834249151"), keys(VLLM_SHA_16, t32, ""));
        assertArrayEquals(unsigned("14196867505284063976", "17764566542762686944"),
            keys(VLLM_SHA_16, t32, "salt-1"));
        assertArrayEquals(unsigned("15444946753610453501", "6571079245177515926"),
            keys(new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, "0", "my-lora"), t32, null));
    }

    @Test
    void contractVectorsSglang() {
        assertArrayEquals(new long[] {8635429971592222890L, 1256577331724852459L, 5689809685380680247L},
            keys(BlockHashSpec.sglang(16), range(1, 48, 1), null));
        assertArrayEquals(new long[] {-2360060374177730597L}, keys(BlockHashSpec.sglang(1), new int[] {0}, null));
        assertArrayEquals(new long[] {7470307888890966271L, -1634645291211865391L, 7325169757385981536L},
            keys(BlockHashSpec.sglang(1), new int[] {1, 2, 3}, null));
        assertArrayEquals(new long[] {3451139630862032982L, -5034188771989179167L},
            keys(BlockHashSpec.sglang(16), range(1, 32, 1), "tenant-a"));
        // An empty salt is no salt (SGLang normalizes "" to None).
        assertArrayEquals(keys(BlockHashSpec.sglang(16), range(1, 32, 1), null),
            keys(BlockHashSpec.sglang(16), range(1, 32, 1), ""));
    }

    /**
     * TensorRT-LLM's KV cache manager V2 radix key as its streaming publisher sends it (TensorRT-LLM PR #17023).
     * Golden values from CPython's hashlib following the engine's {@code _block_radix_tree.py}
     * ({@code reuse_scope_to_bytes}, {@code sequence_to_blockchain_keys}, {@code Hasher}: u32le tokens via
     * {@code array("I")}) and {@code StreamingEventSink::wireHash} (first 8 bytes, big-endian, signed):
     * <pre>
     * d = hashlib.sha256(bytes([0])).digest()          # ReuseScope(lora_id=None, salt=None): the mask byte 0
     * for block in chunks(tokens, tokens_per_block):
     *     d = hashlib.sha256(d + array("I", block).tobytes()).digest()
     *     key = int.from_bytes(d[:8], "big", signed=True)
     * </pre>
     */
    @Test
    void contractVectorsTrtllmV2() {
        assertArrayEquals(new long[] {7626725223439765602L, -2732255166055541250L},
            keys(BlockHashSpec.trtllmV2(32), range(1, 64, 1), null));
        assertArrayEquals(new long[] {7264355272441573615L, 1407554898996930711L, 6236476246865891143L,
            -1030868341052520559L}, keys(BlockHashSpec.trtllmV2(1), new int[] {0, 1, 2, 3}, null));
        int[] wide = new int[64];
        Arrays.fill(wide, 0, 32, (int) 4_000_000_000L); // an id >= 2^31 is hashed as its unsigned u32 value
        Arrays.fill(wide, 32, 64, 7);
        assertArrayEquals(new long[] {8654458007757850951L, -3607933779424168874L},
            keys(BlockHashSpec.trtllmV2(32), wide, null));
        // An empty salt is no salt; any other salt enters the root as BLAKE3's id, which is not computed: no keys.
        assertArrayEquals(keys(BlockHashSpec.trtllmV2(32), range(1, 64, 1), null),
            keys(BlockHashSpec.trtllmV2(32), range(1, 64, 1), ""));
        assertEquals(BlockHasher.ERR_BAD_CACHE_SALT,
            new BlockHasher(BlockHashSpec.trtllmV2(32)).hash(range(1, 64, 1), 64, "tenant-a", new long[4]));
    }

    @Test
    void trtllmV2ResumesAndCachesLikeHashingFromStart() {
        int[] tokens = new SplittableRandom(11).ints(200, 0, 150_000).toArray();
        BlockHashSpec spec = BlockHashSpec.trtllmV2(16);
        long[] full = new long[16];
        BlockHasher plain = new BlockHasher(spec);
        assertEquals(12, plain.hash(tokens, tokens.length, null, full));
        byte[] head = new byte[32];
        long[] part = new long[16];
        assertEquals(5, plain.hash(tokens, 5 * 16, null, part));
        assertEquals(32, plain.copyLastDigest(head, 0));
        long[] rest = new long[16];
        assertEquals(12, plain.hashFrom(tokens, tokens.length, 5, head, 0, null, rest));
        assertArrayEquals(Arrays.copyOfRange(full, 5, 12), Arrays.copyOfRange(rest, 5, 12));
        BlockHasher cached = new BlockHasher(spec, new PrefixHashCache(spec, 64));
        long[] first = new long[16];
        long[] second = new long[16];
        assertEquals(12, cached.hash(tokens, tokens.length, null, first));
        assertEquals(12, cached.hash(tokens, tokens.length, null, second));
        assertArrayEquals(full, first);
        assertArrayEquals(full, second);
    }

    /**
     * vLLM's seed for sha256_cbor without PYTHONHASHSEED (DEFAULT_NONE_HASH_SEED, PR #51875). Golden values from
     * CPython 3.11 with cbor2 6.1.4 and hashlib, following vLLM's kv_cache_utils (init_none_hash, hash_block_tokens)
     * and vllm.utils.hashing.sha256_cbor:
     * <pre>
     * nh = hashlib.sha256(cbor2.dumps("vllm-none-hash", canonical=True)).digest()    # 9bd96a48...9581eef0
     * b0 = hashlib.sha256(cbor2.dumps((nh, tuple(range(1, 17)), None), canonical=True)).digest()
     * b1 = hashlib.sha256(cbor2.dumps((b0, tuple(range(17, 33)), None), canonical=True)).digest()
     * [int.from_bytes(b, "big") &amp; (2**64 - 1) for b in (b0, b1)]
     * </pre>
     * The same script with seed "0" gives 3236607068019569386 for b0, the contract vector above.
     */
    @Test
    void vllmDefaultNoneHashSeedVector() {
        BlockHashSpec spec = new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, BlockHashSpec.VLLM_DEFAULT_NONE_HASH_SEED, null);
        byte[] none = new byte[32];
        new BlockHasher(spec).copyNoneHash(none, 0);
        assertEquals("9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0", HEX.formatHex(none));
        assertArrayEquals(unsigned("8866452693264111234", "807986237951177663"), keys(spec, range(1, 32, 1), null));
    }

    @Test
    void noneHashOfSeedZeroIsCbor6130() throws Exception {
        byte[] expected = MessageDigest.getInstance("SHA-256").digest(new byte[] {0x61, 0x30});
        byte[] none = new byte[32];
        new BlockHasher(VLLM_SHA_16).copyNoneHash(none, 0);
        assertArrayEquals(expected, none);
        assertEquals("4e1195df", HEX.formatHex(none, 0, 4));
        assertEquals(0, new BlockHasher(BlockHashSpec.sglang(4)).copyNoneHash(none, 0));
    }

    // ---- independent Python reference (gen/gen_kv_hash_random.py) ----

    @Test
    void randomCasesMatchPythonReference() {
        JsonNode doc = Fixtures.load("kv_hash_random_vectors.json");
        int cases = 0;
        int blocks = 0;
        for (JsonNode c : doc.get("cases")) {
            String name = c.get("name").asText();
            HashAlgo algo = HashAlgo.parse(c.get("algo").asText());
            BlockHashSpec spec = new BlockHashSpec(algo, c.get("block_size").asInt(),
                Fixtures.textOrNull(c.get("seed")), Fixtures.textOrNull(c.get("lora")));
            int[] tokens = Fixtures.tokens(c.get("tokens"));
            String salt = Fixtures.textOrNull(c.get("salt"));
            BlockHasher hasher = new BlockHasher(spec);
            long[] out = new long[tokens.length / spec.blockSize() + 3];
            int n = hasher.hash(tokens, tokens.length, salt, out);
            JsonNode expected = c.get("keys");
            assertEquals(expected.size(), n, name);
            for (int i = 0; i < n; i++) {
                assertEquals(Fixtures.key(expected.get(i)), out[i], name + " block " + i);
            }
            byte[] head = new byte[32];
            int headLen = hasher.copyLastDigest(head, 0);
            String lastHex = Fixtures.textOrNull(c.get("last_digest_hex"));
            assertEquals(lastHex, headLen == 0 ? null : HEX.formatHex(head, 0, headLen), name);
            if (algo.isVllm()) {
                byte[] none = new byte[algo.digestBytes()];
                hasher.copyNoneHash(none, 0);
                assertEquals(c.get("none_hash_hex").asText(), HEX.formatHex(none), name);
                String cbor0 = Fixtures.textOrNull(c.get("block0_cbor_hex"));
                if (cbor0 != null) {
                    assertEquals(cbor0, HEX.formatHex(hasher.vllmBlockInput(none, tokens, 0, salt)), name);
                }
            }
            cases++;
            blocks += n;
        }
        assertEquals(200, cases);
        assertEquals(387, blocks);
    }

    @Test
    void cborBoundariesMatchCbor2ByteForByte() throws Exception {
        JsonNode doc = Fixtures.load("kv_hash_random_vectors.json");
        int n = 0;
        for (JsonNode c : doc.get("cbor_boundaries")) {
            int bs = c.get("block_size").asInt();
            int[] pattern = Fixtures.tokens(c.get("boundary_tokens"));
            int[] tokens = new int[bs];
            for (int i = 0; i < bs; i++) {
                tokens[i] = pattern[i % pattern.length];
            }
            String lora = Fixtures.textOrNull(c.get("lora"));
            String salt = Fixtures.textOrNull(c.get("salt"));
            BlockHasher hasher = new BlockHasher(new BlockHashSpec(HashAlgo.SHA256_CBOR, bs, "0", lora));
            byte[] cbor = hasher.vllmBlockInput(HEX.parseHex(c.get("parent_hex").asText()), tokens, 0, salt);
            String what = "bs=" + bs + " lora=" + lora + " salt=" + salt;
            assertEquals(c.get("cbor_length").asInt(), cbor.length, what);
            assertEquals(c.get("cbor_sha256_hex").asText(),
                HEX.formatHex(MessageDigest.getInstance("SHA-256").digest(cbor)), what);
            String hex = Fixtures.textOrNull(c.get("cbor_hex"));
            if (hex != null) {
                assertEquals(hex, HEX.formatHex(cbor), what);
            }
            n++;
        }
        assertEquals(31, n);
    }

    @Test
    void noneHashForSeedsOfEveryTextHeadWidth() {
        JsonNode doc = Fixtures.load("kv_hash_random_vectors.json");
        for (JsonNode c : doc.get("none_hash_seeds")) {
            String seed = c.get("seed").asText();
            byte[] sha = new byte[32];
            new BlockHasher(new BlockHashSpec(HashAlgo.SHA256_CBOR, 16, seed, null)).copyNoneHash(sha, 0);
            assertEquals(c.get("sha256_cbor_hex").asText(), HEX.formatHex(sha), "seed length " + seed.length());
            byte[] xxh = new byte[16];
            new BlockHasher(new BlockHashSpec(HashAlgo.XXHASH_CBOR, 16, seed, null)).copyNoneHash(xxh, 0);
            assertEquals(c.get("xxhash_cbor_hex").asText(), HEX.formatHex(xxh), "seed length " + seed.length());
        }
    }

    /** zero-allocation-hashing's xx128 is XXH3-128 on every input-length path (0, 1-3, 4-8, 9-16, 17-128, ...). */
    @Test
    void zahXx128IsXxh3With128BitCanonicalOrder() {
        JsonNode doc = Fixtures.load("kv_hash_random_vectors.json");
        byte[] data = new byte[10_000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7 + 3);
        }
        long[] r = new long[2];
        int n = 0;
        for (JsonNode c : doc.get("xxh3_128")) {
            int len = c.get("length").asInt();
            LongTupleHashFunction.xx128().hashBytes(data, 0, len, r);
            assertEquals(c.get("digest_hex").asText(), String.format("%016x%016x", r[1], r[0]), "length " + len);
            n++;
        }
        assertEquals(1106, n);
    }

    // ---- API behaviour ----

    @Test
    void resumingAtEveryBlockEqualsHashingFromStart() {
        SplittableRandom rnd = new SplittableRandom(7);
        for (BlockHashSpec spec : new BlockHashSpec[] {VLLM_SHA_16, VLLM_XXH_16,
            new BlockHashSpec(HashAlgo.SHA256_CBOR, 4, "42", "my-lora"), BlockHashSpec.sglang(16),
            BlockHashSpec.sglang(1)}) {
            for (String salt : new String[] {null, "tenant-a"}) {
                int[] tokens = rnd.ints(131, 0, 200_000).toArray();
                long[] full = new long[64];
                BlockHasher hasher = new BlockHasher(spec);
                int blocks = hasher.hash(tokens, tokens.length, salt, full);
                assertEquals(Math.min(64, tokens.length / spec.blockSize()), blocks);
                byte[] head = new byte[32];
                for (int start = 1; start <= blocks; start++) {
                    // The head after hashing the first `start` blocks, then resume from it.
                    long[] part = new long[64];
                    assertEquals(start, hasher.hashFrom(tokens, start * spec.blockSize(), 0, null, 0, salt, part));
                    assertEquals(spec.algo().digestBytes(), hasher.copyLastDigest(head, 0));
                    long[] rest = new long[64];
                    assertEquals(blocks, hasher.hashFrom(tokens, tokens.length, start, head, 0, "ignored", rest));
                    assertArrayEquals(Arrays.copyOfRange(full, 0, start), Arrays.copyOfRange(part, 0, start));
                    assertArrayEquals(Arrays.copyOfRange(full, start, blocks), Arrays.copyOfRange(rest, start, blocks),
                        spec + " resume at " + start);
                }
            }
        }
    }

    @Test
    void keysOutBoundsTheBlocksHashed() {
        int[] tokens = range(1, 48, 1);
        BlockHasher hasher = new BlockHasher(VLLM_SHA_16);
        long[] two = new long[2];
        assertEquals(2, hasher.hash(tokens, tokens.length, null, two));
        assertArrayEquals(unsigned("3236607068019569386", "2758186210834249151"), two);
        assertEquals(0, hasher.hash(tokens, tokens.length, null, new long[0]));
        assertEquals(0, hasher.copyLastDigest(new byte[32], 0));
        assertEquals(0, hasher.hash(tokens, 15, null, new long[4]));
        assertEquals(1, hasher.hash(tokens, 31, null, new long[4]));
    }

    @Test
    void badCacheSaltIsAResultNotAnException() {
        BlockHasher vllm = new BlockHasher(VLLM_SHA_16);
        BlockHasher sglang = new BlockHasher(BlockHashSpec.sglang(16));
        int[] tokens = range(1, 32, 1);
        long[] out = new long[2];
        for (String bad : new String[] {"x\uD800", "\uDC00", "s".repeat(BlockHasher.MAX_CACHE_SALT_CHARS + 1)}) {
            assertEquals(BlockHasher.ERR_BAD_CACHE_SALT, vllm.hash(tokens, 32, bad, out));
            assertEquals(BlockHasher.ERR_BAD_CACHE_SALT, sglang.hash(tokens, 32, bad, out));
            assertEquals(0, vllm.copyLastDigest(new byte[32], 0));
        }
        String longest = "\uD83D\uDE00".repeat(BlockHasher.MAX_CACHE_SALT_CHARS / 2);
        assertEquals(2, vllm.hash(tokens, 32, longest, out));
        assertEquals(2, sglang.hash(tokens, 32, "\u65e5".repeat(BlockHasher.MAX_CACHE_SALT_CHARS), out));
    }

    @Test
    void saltChangesOnlyBlockZeroInputButTheWholeChain() {
        int[] tokens = range(1, 48, 1);
        long[] plain = keys(VLLM_SHA_16, tokens, null);
        long[] salted = keys(VLLM_SHA_16, tokens, "salt-1");
        for (int i = 0; i < 3; i++) {
            assertNotEquals(plain[i], salted[i]);
        }
        // SGLang salt memo: alternating salts must not reuse the previous salt's prior.
        BlockHasher sg = new BlockHasher(BlockHashSpec.sglang(16));
        long[] a = new long[3];
        long[] b = new long[3];
        sg.hash(tokens, 48, "tenant-a", a);
        sg.hash(tokens, 48, "tenant-b", b);
        assertNotEquals(a[0], b[0]);
        long[] a2 = new long[3];
        sg.hash(tokens, 48, new String("tenant-a"), a2);
        assertArrayEquals(a, a2);
        sg.hash(tokens, 48, null, a2);
        assertArrayEquals(keys(BlockHashSpec.sglang(16), tokens, null), a2);
    }

    @Test
    void inconsistentArgumentsThrow() {
        BlockHasher hasher = new BlockHasher(VLLM_SHA_16);
        int[] tokens = new int[32];
        long[] out = new long[4];
        assertThrows(IllegalArgumentException.class, () -> hasher.hash(null, 0, null, out));
        assertThrows(IllegalArgumentException.class, () -> hasher.hash(tokens, 33, null, out));
        assertThrows(IllegalArgumentException.class, () -> hasher.hash(tokens, -1, null, out));
        assertThrows(IllegalArgumentException.class, () -> hasher.hashFrom(tokens, 32, 3, new byte[32], 0, null, out));
        assertThrows(IllegalArgumentException.class, () -> hasher.hashFrom(tokens, 32, 1, null, 0, null, out));
        assertThrows(IllegalArgumentException.class, () -> hasher.hashFrom(tokens, 32, 1, new byte[31], 0, null, out));
        assertThrows(IllegalArgumentException.class,
            () -> new BlockHasher(VLLM_SHA_16, new PrefixHashCache(VLLM_XXH_16, 16)));
    }

    @Test
    void resumingWithAllZeroParentUsesItAsIs() {
        // Only a missing parent becomes NONE_HASH: the loxilb zeros-parent fixture relies on that.
        BlockHasher hasher = new BlockHasher(VLLM_SHA_16);
        byte[] digest = new byte[32];
        long key = hashWithParent(hasher, new byte[32], range(101, 1616, 101), digest);
        assertEquals(Long.parseUnsignedLong("14515664427994421226"), key);
    }
}
