package io.kvgate.perf.hash;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.index.hash.BlockHashSpec;
import io.kvgate.index.hash.BlockHasher;
import io.kvgate.index.hash.HashAlgo;
import io.kvgate.index.hash.PrefixHashCache;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A chat that re-sends its whole history every turn: a 96-token system prompt, then 200 tokens per turn (user +
 * assistant). Turn 1 = 296 tokens (18 blocks of 16); turn 20 = 4096 tokens (256 blocks). vLLM sha256_cbor.
 *
 * <ul>
 *   <li>{@code *_noCache}: every block hashed (what a stateless router pays).</li>
 *   <li>{@code *_cache}: a {@link PrefixHashCache} already holds the previous turn (for turn 1: the system prompt,
 *       shared by every conversation); the new turn's tokens differ on every invocation (one token is a counter),
 *       so its blocks always miss and are hashed — the steady state of a live conversation.</li>
 *   <li>{@code turn20_resumeFromHead}: no cache; the caller kept turn 19's chain head and hashes only the new
 *       blocks with {@link BlockHasher#hashFrom}.</li>
 *   <li>{@code turn20_cacheAllHit}: the same turn-20 prompt again (a retry): pure lookup + verification cost.</li>
 * </ul>
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
@State(Scope.Thread)
public class PrefixCacheBench {
    static final int SYSTEM_TOKENS = 96;
    static final int TURN_TOKENS = 200;
    static final int BLOCK = 16;

    /** Cache slots: 65536 (~9 MB at block 16, a realistic routing-stage size) and 1024 (fits in L2). */
    @Param({"65536"})
    int cacheEntries;

    final BlockHashSpec spec = new BlockHashSpec(HashAlgo.SHA256_CBOR, BLOCK, "0", null);
    int[] tokens;
    long[] keys;
    BlockHasher plain;
    BlockHasher cached;
    BlockHasher cachedAllHit;
    byte[] turn19Head;
    int turn19Blocks;
    int counter;

    static int turnLength(int turn) {
        return SYSTEM_TOKENS + TURN_TOKENS * turn;
    }

    @Setup
    public void setup() {
        tokens = new SplittableRandom(1).ints(turnLength(20), 0, 151_643).toArray();
        keys = new long[turnLength(20) / BLOCK];
        plain = new BlockHasher(spec);
        cached = new BlockHasher(spec, new PrefixHashCache(spec, cacheEntries));
        // Warm it like a live conversation would: every earlier turn was hashed once.
        for (int turn = 1; turn <= 19; turn++) {
            cached.hash(tokens, turnLength(turn), null, keys);
        }
        cachedAllHit = new BlockHasher(spec, new PrefixHashCache(spec, cacheEntries));
        cachedAllHit.hash(tokens, turnLength(20), null, keys);
        turn19Head = new byte[32];
        turn19Blocks = plain.hash(tokens, turnLength(19), null, keys);
        plain.copyLastDigest(turn19Head, 0);
    }

    /** Makes the newest turn's tokens unseen: its first token becomes a fresh counter value. */
    private void newTurn(int turn) {
        tokens[turnLength(turn - 1)] = 200_000 + (counter++ & 0xFFFFF);
    }

    @Benchmark
    public long turn1_noCache() {
        newTurn(1);
        return keys[plain.hash(tokens, turnLength(1), null, keys) - 1];
    }

    @Benchmark
    public long turn20_noCache() {
        newTurn(20);
        return keys[plain.hash(tokens, turnLength(20), null, keys) - 1];
    }

    @Benchmark
    public long turn1_cache() {
        newTurn(1);
        return keys[cached.hash(tokens, turnLength(1), null, keys) - 1];
    }

    @Benchmark
    public long turn20_cache() {
        newTurn(20);
        return keys[cached.hash(tokens, turnLength(20), null, keys) - 1];
    }

    @Benchmark
    public long turn20_resumeFromHead() {
        newTurn(20);
        return keys[plain.hashFrom(tokens, turnLength(20), turn19Blocks, turn19Head, 0, null, keys) - 1];
    }

    @Benchmark
    public long turn20_cacheAllHit() {
        return keys[cachedAllHit.hash(tokens, turnLength(20), null, keys) - 1];
    }
}
