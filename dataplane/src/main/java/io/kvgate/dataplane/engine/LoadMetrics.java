package io.kvgate.dataplane.engine;

import java.util.List;

/**
 * The Prometheus families an engine's metrics page states its load in: requests running, requests waiting in its
 * own queue, KV-cache usage (0..1), several names when builds differ, and the label that carries the DP rank; where
 * the engine serves that page, and the gauge (if any) that states its KV-cache block size in tokens.
 *
 * @param rankLabel      the label naming the DP rank of a series, or null (one rank: every series is rank 0)
 * @param path           the path of the page when {@code load.path} is not set ({@code /metrics}; trtllm-serve's
 *                       Prometheus page is {@code /prometheus/metrics}, its {@code /metrics} being JSON)
 * @param blockSizeGauge gauges whose value is the engine's tokens per KV-cache block (empty: it states none as a
 *                       gauge), read to check the rule's {@code block_size}
 */
public record LoadMetrics(List<String> running, List<String> waiting, List<String> usage, String rankLabel,
                          String path, List<String> blockSizeGauge) {
    /** The path most engines serve their Prometheus page at. */
    public static final String DEFAULT_PATH = "/metrics";

    public LoadMetrics {
        running = List.copyOf(running);
        waiting = List.copyOf(waiting);
        usage = List.copyOf(usage);
        blockSizeGauge = List.copyOf(blockSizeGauge);
    }

    /** A page at {@code /metrics} without a block-size gauge. */
    public LoadMetrics(List<String> running, List<String> waiting, List<String> usage, String rankLabel) {
        this(running, waiting, usage, rankLabel, DEFAULT_PATH, List.of());
    }
}
