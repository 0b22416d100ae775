package io.kvgate.index.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Objects;

/**
 * Computes the 64-bit block keys an engine publishes in its KV events, bit for bit (engine-contracts §3).
 *
 * <h2>What is hashed</h2>
 * <ul>
 *   <li><b>vLLM</b> ({@code sha256_cbor}, {@code xxhash_cbor}): block i's digest is H(canonical CBOR of
 *       {@code [bstr parent, [uint token...], extra_keys | null]}); block 0's parent is NONE_HASH = H(CBOR(seed
 *       string)); later parents are the previous FULL digest. {@code extra_keys} is a CBOR array of text strings:
 *       the LoRA name on every block, then the request's {@code cache_salt} on block 0 only (an empty salt counts as
 *       none, as in vLLM); neither present → null. The key is the digest's last 8 bytes, big-endian — an unsigned
 *       64-bit value stored in a {@code long} (print it with {@link Long#toUnsignedString(long)}).</li>
 *   <li><b>SGLang</b> ({@code sha256_sglang}): page p's digest is SHA-256(prior || u32le(token)...), the prior
 *       being nothing for page 0, SHA-256("sglang-cache-salt-v1\0" + utf8(salt)) when the request has a non-empty
 *       {@code cache_salt}, and the previous page's digest afterwards. The key is the digest's first 8 bytes,
 *       big-endian, signed.</li>
 *   <li><b>TensorRT-LLM</b> ({@code v2_sha256_64}, the KV cache manager V2 radix key its streaming ZeroMQ publisher
 *       sends): the root is SHA-256 of the request's reuse scope (a mask byte, then each present field as u64le:
 *       LoRA task id, cache-salt id), block i's digest is SHA-256(parent digest || u32le(token)...), the parent of
 *       block 0 being the root. Only the base model without a salt is hashed: the scope is then the single byte 0.
 *       A salted request gets {@link #ERR_BAD_CACHE_SALT} (the salt id is BLAKE3 of the salt, not computed here),
 *       so it is routed without KV scores rather than scored against unsalted keys. The key is the digest's first
 *       8 bytes, big-endian, signed ({@code StreamingEventSink::wireHash}).</li>
 * </ul>
 * Token ids are unsigned 32-bit values (HF tokenizers and SGLang use u32): an {@code int} holding an id
 * >= 2^31 is negative and is hashed as its unsigned value.
 *
 * <h2>Cost</h2>
 * Tokens are encoded straight from the caller's {@code int[]} into one reused buffer, after CBOR heads written
 * once at construction, and the block is hashed with one call over that buffer: one reused {@link MessageDigest}
 * update, or {@link Xxh3} (our XXH3-128, seed 0) over the range. No allocation per call or per block, no
 * intermediate array. The parent digest is written by the digest itself into the next block's parent slot, so
 * chaining copies nothing. The token encoder ({@link Cbor#tokenRun}) is one table lookup and one 8-byte store per
 * token, without branches: in {@code BlockHashBench} encoding 16 mixed-width tokens is what separates a block
 * hash from the raw hash function over the same bytes.
 *
 * <h2>Incremental hashing</h2>
 * {@link #hashFrom} resumes a chain at any block given the full digest of the block before it
 * ({@link #copyLastDigest}), so a caller that keeps the chain head of a growing conversation hashes only the new
 * blocks. An optional {@link PrefixHashCache} does the same without the caller keeping state: it memoizes
 * (parent digest, block tokens) → digest with exact verification.
 *
 * <h2>Threading</h2>
 * Not thread-safe: single owner (one instance per thread). Reusable for any number of calls; cheap to create
 * (~13 KB of buffers, most of it room for the longest accepted cache salt).
 */
public final class BlockHasher {
    /** {@link #hashFrom} result: the cache salt has an unpaired surrogate or more than {@link #MAX_CACHE_SALT_CHARS}. */
    public static final int ERR_BAD_CACHE_SALT = -1;

    /**
     * Longest cache salt hashed, in chars. Salts are tenant ids or random tokens (vLLM suggests 256 random bits);
     * the bound keeps the reusable buffer fixed. A request over it gets {@link #ERR_BAD_CACHE_SALT}: route it
     * without KV scores rather than grow memory on a client's say-so.
     */
    public static final int MAX_CACHE_SALT_CHARS = 4_096;

