package io.kvgate.dataplane.load;

import io.kvgate.dataplane.engine.EngineProfile;
import io.kvgate.dataplane.engine.EngineProfiles;
import io.kvgate.dataplane.engine.LoadMetrics;
import io.kvgate.dataplane.route.EngineReading;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The load signals of an engine's metrics page, per DP rank: requests running, requests waiting in the engine's own
 * queue, KV-cache usage. The names are the engines' own, as their profiles state them
 * ({@link EngineProfile#loadMetrics}; engine-contracts: vLLM's v1 engine, SGLang with {@code --enable-metrics},
 * llama-server with {@code --metrics}); whichever dialect the page speaks is read:
 * <ul>
 *   <li>vLLM: {@code vllm:num_requests_running}, {@code vllm:num_requests_waiting}, {@code vllm:kv_cache_usage_perc}
 *       (older builds: {@code vllm:gpu_cache_usage_perc}), one series per engine core labelled
 *       {@code engine="<DP rank>"} (vLLM's {@code PrometheusStatLogger} labels every series with
 *       {@code model_name} and {@code engine});</li>
 *   <li>SGLang: {@code sglang:num_running_reqs}, {@code sglang:num_queue_reqs}, {@code sglang:token_usage}, one
 *       series per scheduler, labelled {@code dp_rank} only when data parallelism is on (the scheduler's metrics
 *       collector adds the label when it has a DP rank), plus {@code tp_rank}, {@code pp_rank},
 *       {@code moe_ep_rank};</li>
 *   <li>llama.cpp: {@code llamacpp:requests_processing}, {@code llamacpp:requests_deferred},
 *       {@code llamacpp:kv_cache_usage_ratio} (older builds only), unlabelled;</li>
 *   <li>TensorRT-LLM ({@code /prometheus/metrics}, {@code return_perf_metrics}): {@code trtllm_num_requests_running},
 *       {@code trtllm_num_requests_waiting}, {@code trtllm_kv_cache_utilization}, labelled {@code model_name},
 *       {@code engine_type} and {@code pid}; {@code trtllm_kv_cache_tokens_per_block} is its block size.</li>
 * </ul>
 * Within one DP rank, series that differ only in a replica label ({@code tp_rank}, {@code pp_rank},
 * {@code moe_ep_rank}: the same scheduler reported by several workers) count once (their maximum); series that
 * differ in anything else (e.g. SGLang's {@code priority}) are added. Usage is the rank's maximum. A series without
 * the rank label is rank 0. A count that is negative, infinite or a rank label that is not 0..7 is skipped and
 * counted as malformed; a {@code NaN} sample is unknown (skipped, not counted).
 *
 * <p>One instance per scrape, on the load scraper's thread.
 */
final class MetricsPage implements PrometheusText.Sink {
    enum Kind { RUNNING, WAITING, USAGE, BLOCK_SIZE }

    /** What a load family means, and the label its engine puts the DP rank in (null: none). */
    private record Family(Kind kind, String rankLabel) {}

    /** Every profile's load families, by name. */
    private static final Map<String, Family> FAMILIES = families();

    private static Map<String, Family> families() {
        Map<String, Family> m = new HashMap<>();
        for (EngineProfile p : EngineProfiles.ALL) {
            LoadMetrics names = p.loadMetrics();
            if (names != null) {
                names.running().forEach(n -> m.put(n, new Family(Kind.RUNNING, names.rankLabel())));
                names.waiting().forEach(n -> m.put(n, new Family(Kind.WAITING, names.rankLabel())));
                names.usage().forEach(n -> m.put(n, new Family(Kind.USAGE, names.rankLabel())));
                names.blockSizeGauge().forEach(n -> m.put(n, new Family(Kind.BLOCK_SIZE, null)));
            }
        }
        return Map.copyOf(m);
    }

    /**
     * Labels that tell apart workers reporting the same scheduler's numbers; {@code pid}: prometheus_client's
     * multiprocess collector (trtllm-serve) labels every gauge with the process that wrote it, and a restarted
     * process's file may linger beside the live one's.
     */
    private static final java.util.Set<String> REPLICA_LABELS = java.util.Set.of("tp_rank", "pp_rank", "moe_ep_rank",
        "attn_tp_rank", "pid");

    /** Per (kind, rank, group of non-replica labels): the group's maximum. */
    private final Map<GroupKey, Double> groups = new HashMap<>();

    private record GroupKey(Kind kind, int rank, String labels) {}
    private int invalid;
    private int highestRank = -1;
    /** The engine's tokens per KV-cache block (its block-size gauge), 0 when the page states none. */
    private int tokensPerBlock;

    /** Reads {@code text}; returns this reader (for {@link #reading}, {@link #malformed}). */
    static MetricsPage read(String text) {
        MetricsPage m = new MetricsPage();
        int badLines = PrometheusText.parse(text, m); // before the add: the sink counts invalid samples meanwhile
        m.invalid += badLines;
        return m;
    }

    /** Lines skipped: malformed, or a sample whose value or rank label cannot be a load signal. */
    int malformed() {
        return invalid;
    }

    @Override
    public boolean wants(String name) {
        return FAMILIES.containsKey(name);
    }

    @Override
    public void sample(String name, String[] labels, int labelCount, double value) {
        Family family = FAMILIES.get(name);
        Kind kind = family.kind();
        if (Double.isNaN(value)) {
            return; // prometheus_client prints NaN for a gauge it cannot compute: unknown, not malformed
        }
        if (Double.isInfinite(value) || value < 0) {
            invalid++;
            return;
        }
        if (kind == Kind.BLOCK_SIZE) {
            if (value < 1 || value > Integer.MAX_VALUE || value != Math.rint(value)) {
                invalid++;
            } else {
                tokensPerBlock = (int) value;
            }
            return;
        }
        String rankLabel = family.rankLabel();
        int rank = 0;
        TreeMap<String, String> group = null;
        for (int i = 0; i < labelCount; i++) {
            String ln = labels[2 * i];
            String lv = labels[2 * i + 1];
            if (ln.equals(rankLabel)) {
                rank = rankOf(lv);
                if (rank < 0) {
                    invalid++;
                    return;
                }
            } else if (!REPLICA_LABELS.contains(ln)) {
                if (group == null) {
                    group = new TreeMap<>();
                }
                group.put(ln, lv);
            }
        }
        groups.merge(new GroupKey(kind, rank, group == null ? "" : group.toString()),
            kind == Kind.USAGE ? Math.min(1.0, value) : value, Math::max);
        highestRank = Math.max(highestRank, rank);
    }

    private static int rankOf(String v) {
        if (v.isEmpty() || v.length() > 1 || v.charAt(0) < '0' || v.charAt(0) >= '0' + EngineReading.MAX_RANKS) {
            return -1;
        }
        return v.charAt(0) - '0';
    }

    /** The tokens per KV-cache block the page states (TensorRT-LLM's {@code trtllm_kv_cache_tokens_per_block}), or 0. */
    int tokensPerBlock() {
        return tokensPerBlock;
    }

    /** Whether the page had requests running or waiting (the load estimate needs them). */
    boolean hasQueue() {
        for (GroupKey k : groups.keySet()) {
            if (k.kind() == Kind.RUNNING || k.kind() == Kind.WAITING) {
                return true;
            }
        }
        return false;
    }

    /** The reading of this page, stamped with the scrape's send time and the routing counters at that time. */
    EngineReading reading(long takenAtNs, long baseRouted, long baseCompleted) {
        return reading(takenAtNs, baseRouted, baseCompleted, new long[0], new long[0]);
    }

    /** As above, with the routing counters of the requests pinned to each DP rank at that time. */
    EngineReading reading(long takenAtNs, long baseRouted, long baseCompleted, long[] baseRankRouted, long[] baseRankCompleted) {
        int n = Math.max(1, highestRank + 1);
        return new EngineReading(takenAtNs, baseRouted, baseCompleted, baseRankRouted, baseRankCompleted,
            counts(Kind.RUNNING, n), counts(Kind.WAITING, n), usage(n));
    }

    /** Per rank: the sum over label groups, -1 for a rank without any series of {@code kind}. */
    private int[] counts(Kind kind, int n) {
        double[] sum = new double[n];
        Arrays.fill(sum, -1);
        for (Map.Entry<GroupKey, Double> e : groups.entrySet()) {
            GroupKey k = e.getKey();
            if (k.kind() == kind) {
                sum[k.rank()] = Math.max(0, sum[k.rank()]) + e.getValue();
            }
        }
        int[] out = new int[n];
        for (int r = 0; r < n; r++) {
            out[r] = sum[r] < 0 ? -1 : (int) Math.min(Integer.MAX_VALUE, Math.round(sum[r]));
        }
        return out;
    }

    /** Per rank: the maximum over label groups, NaN for a rank without a usage series. */
    private double[] usage(int n) {
        double[] out = new double[n];
        Arrays.fill(out, Double.NaN);
        for (Map.Entry<GroupKey, Double> e : groups.entrySet()) {
            GroupKey k = e.getKey();
            if (k.kind() == Kind.USAGE) {
                out[k.rank()] = Double.isNaN(out[k.rank()]) ? e.getValue() : Math.max(out[k.rank()], e.getValue());
            }
        }
        return out;
    }
}
