package io.kvgate.tools.sim;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import net.openhft.hashing.LongTupleHashFunction;

/**
 * The block keys an engine puts in its KV events (engine-contracts §3), computed from the prompt's token ids.
 * Only full blocks get a key. This is the simulator's own implementation of the contract, written independently
 * of the gateway's {@code io.kvgate.index.hash} so that a bug in either side shows up as a zero-hit routing test
 * instead of cancelling out. Implementations are stateless apart from reusable digests: engine-loop confined.
 */
interface BlockKeyer {
    /** Keys of the full blocks of {@code tokens}; {@code cacheSalt} may be null. */
    default long[] blockKeys(int[] tokens, int blockSize, String cacheSalt) {
        return blockKeys(tokens, blockSize, cacheSalt, null);
    }

    /**
     * Keys of the full blocks of {@code tokens} for a request served by LoRA adapter {@code loraName} (null = the
     * base model). vLLM hashes the adapter name into every block's extra keys; SGLang's page hash ignores it.
     */
    long[] blockKeys(int[] tokens, int blockSize, String cacheSalt, String loraName);

    /** Whether events carry keys as unsigned (vLLM) or signed (SGLang) 64-bit integers. */
    boolean unsignedKeys();

    /** A SHA-256 digest (every JDK has one: the checked exception cannot happen). */
    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static BlockKeyer forAlgo(String algo, String hashSeed) {
        return switch (algo) {
            case "sha256_cbor" -> new VllmCbor(false, hashSeed);
            case "xxhash_cbor" -> new VllmCbor(true, hashSeed);
            case "sha256_sglang" -> new SglangPage();
            case "none" -> new BlockKeyer() { // llama.cpp: per-slot prompt cache, nothing is keyed by block
                @Override
                public long[] blockKeys(int[] tokens, int blockSize, String cacheSalt, String loraName) {
                    return new long[0];
                }

                @Override
                public boolean unsignedKeys() {
                    return true;
                }
            };
            case "v1_block_key" -> new TrtllmV1();
            case "v2_sha256_64" -> new TrtllmV2();
            default -> throw new IllegalArgumentException("hash-algo=" + algo + ": unknown");
        };
    }

    /**
     * vLLM {@code sha256_cbor} / {@code xxhash_cbor}: digest_i = H(CBOR[bstr parent_i, [uint tokens], extra|null]),
     * parent_0 = NONE_HASH = H(CBOR(seed string)), the full digest chains, key = last 8 bytes big-endian.
     */
    final class VllmCbor implements BlockKeyer {
        private final boolean xxhash;
        private final byte[] noneHash;
        private final MessageDigest sha;

        VllmCbor(boolean xxhash, String seed) {
            this.xxhash = xxhash;
            this.sha = sha256();
            Cbor c = new Cbor();
            c.text(seed);
            this.noneHash = digest(c.toBytes());
        }

        byte[] noneHash() {
            return noneHash.clone();
        }

        @Override
        public long[] blockKeys(int[] tokens, int blockSize, String cacheSalt, String loraName) {
            int blocks = tokens.length / blockSize;
            long[] keys = new long[blocks];
            byte[] parent = noneHash;
            Cbor c = new Cbor();
            for (int b = 0; b < blocks; b++) {
                c.reset();
                c.header(4, 3);
                c.bytes(parent);
                c.header(4, blockSize);
                for (int i = b * blockSize; i < (b + 1) * blockSize; i++) {
                    c.header(0, tokens[i] & 0xffffffffL);
                }
                // extra keys (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys): the LoRA name on every
                // block, then the cache salt on block 0 only; a block with neither hashes null, not an empty tuple.
                boolean salted = cacheSalt != null && b == 0;
                int extras = (loraName != null ? 1 : 0) + (salted ? 1 : 0);
                if (extras == 0) {
                    c.simpleNull();
                } else {
                    c.header(4, extras);
                    if (loraName != null) {
                        c.text(loraName);
                    }
                    if (salted) {
                        c.text(cacheSalt);
                    }
                }
                parent = digest(c.toBytes());
                keys[b] = lastEightBigEndian(parent);
            }
            return keys;
        }

        byte[] digest(byte[] data) {
            if (!xxhash) {
                return sha.digest(data);
            }
            long[] h = LongTupleHashFunction.xx128().hashBytes(data);
            byte[] out = new byte[16];
            // canonical XXH128 digest: high64 then low64, both big-endian
            putLong(out, 0, h[1]);
            putLong(out, 8, h[0]);
            return out;
        }

