package io.kvgate.perf.hash;

import java.security.DigestException;
import java.security.MessageDigest;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.hash.Xxh3;
import net.openhft.hashing.LongTupleHashFunction;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * {@link BlockHasher} against the raw hash function over the exact same bytes (the CBOR / u32le inputs the hasher
 * produces, precomputed): the ratio is the cost of encoding tokens and chaining. Scores are per block
 * ({@link OperationsPerInvocation}), so {@code -prof gc}'s {@code gc.alloc.rate.norm} is bytes allocated per block.
 * Tokens are drawn from a Qwen-sized vocabulary (most ids need the 3-byte CBOR form, like real prompts).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
@State(Scope.Thread)
public class BlockHashBench {
    static final int BLOCKS = 128;

    @Param({"16"})
    int blockSize;

    int[] tokens;
    long[] keys;
    BlockHasher sha256Cbor;
    BlockHasher xxhashCbor;
    BlockHasher sglang;

    /** The exact inputs each algorithm hashes, one array per block, for the raw baselines. */
    byte[][] sha256CborInputs;
    byte[][] xxhashCborInputs;
    byte[][] sglangInputs;
    MessageDigest rawSha256;
    LongTupleHashFunction rawXxh3;
    long[] xxh3Out;
    long[] xxh3Acc;
    byte[] digestOut;