    private static final VarHandle LONG_BE =
        MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle INT_LE =
        MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private static final byte[] SGLANG_SALT_DOMAIN = "sglang-cache-salt-v1\0".getBytes(StandardCharsets.US_ASCII);
    private static final int SHA256_BYTES = 32;

    private final BlockHashSpec spec;
    private final HashAlgo algo;
    private final boolean vllm;
    /** TensorRT-LLM V2: the SGLang layout (prior || u32le tokens) with a prior on every block, block 0's the root. */
    private final boolean trtllm;
    /** TensorRT-LLM V2: SHA-256 of the empty reuse scope (the one mask byte 0), block 0's parent. */
    private final byte[] trtllmRoot;
    private final int blockSize;
    private final int digestBytes;
    private final MessageDigest sha256;
    private final boolean xxh3;
    /** {@link Xxh3}'s scratch for inputs over 240 bytes (long salts, blocks of 48+ tokens). */
    private final long[] xxh3Acc = new long[Xxh3.ACC_LANES];
    private final PrefixHashCache cache;

    /**
     * vLLM: {@code [0x83, bstr head, parent digest, token array head, tokens..., extra keys]}.
     * SGLang: {@code [prior digest (32), u32le tokens...]}.
     */
    private final byte[] buf;
    /** Offset of the parent digest in {@link #buf}; the digest of each block is written here. */
    private final int parentOff;
    /** vLLM: first token byte (after the fixed array head). SGLang: first token byte (after the prior). */
    private final int tokensOff;

    /** vLLM extra keys of every block that carries no salt: {@code 0xF6} or {@code [lora]}. */
    private final byte[] steadyExtras;
    private final String loraName;
    private final int loraUtf8Bytes;
    private final byte[] noneHash;

    /** SGLang: {@code "sglang-cache-salt-v1\0" + utf8(salt)}, and a one-entry memo of the last salt's digest. */
    private final byte[] saltScratch;
    private final byte[] lastSaltDigest = new byte[SHA256_BYTES];
    private String lastSalt;

    /** True when {@link #buf}'s parent slot holds the chain head of the last call. */
    private boolean headValid;
    /** SGLang: whether the page being hashed has a prior (false only for unsalted page 0). */
    private boolean sglangHasPrior;

    public BlockHasher(BlockHashSpec spec) {
        this(spec, null);
    }