        @Override
        public boolean unsignedKeys() {
            return true;
        }
    }

    /** SGLang page hash: digest_p = SHA-256(prior? || u32le tokens), key = first 8 bytes big-endian (signed). */
    final class SglangPage implements BlockKeyer {
        private final MessageDigest sha;

        SglangPage() {
            this.sha = sha256();
        }

        @Override
        public long[] blockKeys(int[] tokens, int pageSize, String cacheSalt, String loraName) {
            int pages = tokens.length / pageSize;
            long[] keys = new long[pages];
            byte[] prior = null;
            if (cacheSalt != null) {
                sha.update("sglang-cache-salt-v1\0".getBytes(StandardCharsets.UTF_8));
                prior = sha.digest(cacheSalt.getBytes(StandardCharsets.UTF_8));
            }
            byte[] le = new byte[4];
            for (int p = 0; p < pages; p++) {
                if (prior != null) {
                    sha.update(prior);
                }
                for (int i = p * pageSize; i < (p + 1) * pageSize; i++) {
                    int t = tokens[i];
                    le[0] = (byte) t;
                    le[1] = (byte) (t >>> 8);
                    le[2] = (byte) (t >>> 16);
                    le[3] = (byte) (t >>> 24);
                    sha.update(le);
                }
                prior = sha.digest();
                long k = 0;
                for (int i = 0; i < 8; i++) {
                    k = (k << 8) | (prior[i] & 0xff);
                }
                keys[p] = k;
            }
            return keys;
        }

        @Override
        public boolean unsignedKeys() {
            return false;
        }
    }

    /**
     * TensorRT-LLM's v1 block key, the hash its C++ {@code BlockKeyHasher::hash} (batch_manager/blockKey.cpp) gives
     * every block and its {@code POST /kv_cache_events} carries (hash_algo {@code v1_block_key}, and the events of
     * builds before KV cache manager V2 that name none): seed = token count ^ parent * 0xbf58476d1ce4e5b9 (parent 0
     * at the root), the request's cache-salt id mixed into the first block with the 64-bit mix, each token id with
     * the 32-bit mix. The salt id is the first 8 bytes of SHA-256 of the salt, little-endian, as
     * tensorrt_llm/runtime/kv_cache_hash.py {@code get_cache_salt_id} derives it (991de58c; earlier LLM-API builds
     * used BLAKE3, which is why the gateway computes no keys for salted requests). Unsigned on the wire.
     */
    final class TrtllmV1 implements BlockKeyer {
        private final MessageDigest sha = sha256();

        @Override
        public long[] blockKeys(int[] tokens, int blockSize, String cacheSalt, String loraName) {
            boolean salted = cacheSalt != null && !cacheSalt.isEmpty();
            long saltId = 0;
            if (salted) {
                byte[] d = sha.digest(cacheSalt.getBytes(StandardCharsets.UTF_8));
                for (int i = 7; i >= 0; i--) {
                    saltId = (saltId << 8) | (d[i] & 0xff);
                }
            }
            long[] keys = new long[tokens.length / blockSize];
            long parent = 0;
            for (int b = 0; b < keys.length; b++) {
                long seed = blockSize ^ (parent * 0xbf58476d1ce4e5b9L);
                if (parent == 0 && salted) {
                    seed = mix64(saltId, seed);
                }
                for (int i = b * blockSize; i < (b + 1) * blockSize; i++) {
                    seed = mix32(Integer.toUnsignedLong(tokens[i]), seed);
                }
                keys[b] = seed;
                parent = seed;
            }
            return keys;
        }

        /** {@code hash32Mix}: uint32_t arithmetic on the value, then the size_t combine. */
        private static long mix32(long a, long seed) {
            a = ((a >>> 16) ^ a) * 0x45d9f3bL & 0xFFFFFFFFL;
            a = ((a >>> 16) ^ a) * 0x45d9f3bL & 0xFFFFFFFFL;
            a = ((a >>> 16) ^ a) & 0xFFFFFFFFL;
            return seed ^ (((a + 0x9e3779b9L) & 0xFFFFFFFFL) + (seed << 6) + (seed >>> 2));
        }

