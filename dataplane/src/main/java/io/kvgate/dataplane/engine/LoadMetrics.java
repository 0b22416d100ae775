package io.kvgate.dataplane.engine;

import java.util.List;

/**
 * The Prometheus families an engine's metrics page states its load in: requests running, requests waiting in its
 * own queue, KV-cache usage (0..1), several names when builds differ, and the label that carries the DP rank.
 *
 * @param rankLabel the label naming the DP rank of a series, or null (one rank: every series is rank 0)
 */
public record LoadMetrics(List<String> running, List<String> waiting, List<String> usage, String rankLabel) {
    public LoadMetrics {
        running = List.copyOf(running);
        waiting = List.copyOf(waiting);
        usage = List.copyOf(usage);
    }
}