    /**
     * @param cache optional memo of block digests; must be built for the same spec and be owned by the same thread
     */
    public BlockHasher(BlockHashSpec spec, PrefixHashCache cache) {
        this.spec = Objects.requireNonNull(spec, "spec");
        if (cache != null && !cache.spec().equals(spec)) {
            throw new IllegalArgumentException("cache spec " + cache.spec() + " differs from hasher spec " + spec
                + ": a cached digest is only valid for the spec it was computed with");
        }
        this.cache = cache;
        this.algo = spec.algo();
        this.vllm = algo.isVllm();
        this.trtllm = algo.isTrtllm();
        this.blockSize = spec.blockSize();
        this.digestBytes = algo.digestBytes();
        this.xxh3 = algo == HashAlgo.XXHASH_CBOR;
        this.sha256 = xxh3 ? null : newSha256();
        int saltMaxUtf8 = 3 * MAX_CACHE_SALT_CHARS;
        if (vllm) {
            this.loraName = spec.loraName();
            this.loraUtf8Bytes = loraName == null ? 0 : Utf8.encodedLength(loraName);
            this.parentOff = 1 + Cbor.headLength(digestBytes);
            this.tokensOff = parentOff + digestBytes + Cbor.headLength(blockSize);
            int extrasMax = 1 + (loraName == null ? 0 : Cbor.textLength(loraUtf8Bytes)) + Cbor.textLength(saltMaxUtf8);
            int seedUtf8 = Utf8.encodedLength(spec.seed());
            // +8: the token encoder stores 8 bytes for each token (see Cbor.tokenRun).
            int bodyMax = tokensOff + Cbor.MAX_HEAD_BYTES * blockSize + extrasMax + 8;
            this.buf = new byte[Math.max(bodyMax, Cbor.textLength(seedUtf8))];
            if (loraName == null) {
                this.steadyExtras = new byte[] {Cbor.NULL};
            } else {
                this.steadyExtras = new byte[1 + Cbor.textLength(loraUtf8Bytes)];
                steadyExtras[0] = (byte) 0x81;
                Cbor.text(steadyExtras, 1, loraName, loraUtf8Bytes);
            }
            // NONE_HASH = H(cbor2.dumps(seed_string)): the seed is hashed as a CBOR text string.
            this.noneHash = new byte[digestBytes];
            int seedEnd = Cbor.text(buf, 0, spec.seed(), seedUtf8);
            digestInto(0, seedEnd, noneHash, 0);
            // The fixed heads go in after the seed scratch use: they never change afterwards.
            buf[0] = (byte) 0x83;
            Cbor.head(buf, 1, Cbor.MAJOR_BYTES, digestBytes);
            Cbor.head(buf, parentOff + digestBytes, Cbor.MAJOR_ARRAY, blockSize);
            this.saltScratch = null;
        } else {
            this.loraName = null;
            this.loraUtf8Bytes = 0;
            this.parentOff = 0;
            this.tokensOff = SHA256_BYTES;
            this.buf = new byte[SHA256_BYTES + 4 * blockSize];
            this.steadyExtras = null;
            this.noneHash = null;
            this.saltScratch = trtllm ? null : new byte[SGLANG_SALT_DOMAIN.length + saltMaxUtf8];
            if (saltScratch != null) {
                System.arraycopy(SGLANG_SALT_DOMAIN, 0, saltScratch, 0, SGLANG_SALT_DOMAIN.length);
            }
        }
        if (trtllm) {
            // reuse_scope_to_bytes(ReuseScope(lora_id=None, salt=None)): no field present, the mask byte alone.
            sha256.update((byte) 0);
            this.trtllmRoot = new byte[SHA256_BYTES];
            digestSha(trtllmRoot, 0);
        } else {
            this.trtllmRoot = null;
        }
    }

    public BlockHashSpec spec() {
        return spec;
    }

    /** Full digest length in bytes (32 for SHA-256, 16 for XXH3-128): the size of a chain head. */
    public int digestBytes() {
        return digestBytes;
    }

    /** The cache this hasher consults, or null. */
    public PrefixHashCache cache() {
        return cache;
    }

    /**
     * Hashes every full block of {@code tokens[0, length)} from the start of the chain.
     *
     * @param cacheSalt the request's {@code cache_salt}; null or empty for none
     * @param keysOut   receives block i's key at index i; at most {@code keysOut.length} blocks are hashed
     * @return the number of keys written ({@code min(length / blockSize, keysOut.length)}), or
     *     {@link #ERR_BAD_CACHE_SALT}
     */
    public int hash(int[] tokens, int length, String cacheSalt, long[] keysOut) {
        return hashFrom(tokens, length, 0, null, 0, cacheSalt, keysOut);
    }