        /** {@code hash64Mix}. */
        private static long mix64(long c, long seed) {
            c = (c ^ (c >>> 30)) * 0xbf58476d1ce4e5b9L;
            c = (c ^ (c >>> 27)) * 0x94d049bb133111ebL;
            c = c ^ (c >>> 31);
            return seed ^ (c + 0x9e3779b9L + (seed << 6) + (seed >>> 2));
        }

        @Override
        public boolean unsignedKeys() {
            return true;
        }
    }

    /**
     * TensorRT-LLM's KV cache manager V2 radix key, which its streaming publisher sends (PR #17023): the root is
     * SHA-256 of the request's reuse scope (mask byte, then u64le of each present field: LoRA task id, salt id),
     * block i's digest SHA-256(parent digest || u32le tokens), the key the digest's first 8 bytes big-endian
     * ({@code StreamingEventSink::wireHash}, signed). The engine's salt id is BLAKE3 of the salt; the simulator stands
     * SHA-256's first 8 bytes in for it (the scope still differs per salt, and the gateway keys no salted request).
     */
    final class TrtllmV2 implements BlockKeyer {
        private final MessageDigest sha;

        TrtllmV2() {
            this.sha = sha256();
        }

        @Override
        public long[] blockKeys(int[] tokens, int blockSize, String cacheSalt, String loraName) {
            int blocks = tokens.length / blockSize;
            long[] keys = new long[blocks];
            boolean salted = cacheSalt != null && !cacheSalt.isEmpty();
            if (salted) {
                byte[] saltId = java.util.Arrays.copyOf(sha.digest(cacheSalt.getBytes(StandardCharsets.UTF_8)), 8);
                sha.update((byte) 0b10);
                sha.update(saltId);
            } else {
                sha.update((byte) 0);
            }
            byte[] parent = sha.digest();
            byte[] le = new byte[4];
            for (int b = 0; b < blocks; b++) {
                sha.update(parent);
                for (int i = b * blockSize; i < (b + 1) * blockSize; i++) {
                    int t = tokens[i];
                    le[0] = (byte) t;
                    le[1] = (byte) (t >>> 8);
                    le[2] = (byte) (t >>> 16);
                    le[3] = (byte) (t >>> 24);
                    sha.update(le);
                }
                parent = sha.digest();
                long k = 0;
                for (int i = 0; i < 8; i++) {
                    k = (k << 8) | (parent[i] & 0xff);
                }
                keys[b] = k;
            }
            return keys;
        }

        @Override
        public boolean unsignedKeys() {
            return false;
        }
    }

    static long lastEightBigEndian(byte[] d) {
        long k = 0;
        for (int i = d.length - 8; i < d.length; i++) {
            k = (k << 8) | (d[i] & 0xff);
        }
        return k;
    }

    static void putLong(byte[] out, int off, long v) {
        for (int i = 7; i >= 0; i--) {
            out[off + i] = (byte) v;
            v >>>= 8;
        }
    }

    /** Minimal canonical CBOR writer: shortest-form heads, definite lengths. */
    final class Cbor {
        private byte[] buf = new byte[256];
        private int len;

        void reset() {
            len = 0;
        }

        void header(int major, long value) {
            int m = major << 5;
            if (value < 24) {
                put(m | (int) value);
            } else if (value < 0x100) {
                put(m | 24);
                put((int) value);
            } else if (value < 0x10000) {
                put(m | 25);
                put((int) (value >>> 8));
                put((int) value);
            } else if (value < 0x100000000L) {
                put(m | 26);
                for (int s = 24; s >= 0; s -= 8) {
                    put((int) (value >>> s));
                }
            } else {
                put(m | 27);
                for (int s = 56; s >= 0; s -= 8) {
                    put((int) (value >>> s));
                }
            }
        }

        void bytes(byte[] b) {
            header(2, b.length);
            for (byte x : b) {
                put(x);
            }
        }

        void text(String s) {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            header(3, b.length);
            for (byte x : b) {
                put(x);
            }
        }

        void simpleNull() {
            put(0xf6);
        }

        private void put(int b) {
            if (len == buf.length) {
                buf = java.util.Arrays.copyOf(buf, len * 2);
            }
            buf[len++] = (byte) b;
        }

        byte[] toBytes() {
            return java.util.Arrays.copyOf(buf, len);
        }
    }
}
