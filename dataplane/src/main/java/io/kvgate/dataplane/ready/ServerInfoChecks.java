package io.kvgate.dataplane.ready;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.dataplane.route.EndpointState;
import io.kvgate.dataplane.route.RouteTable;
import io.kvgate.dataplane.route.Rule;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * What each SGLang endpoint's {@code /server_info} said against its rules' configuration ({@link SglangServerInfo}):
 * the findings per rule and endpoint (shown in the inventory and by {@code ctl doctor}), how many distinct findings
 * were seen (a metric), which path answered, and one warning per distinct finding. Thread-safe: written by the
 * model-probe thread, read by admin threads.
 */
public final class ServerInfoChecks {
    private final Consumer<String> warn;
    /** Per "rule|endpoint": the findings of the latest answer (empty when it agreed). */
    private final Map<String, List<SglangServerInfo.Finding>> findings = new ConcurrentHashMap<>();
    /** Per endpoint: the path that answered ({@code /server_info}, or the deprecated alias). */
    private final Map<String, String> answeredAt = new ConcurrentHashMap<>();
    private final AtomicLong mismatches = new AtomicLong();

    public ServerInfoChecks(Consumer<String> warn) {
        this.warn = warn;
    }

    /** Judges one answer of {@code ep} for every rule of {@code table} that routes to it. */
    public void observe(RouteTable table, EndpointState ep, String path, JsonNode info) {
        String before = answeredAt.put(ep.key(), path);
        if (SglangServerInfo.DEPRECATED_PATH.equals(path) && !path.equals(before)) {
            warn.accept("endpoint " + ep.key() + " answers only the deprecated " + SglangServerInfo.DEPRECATED_PATH
                + " (an SGLang release before " + SglangServerInfo.PATH + "); its server info is read there");
        }
        for (Rule r : table.rules()) {
            if (!r.endpoints().contains(ep)) {
                continue;
            }
            List<SglangServerInfo.Finding> now = List.copyOf(SglangServerInfo.check(r.config(), ep.config(), info));
            List<SglangServerInfo.Finding> was = findings.put(key(r.name(), ep.key()), now);
            for (SglangServerInfo.Finding f : now) {
                if (was == null || !was.contains(f)) {
                    mismatches.incrementAndGet();
                    warn.accept("rule '" + r.name() + "' endpoint " + ep.key() + " (" + path + "): " + f.describe());
                }
            }
        }
    }

    /** The findings of {@code endpoint}'s latest answer for {@code rule}; null when it was never read. */
    public List<SglangServerInfo.Finding> findings(String rule, String endpoint) {
        return findings.get(key(rule, endpoint));
    }

    /** The path {@code endpoint} answered its server info at, or null before one did. */
    public String answeredAt(String endpoint) {
        return answeredAt.get(endpoint);
    }

    /** Distinct disagreements seen since start (each new finding of a rule and endpoint counts once). */
    public long mismatches() {
        return mismatches.get();
    }

    private static String key(String rule, String endpoint) {
        return rule + "|" + endpoint;
    }
}