    /**
     * Hashes full blocks {@code startBlock, startBlock+1, ...} of {@code tokens[0, length)}, continuing a chain.
     *
     * @param tokens       token ids of the whole prompt so far (block i is {@code tokens[i*B, (i+1)*B)})
     * @param length       number of valid tokens in {@code tokens}
     * @param startBlock   first block to hash; 0 starts a new chain, otherwise {@code parentDigest} must hold the
     *                     full digest of block {@code startBlock - 1} (from {@link #copyLastDigest})
     * @param parentDigest the chain head to resume from ({@link #digestBytes()} bytes at {@code parentOffset});
     *                     ignored when {@code startBlock == 0}
     * @param cacheSalt    the request's {@code cache_salt} (null or empty: none); only block 0 depends on it, so
     *                     it is ignored when resuming ({@code startBlock > 0}) — the parent digest carries it
     * @param keysOut      receives block i's key at index i (absolute, not relative to {@code startBlock})
     * @return one past the last block hashed ({@code max(startBlock, min(length / blockSize, keysOut.length))}),
     *     or {@link #ERR_BAD_CACHE_SALT}
     * @throws IllegalArgumentException on inconsistent arguments (a caller bug, not bad client input)
     */
    public int hashFrom(int[] tokens, int length, int startBlock, byte[] parentDigest, int parentOffset,
                        String cacheSalt, long[] keysOut) {
        checkArgs(tokens, length, startBlock, parentDigest, parentOffset, keysOut);
        int fullBlocks = length / blockSize;
        int end = Math.max(startBlock, Math.min(fullBlocks, keysOut.length));
        int saltUtf8 = 0;
        if (startBlock == 0) {
            if (cacheSalt != null && !cacheSalt.isEmpty()) {
                saltUtf8 = trtllm || cacheSalt.length() > MAX_CACHE_SALT_CHARS ? -1 : Utf8.encodedLength(cacheSalt);
                if (saltUtf8 < 0) {
                    headValid = false;
                    return ERR_BAD_CACHE_SALT;
                }
            }
            startChain(cacheSalt, saltUtf8);
        } else {
            System.arraycopy(parentDigest, parentOffset, buf, parentOff, digestBytes);
            sglangHasPrior = true;
            headValid = true;
        }
        for (int b = startBlock; b < end; b++) {
            int tokenOff = b * blockSize;
            boolean saltedVllmBlock0 = vllm && b == 0 && saltUtf8 > 0;
            if (cache == null || saltedVllmBlock0) {
                keysOut[b] = hashBlock(tokens, tokenOff, saltedVllmBlock0 ? cacheSalt : null, saltUtf8);
            } else {
                boolean hasParent = vllm || sglangHasPrior;
                int slot = cache.lookup(buf, parentOff, hasParent, tokens, tokenOff);
                if (slot >= 0) {
                    keysOut[b] = cache.copyHit(slot, buf, parentOff);
                } else {
                    int victim = cache.reserve(buf, parentOff, hasParent, tokens, tokenOff);
                    long key = hashBlock(tokens, tokenOff, null, 0);
                    cache.commit(victim, buf, parentOff, key);
                    keysOut[b] = key;
                }
            }
            sglangHasPrior = true;
            headValid = true;
        }
        return end;
    }

    /**
     * Copies the chain head left by the last {@link #hashFrom}/{@link #hash} call — the full digest of the last
     * block hashed (or the parent it resumed from when it hashed none) — to {@code dst[off, off + digestBytes())}.
     *
     * @return {@link #digestBytes()}, or 0 when there is no head (the last call started a chain and hashed no
     *     block, or failed)
     */
    public int copyLastDigest(byte[] dst, int off) {
        if (!headValid) {
            return 0;
        }
        System.arraycopy(buf, parentOff, dst, off, digestBytes);
        return digestBytes;
    }

    /** vLLM only: copies NONE_HASH (the parent of block 0) and returns its length; SGLang has none and returns 0. */
    public int copyNoneHash(byte[] dst, int off) {
        if (noneHash == null) {
            return 0;
        }
        System.arraycopy(noneHash, 0, dst, off, digestBytes);
        return digestBytes;
    }

    /**
     * Test hook: the exact bytes that are hashed for one vLLM block with the given parent, so CBOR layout can be
     * compared byte for byte with cbor2. Runs the same encoder as {@link #hashFrom}.
     */
    byte[] vllmBlockInput(byte[] parent, int[] tokens, int tokenOff, String cacheSalt) {
        if (!vllm) {
            throw new IllegalStateException("vllmBlockInput on " + algo);
        }
        int saltUtf8 = cacheSalt == null || cacheSalt.isEmpty() ? 0 : Utf8.encodedLength(cacheSalt);
        System.arraycopy(parent, 0, buf, parentOff, digestBytes);
        int len = encodeVllmBlock(tokens, tokenOff, saltUtf8 > 0 ? cacheSalt : null, saltUtf8);
        headValid = false;
        return java.util.Arrays.copyOf(buf, len);
    }