    @Setup
    public void setup() throws Exception {
        SplittableRandom rnd = new SplittableRandom(42);
        tokens = rnd.ints(BLOCKS * blockSize, 0, 151_643).toArray();
        keys = new long[BLOCKS];
        sha256Cbor = new BlockHasher(new BlockHashSpec(HashAlgo.SHA256_CBOR, blockSize, "0", null));
        xxhashCbor = new BlockHasher(new BlockHashSpec(HashAlgo.XXHASH_CBOR, blockSize, "0", null));
        sglang = new BlockHasher(BlockHashSpec.sglang(blockSize));
        sha256CborInputs = vllmInputs(HashAlgo.SHA256_CBOR);
        xxhashCborInputs = vllmInputs(HashAlgo.XXHASH_CBOR);
        sglangInputs = new byte[BLOCKS][];
        byte[] prior = null;
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        for (int b = 0; b < BLOCKS; b++) {
            int priorLen = prior == null ? 0 : 32;
            byte[] in = new byte[priorLen + 4 * blockSize];
            if (prior != null) {
                System.arraycopy(prior, 0, in, 0, 32);
            }
            for (int i = 0; i < blockSize; i++) {
                int t = tokens[b * blockSize + i];
                in[priorLen + 4 * i] = (byte) t;
                in[priorLen + 4 * i + 1] = (byte) (t >>> 8);
                in[priorLen + 4 * i + 2] = (byte) (t >>> 16);
                in[priorLen + 4 * i + 3] = (byte) (t >>> 24);
            }
            sglangInputs[b] = in;
            prior = md.digest(in);
        }
        rawSha256 = MessageDigest.getInstance("SHA-256");
        rawXxh3 = LongTupleHashFunction.xx128();
        xxh3Out = new long[2];
        xxh3Acc = new long[Xxh3.ACC_LANES];
        digestOut = new byte[32];
        // Sanity: the baselines must hash exactly what the hasher hashes, or the comparison is meaningless.
        sha256Cbor.hash(tokens, tokens.length, null, keys);
        byte[] last = md.digest(sha256CborInputs[BLOCKS - 1]);
        check(keys[BLOCKS - 1] == java.nio.ByteBuffer.wrap(last, 24, 8).getLong(), "sha256_cbor inputs");
        xxhashCbor.hash(tokens, tokens.length, null, keys);
        byte[] lastXx = xxhashCborInputs[BLOCKS - 1];
        check(keys[BLOCKS - 1] == rawXxh3.hashBytes(lastXx, 0, lastXx.length)[0], "xxhash_cbor inputs");
        sglang.hash(tokens, tokens.length, null, keys);
        check(keys[BLOCKS - 1] == java.nio.ByteBuffer.wrap(prior, 0, 8).getLong(), "sglang inputs");
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("baseline " + what + " differ from what BlockHasher hashes");
        }
    }

    /** The CBOR the hasher feeds to H for every block, rebuilt independently with the chain's real parents. */
    private byte[][] vllmInputs(HashAlgo algo) throws Exception {
        BlockHashSpec spec = new BlockHashSpec(algo, blockSize, "0", null);
        BlockHasher h = new BlockHasher(spec);
        byte[][] inputs = new byte[BLOCKS][];
        int d = algo.digestBytes();
        byte[] parent = new byte[d];
        h.copyNoneHash(parent, 0);
        long[] k = new long[BLOCKS];
        for (int b = 0; b < BLOCKS; b++) {
            inputs[b] = Cbor.block(parent, tokens, b * blockSize, blockSize);
            h.hashFrom(tokens, (b + 1) * blockSize, b, parent, 0, null, k);
            h.copyLastDigest(parent, 0);
        }
        return inputs;
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public long sha256Cbor_blockHasher() {
        sha256Cbor.hash(tokens, tokens.length, null, keys);
        return keys[BLOCKS - 1];
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public byte sha256Cbor_rawMessageDigest() throws DigestException {
        MessageDigest md = rawSha256;
        byte[] out = digestOut;
        for (byte[] in : sha256CborInputs) {
            md.update(in, 0, in.length);
            md.digest(out, 0, 32);
        }
        return out[31];
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public long xxhashCbor_blockHasher() {
        xxhashCbor.hash(tokens, tokens.length, null, keys);
        return keys[BLOCKS - 1];
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public long xxhashCbor_rawXxh3() {
        long[] out = xxh3Out;
        long acc = 0;
        for (byte[] in : xxhashCborInputs) {
            rawXxh3.hashBytes(in, 0, in.length, out);
            acc ^= out[0];
        }
        return acc;
    }

    /**
     * Our XXH3-128 ({@link Xxh3}, what the hasher calls) over the same bytes: against this baseline the ratio is the
     * encoding alone; against {@link #xxhashCbor_rawXxh3} (the library) it is what issue #12 item 6 asks for.
     */
    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public byte xxhashCbor_rawOwnXxh3() {
        byte[] out = digestOut;
        long[] acc = xxh3Acc;
        for (byte[] in : xxhashCborInputs) {
            Xxh3.hash128(in, 0, in.length, out, 0, acc);
        }
        return out[15];
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public long sglang_blockHasher() {
        sglang.hash(tokens, tokens.length, null, keys);
        return keys[BLOCKS - 1];
    }

    @Benchmark
    @OperationsPerInvocation(BLOCKS)
    public byte sglang_rawMessageDigest() throws DigestException {
        MessageDigest md = rawSha256;
        byte[] out = digestOut;
        for (byte[] in : sglangInputs) {
            md.update(in, 0, in.length);
            md.digest(out, 0, 32);
        }
        return out[0];
    }

    /** Minimal canonical CBOR writer for the baseline inputs, independent of the production encoder. */
    static final class Cbor {
        private Cbor() {}

        static byte[] block(byte[] parent, int[] tokens, int off, int n) {
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            out.write(0x83);
            head(out, 2, parent.length);
            out.writeBytes(parent);
            head(out, 4, n);
            for (int i = 0; i < n; i++) {
                head(out, 0, tokens[off + i] & 0xFFFF_FFFFL);
            }
            out.write(0xF6);
            return out.toByteArray();
        }

        private static void head(java.io.ByteArrayOutputStream out, int major, long v) {
            int mt = major << 5;
            if (v < 24) {
                out.write(mt | (int) v);
            } else if (v < 0x100) {
                out.write(mt | 24);
                out.write((int) v);
            } else if (v < 0x1_0000) {
                out.write(mt | 25);
                out.write((int) (v >>> 8));
                out.write((int) v);
            } else {
                out.write(mt | 26);
                for (int s = 24; s >= 0; s -= 8) {
                    out.write((int) (v >>> s));
                }
            }
        }
    }
}
