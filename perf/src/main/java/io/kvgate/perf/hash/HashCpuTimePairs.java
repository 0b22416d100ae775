package io.kvgate.perf.hash;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Cross-check for the JMH numbers on a shared, oversubscribed machine: runs the SAME benchmark methods
 * ({@link BlockHashBench}, {@link PrefixCacheBench}) interleaved round by round and measures this thread's CPU
 * time instead of wall time, so time spent descheduled does not count. Not a replacement for JMH (no forks, no
 * blackholes; results are consumed into a sink), a way to get stable ratios when wall-clock noise is ±50%.
 *
 * <pre>java @deploy/jvm.options -cp 'perf/target/kvgate-perf.jar:perf/target/lib/*' io.kvgate.perf.hash.HashCpuTimePairs</pre>
 */
public final class HashCpuTimePairs {
    private static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    private interface Op {
        long run() throws Exception;
    }

    private record Case(Op op, int unitsPerOp, String unit) {}

    private static long sink;

    private HashCpuTimePairs() {}

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 7;
        BlockHashBench b = new BlockHashBench();
        b.blockSize = 16;
        b.setup();
        PrefixCacheBench c = new PrefixCacheBench();
        c.cacheEntries = args.length > 1 ? Integer.parseInt(args[1]) : 1 << 16;
        c.setup();
        Map<String, Case> cases = new LinkedHashMap<>();
        int blocks = BlockHashBench.BLOCKS;
        cases.put("sha256Cbor_blockHasher", new Case(b::sha256Cbor_blockHasher, blocks, "ns/block"));
        cases.put("sha256Cbor_rawMessageDigest", new Case(() -> b.sha256Cbor_rawMessageDigest(), blocks, "ns/block"));
        cases.put("xxhashCbor_blockHasher", new Case(b::xxhashCbor_blockHasher, blocks, "ns/block"));
        cases.put("xxhashCbor_rawXxh3", new Case(b::xxhashCbor_rawXxh3, blocks, "ns/block"));
        cases.put("xxhashCbor_rawOwnXxh3", new Case(b::xxhashCbor_rawOwnXxh3, blocks, "ns/block"));
        cases.put("sglang_blockHasher", new Case(b::sglang_blockHasher, blocks, "ns/block"));
        cases.put("sglang_rawMessageDigest", new Case(() -> b.sglang_rawMessageDigest(), blocks, "ns/block"));
        cases.put("turn1_noCache", new Case(c::turn1_noCache, 1, "ns/op"));
        cases.put("turn1_cache", new Case(c::turn1_cache, 1, "ns/op"));
        cases.put("turn20_noCache", new Case(c::turn20_noCache, 1, "ns/op"));
        cases.put("turn20_cache", new Case(c::turn20_cache, 1, "ns/op"));
        cases.put("turn20_resumeFromHead", new Case(c::turn20_resumeFromHead, 1, "ns/op"));
        cases.put("turn20_cacheAllHit", new Case(c::turn20_cacheAllHit, 1, "ns/op"));

        Map<String, double[]> results = new LinkedHashMap<>();
        cases.keySet().forEach(k -> results.put(k, new double[rounds]));
        for (int r = -2; r < rounds; r++) {
            for (Map.Entry<String, Case> e : cases.entrySet()) {
                double ns = cpuNsPerUnit(e.getValue());
                if (r >= 0) {
                    results.get(e.getKey())[r] = ns;
                }
            }
        }
        System.out.printf("%-30s %12s %s%n", "case", "median", "unit (thread CPU time, " + rounds + " rounds)");
        results.forEach((k, v) -> System.out.printf("%-30s %12.1f %s%n", k, median(v), cases.get(k).unit()));
        System.out.println("(sink " + (sink & 1) + ")");
    }

    private static double cpuNsPerUnit(Case c) throws Exception {
        int reps = 0;
        long start = MX.getCurrentThreadCpuTime();
        long elapsed;
        do {
            sink += c.op().run();
            reps++;
            elapsed = MX.getCurrentThreadCpuTime() - start;
        } while (elapsed < 200_000_000L);
        return elapsed / (double) reps / c.unitsPerOp();
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        java.util.Arrays.sort(s);
        return s[s.length / 2];
    }
}