    private void startChain(String cacheSalt, int saltUtf8) {
        if (vllm) {
            System.arraycopy(noneHash, 0, buf, parentOff, digestBytes);
            headValid = false;
            return;
        }
        if (trtllm) {
            System.arraycopy(trtllmRoot, 0, buf, 0, SHA256_BYTES);
            sglangHasPrior = true;
            headValid = false;
            return;
        }
        if (saltUtf8 > 0) {
            if (!cacheSalt.equals(lastSalt)) {
                int len = Utf8.encode(cacheSalt, saltScratch, SGLANG_SALT_DOMAIN.length);
                sha256.update(saltScratch, 0, len);
                digestSha(lastSaltDigest, 0);
                lastSalt = cacheSalt;
            }
            System.arraycopy(lastSaltDigest, 0, buf, 0, SHA256_BYTES);
            sglangHasPrior = true;
        } else {
            sglangHasPrior = false;
        }
        headValid = false;
    }

    /** Hashes one block whose parent is in the parent slot; leaves its digest there and returns its key. */
    private long hashBlock(int[] tokens, int tokenOff, String salt, int saltUtf8) {
        if (vllm) {
            int len = encodeVllmBlock(tokens, tokenOff, salt, saltUtf8);
            digestInto(0, len, buf, parentOff);
            // vLLM maybe_convert_block_hash: int.from_bytes(digest, "big") & (2^64 - 1) = last 8 bytes, big-endian.
            return (long) LONG_BE.get(buf, parentOff + digestBytes - 8);
        }
        int p = SHA256_BYTES;
        for (int i = tokenOff, end = tokenOff + blockSize; i < end; i++, p += 4) {
            INT_LE.set(buf, p, tokens[i]);
        }
        int from = sglangHasPrior ? 0 : SHA256_BYTES;
        sha256.update(buf, from, p - from);
        digestSha(buf, 0);
        // SGLang hash_str_to_int64 and TensorRT-LLM wireHash alike: first 8 bytes, big-endian, two's complement.
        return (long) LONG_BE.get(buf, 0);
    }

    /** Writes tokens and extra keys after the fixed head; returns the CBOR length. */
    private int encodeVllmBlock(int[] tokens, int tokenOff, String salt, int saltUtf8) {
        byte[] b = buf;
        int p = Cbor.tokenRun(b, tokensOff, tokens, tokenOff, tokenOff + blockSize);
        if (salt != null) {
            if (loraName != null) {
                b[p++] = (byte) 0x82;
                p = Cbor.text(b, p, loraName, loraUtf8Bytes);
            } else {
                b[p++] = (byte) 0x81;
            }
            return Cbor.text(b, p, salt, saltUtf8);
        }
        byte[] extras = steadyExtras;
        if (extras.length == 1) {
            b[p] = extras[0];
            return p + 1;
        }
        System.arraycopy(extras, 0, b, p, extras.length);
        return p + extras.length;
    }

    private void digestInto(int from, int len, byte[] dst, int dstOff) {
        if (xxh3) {
            // Canonical XXH128 digest (what Python's xxh3_128().digest() returns), written into place.
            Xxh3.hash128(buf, from, len, dst, dstOff, xxh3Acc);
        } else {
            sha256.update(buf, from, len);
            digestSha(dst, dstOff);
        }
    }

    private void digestSha(byte[] dst, int off) {
        try {
            sha256.digest(dst, off, SHA256_BYTES);
        } catch (DigestException e) {
            // Only thrown when fewer than 32 bytes are offered; every call site offers exactly 32.
            throw new IllegalStateException(e);
        }
    }

    private void checkArgs(int[] tokens, int length, int startBlock, byte[] parentDigest, int parentOffset,
                           long[] keysOut) {
        if (tokens == null || keysOut == null) {
            throw new IllegalArgumentException("tokens and keysOut must not be null");
        }
        if (length < 0 || length > tokens.length) {
            throw new IllegalArgumentException("length=" + length + ": must be in [0, tokens.length="
                + tokens.length + "]");
        }
        if (startBlock < 0 || startBlock > length / blockSize) {
            throw new IllegalArgumentException("startBlock=" + startBlock + ": must be in [0, length / blockSize="
                + (length / blockSize) + "]");
        }
        if (startBlock > 0 && (parentDigest == null || parentOffset < 0
            || parentOffset > parentDigest.length - digestBytes)) {
            throw new IllegalArgumentException("parentDigest: resuming at startBlock=" + startBlock + " needs "
                + digestBytes + " digest bytes at parentOffset=" + parentOffset);
        }
    }

    private static MessageDigest newSha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is mandatory in every JDK", e);
        }
    }
}
