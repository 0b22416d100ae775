package io.kvgate.dataplane.route;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Per-rule routing counters: decisions per tier and KV misses per reason, the zero-hit watchdog and the matched
 * prompt fraction. Written by the routing stage, read by metrics/admin threads. Survives configuration swaps by
 * rule name.
 */
public final class RuleStats {
    private static final ConcurrentHashMap<String, RuleStats> BY_RULE = new ConcurrentHashMap<>();

    final ConcurrentHashMap<String, AtomicLong> tiers = new ConcurrentHashMap<>();
    final ConcurrentHashMap<String, AtomicLong> misses = new ConcurrentHashMap<>();
    final AtomicLong watchdogFirings = new AtomicLong();
    final AtomicLong lookups = new AtomicLong();
    final AtomicLong promptBlocks = new AtomicLong();
    final AtomicLong matchedBlocks = new AtomicLong();
    /** Consecutive lookups that matched nothing while the inventory was not empty (routing stage only). */
    int zeroHitStreak;
    boolean watchdogWarned;

    public static RuleStats of(String rule) {
        return BY_RULE.computeIfAbsent(rule, r -> new RuleStats());
    }

    void tier(String tier) {
        // Single writer (the routing stage): get-then-lazySet avoids a locked increment; readers tolerate staleness.
        AtomicLong a = tiers.get(tier);
        if (a == null) {
            a = tiers.computeIfAbsent(tier, k -> new AtomicLong());
        }
        a.lazySet(a.get() + 1);
    }

    void miss(String reason) {
        misses.computeIfAbsent(reason, k -> new AtomicLong()).incrementAndGet();
    }

    public long tierCount(String tier) {
        AtomicLong a = tiers.get(tier);
        return a == null ? 0 : a.get();
    }

    public long missCount(String reason) {
        AtomicLong a = misses.get(reason);
        return a == null ? 0 : a.get();
    }

    public long watchdogFirings() {
        return watchdogFirings.get();
    }

    public static void writeAll(StringBuilder out) {
        out.append("# HELP kvgate_route_decisions_total Routing decisions by rule and the policy tier that made them.\n");
        out.append("# TYPE kvgate_route_decisions_total counter\n");
        BY_RULE.forEach((rule, s) -> s.tiers.forEach((t, v) -> out.append("kvgate_route_decisions_total{rule=\"").append(rule)
            .append("\",tier=\"").append(t).append("\"} ").append(v.get()).append('\n')));
        out.append("# HELP kvgate_kv_misses_total KV-aware decisions that fell back, by reason.\n# TYPE kvgate_kv_misses_total counter\n");
        BY_RULE.forEach((rule, s) -> s.misses.forEach((t, v) -> out.append("kvgate_kv_misses_total{rule=\"").append(rule)
            .append("\",reason=\"").append(t).append("\"} ").append(v.get()).append('\n')));
        out.append("# HELP kvgate_kv_zero_hit_watchdog_total Zero-hit streaks against a non-empty inventory (silent hash mismatch?).\n");
        out.append("# TYPE kvgate_kv_zero_hit_watchdog_total counter\n");
        BY_RULE.forEach((rule, s) -> out.append("kvgate_kv_zero_hit_watchdog_total{rule=\"").append(rule).append("\"} ")
            .append(s.watchdogFirings.get()).append('\n'));
        out.append("# HELP kvgate_kv_matched_blocks_total Prompt blocks found cached on the chosen endpoint.\n");
        out.append("# TYPE kvgate_kv_matched_blocks_total counter\n");
        BY_RULE.forEach((rule, s) -> out.append("kvgate_kv_matched_blocks_total{rule=\"").append(rule).append("\"} ")
            .append(s.matchedBlocks.get()).append('\n'));
        out.append("# HELP kvgate_kv_prompt_blocks_total Full prompt blocks looked up.\n# TYPE kvgate_kv_prompt_blocks_total counter\n");
        BY_RULE.forEach((rule, s) -> out.append("kvgate_kv_prompt_blocks_total{rule=\"").append(rule).append("\"} ")
            .append(s.promptBlocks.get()).append('\n'));
    }
}
