package io.kvgate.perf.route;

import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.control.config.RuleConfig;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.Policies;
import io.kvgate.dataplane.route.RouteEvent;
import io.kvgate.dataplane.route.Role;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.RuleHasher;
import io.kvgate.dataplane.route.RuleStats;
import io.kvgate.dataplane.route.SessionKeys;

import io.kvgate.dataplane.route.RulePolicies;
import io.kvgate.dataplane.route.RoutingPolicy;
import io.kvgate.index.block.BlockIndex;
import io.kvgate.index.block.BlockIndexConfig;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The routing decision of a {@code kv_exact} rule as the routing stage runs it — hash the prompt's token ids into
 * block keys (vLLM {@code sha256_cbor}, block 16, through the policy's own {@code PrefixHashCache}), find the
 * longest cached prefix per endpoint in the off-heap {@link BlockIndex} (+ speculative overlay), decide under the
 * load bound — EXCLUDING tokenization (the prompt arrives as token ids, as {@code RouteInputs.promptTokens()}).
 *
 * <p><b>Index.</b> 1,048,576 distinct blocks in total. A pool of prompts of {@code promptBlocks} blocks (524,288
 * prompt blocks) is held, per prompt, by a quarter of the endpoints (at least 2) at random prefix depths — one of
 * them the whole prompt, the others 1..n blocks — and the rest of the index is unrelated single-holder blocks
 * spread over every endpoint. So every lookup finds a partial match somewhere and the policy takes the kv_exact tier.
 *
 * <p><b>Variants.</b>
 * <ul>
 *   <li>{@code kvExact_firstTimePrompt}: the next prompt of the pool on every call. The pool is 8x the
 *       PrefixHashCache (65,536 entries), so by the time a prompt comes round again its entries are gone: every
 *       block is hashed (a prompt the gateway has not seen, e.g. a new document).</li>
 *   <li>{@code kvExact_repeatedPrompt}: the same prompt every call (multi-turn: the history was hashed last turn;
 *       the cache verifies and returns the digests).</li>
 *   <li>{@code baseline_sha256Raw}: chained {@link MessageDigest} SHA-256 over exactly the CBOR bytes the vLLM hash
 *       of a first-time prompt digests (same lengths), no cache, no lookup, no decision: the floor of the hash.</li>
 *   <li>{@code baseline_leastOutstanding}: {@code least_outstanding}'s choose() over the same endpoints (the
 *       load-only decision, what kv_exact falls back to).</li>
 * </ul>
 * {@code speculativeTtlMs}: 2000 is the default speculative overlay (every decision records the prompt's blocks for
 * the chosen endpoint for 2 s, and every probe consults it); 0 turns the overlay off, isolating hash + lookup +
 * decide. Note that a benchmark thread deciding back to back records far more blocks per second than the
 * overlay's fixed 65,536 entries can hold for 2 s: with the overlay on this measures the overlay when saturated.
 *
 * <p>Load is zero on every endpoint ({@code EndpointState}'s load counter is routing-stage private), so the bound never
 * excludes anyone; the cost of the bound check is paid either way.
 */
@BenchmarkMode({Mode.SampleTime, Mode.Throughput})
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class RoutingDecisionBench {
    static final int BLOCK = 16;
    static final int TOTAL_INDEX_BLOCKS = 1 << 20;
    static final int PROMPT_POOL_BLOCKS = 1 << 19;
    static final int VOCAB = 151_643;

    static String ruleYaml(int endpoints) {
        return ruleYaml(endpoints, 2000);
    }

    static String ruleYaml(int endpoints, int speculativeTtlMs) {
        StringBuilder y = new StringBuilder();
        y.append("listen: 127.0.0.1:18080\nadmin_listen: 127.0.0.1:18081\nrules:\n")
            .append("  - name: chat\n    models: [m]\n    engine: vllm\n    policy: kv_exact\n")
            .append("    fallback: least_outstanding\n    block_size: 16\n    hash_seed: \"0\"\n")
            .append("    hash_algo: sha256_cbor\n    kv_capacity_blocks: ").append(TOTAL_INDEX_BLOCKS + (TOTAL_INDEX_BLOCKS >> 2))
            .append("\n    kv: {mode: bounded, load_cap_factor: 1.5, min_match_blocks: 1, speculative_ttl_ms: ")
            .append(speculativeTtlMs).append("}\n")
            .append("    endpoints:\n");
        for (int i = 0; i < endpoints; i++) {
            y.append("      - url: http://127.0.0.1:").append(20000 + i).append('\n')
                .append("        kv_events: tcp://127.0.0.1:").append(30000 + 2 * i).append('\n');
        }
        return y.toString();
    }

    static EndpointState[] endpoints(RuleConfig rule) {
        EndpointState[] eps = new EndpointState[rule.endpoints().size()];
        for (int i = 0; i < eps.length; i++) {
            eps[i] = new EndpointState(rule.endpoints().get(i).key(), i, rule.endpoints().get(i));
        }
        return eps;
    }

    static RuleConfig rule(int endpoints) {
        return rule(endpoints, 2000);
    }

    static RuleConfig rule(int endpoints, int speculativeTtlMs) {
        try {
            return GatewayConfig.parse(ruleYaml(endpoints, speculativeTtlMs)).rules().get(0);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @State(Scope.Thread)
    public static class KvState {
        @Param({"8", "64"})
        int endpoints;

        @Param({"32", "128"})
        int promptBlocks;

        /** 2000 = the default speculative overlay (routed blocks count for 2 s); 0 = overlay off. */
        @Param({"2000", "0"})
        int speculativeTtlMs;

        BlockIndex index;
        EndpointState[] eps;
        RoutingPolicy policy;
        int[][] pool;
        int next;
        final RouteEvent req = RouteEvent.of(null, Role.ANY, null, null, SessionKeys.NONE, false, false);
        final StringBuilder why = new StringBuilder(256);

        @Setup(Level.Trial)
        public void setup() {
            RuleConfig rule = rule(endpoints, speculativeTtlMs);
            eps = endpoints(rule);
            // Four holder cells per block on average (prompt blocks are shared by several endpoints).
            index = new BlockIndex(new BlockIndexConfig(TOTAL_INDEX_BLOCKS + (TOTAL_INDEX_BLOCKS >> 2), endpoints, 4,
                BlockIndexConfig.DEFAULT_MAX_PROMPT_BLOCKS,
                BlockIndexConfig.defaultHotCacheEntries(TOTAL_INDEX_BLOCKS + (TOTAL_INDEX_BLOCKS >> 2))));
            policy = RulePolicies.create(new RouteTable.RuleBuildContext(rule, eps, new RuleStats(rule.name())), index, NanoClock.SYSTEM);
            SplittableRandom rnd = new SplittableRandom(7);
            int prompts = PROMPT_POOL_BLOCKS / promptBlocks;
            int tokens = promptBlocks * BLOCK;
            pool = new int[prompts][];
            // The index is populated with the keys the policy itself would compute: one plain hasher, no cache.
            RuleHasher keyer = new RuleHasher(rule, 0);
            long[] keys = new long[promptBlocks];
            int holders = Math.max(2, endpoints / 4);
            int[] perm = new int[endpoints];
            long distinct = 0;
            for (int p = 0; p < prompts; p++) {
                int[] t = new int[tokens];
                for (int i = 0; i < tokens; i++) {
                    t[i] = rnd.nextInt(VOCAB);
                }
                pool[p] = t;
                keyer.hash(t, null, keys);
                for (int i = 0; i < endpoints; i++) {
                    perm[i] = i;
                }
                for (int h = 0; h < holders; h++) {
                    int j = h + rnd.nextInt(endpoints - h);
                    int ep = perm[j];
                    perm[j] = perm[h];
                    perm[h] = ep;
                    int depth = h == 0 ? promptBlocks : 1 + rnd.nextInt(promptBlocks);
                    for (int b = 0; b < depth; b++) {
                        index.stored(ep, 0, keys[b]);
                    }
                }
                distinct += promptBlocks;
            }
            for (long i = distinct; i < TOTAL_INDEX_BLOCKS; i++) {
                index.stored(rnd.nextInt(endpoints), 0, rnd.nextLong());
            }
            if (index.insertFailures() != 0 || index.evictions() != 0 || index.size() < TOTAL_INDEX_BLOCKS - 16) {
                throw new IllegalStateException("index population failed: size=" + index.size() + " failures="
                    + index.insertFailures() + " evictions=" + index.evictions());
            }
            // Warm the repeated prompt's hash cache entries once, as the previous turn would have.
            req.promptTokens(pool[0]);
            why.setLength(0);
            policy.choose(eps, req, System.nanoTime(), why);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            index.close();
        }
    }

    @Benchmark
    public EndpointState kvExact_firstTimePrompt(KvState s) {
        int p = ++s.next;
        if (p >= s.pool.length) {
            p = 1; // pool[0] is the repeated prompt
            s.next = 1;
        }
        s.req.promptTokens(s.pool[p]);
        s.why.setLength(0);
        return s.policy.choose(s.eps, s.req, System.nanoTime(), s.why);
    }

    @Benchmark
    public EndpointState kvExact_repeatedPrompt(KvState s) {
        s.req.promptTokens(s.pool[0]);
        s.why.setLength(0);
        return s.policy.choose(s.eps, s.req, System.nanoTime(), s.why);
    }

    /** The same prompt bytes, hashed with a bare MessageDigest: what hashing alone costs with nothing around it. */
    @State(Scope.Thread)
    public static class ShaState {
        @Param({"32", "128"})
        int promptBlocks;

        MessageDigest sha;
        byte[][] blockBytes;
        final byte[] digest = new byte[32];

        @Setup(Level.Trial)
        public void setup() throws NoSuchAlgorithmException {
            sha = MessageDigest.getInstance("SHA-256");
            SplittableRandom rnd = new SplittableRandom(7);
            blockBytes = new byte[promptBlocks][];
            for (int b = 0; b < promptBlocks; b++) {
                // CBOR [bstr(32) parent, [16 uints], null]: 0x83, 0x58 0x20 + 32, 0x90, tokens, 0xF6.
                int len = 1 + 2 + 32 + 1 + 1;
                int[] t = new int[BLOCK];
                for (int i = 0; i < BLOCK; i++) {
                    t[i] = rnd.nextInt(VOCAB);
                    len += t[i] < 24 ? 1 : t[i] < 256 ? 2 : t[i] < 65_536 ? 3 : 5;
                }
                byte[] bytes = new byte[len];
                int p = 0;
                bytes[p++] = (byte) 0x83;
                bytes[p++] = 0x58;
                bytes[p++] = 0x20;
                p += 32;
                bytes[p++] = (byte) 0x90;
                for (int v : t) {
                    if (v < 24) {
                        bytes[p++] = (byte) v;
                    } else if (v < 256) {
                        bytes[p++] = 0x18;
                        bytes[p++] = (byte) v;
                    } else if (v < 65_536) {
                        bytes[p++] = 0x19;
                        bytes[p++] = (byte) (v >>> 8);
                        bytes[p++] = (byte) v;
                    } else {
                        bytes[p++] = 0x1A;
                        bytes[p++] = (byte) (v >>> 24);
                        bytes[p++] = (byte) (v >>> 16);
                        bytes[p++] = (byte) (v >>> 8);
                        bytes[p++] = (byte) v;
                    }
                }
                bytes[p] = (byte) 0xF6;
                blockBytes[b] = bytes;
            }
        }
    }

    @Benchmark
    public byte baseline_sha256Raw(ShaState s) throws DigestException {
        byte[][] blocks = s.blockBytes;
        for (byte[] b : blocks) {
            // Chain like the engine does: the previous digest is the parent inside this block's CBOR.
            System.arraycopy(s.digest, 0, b, 3, 32);
            s.sha.update(b, 0, b.length);
            s.sha.digest(s.digest, 0, 32);
        }
        return s.digest[31];
    }

    @State(Scope.Thread)
    public static class LoadState {
        @Param({"8", "64"})
        int endpoints;

        EndpointState[] eps;
        RoutingPolicy policy;
        final RouteEvent req = RouteEvent.of(null, Role.ANY, null, null, SessionKeys.NONE, false, false);
        final StringBuilder why = new StringBuilder(256);

        @Setup(Level.Trial)
        public void setup() {
            eps = endpoints(rule(endpoints));
            policy = Policies.create("least_outstanding");
        }
    }

    @Benchmark
    public EndpointState baseline_leastOutstanding(LoadState s) {
        s.why.setLength(0);
        return s.policy.choose(s.eps, s.req, System.nanoTime(), s.why);
    }
}
