package io.kvgate.dataplane.exchange;

import java.util.concurrent.ConcurrentHashMap;

/**
 * One {@link HedgeBudget} per rule name, shared by the gateway's event loops. A reload that changes a rule's
 * {@code hedge.window_ms} starts that rule's budget afresh (the old window's sums do not fit the new buckets).
 */
public final class HedgeBudgets {
    private final ConcurrentHashMap<String, HedgeBudget> byRule = new ConcurrentHashMap<>();

    public HedgeBudget forRule(String rule, long windowMs) {
        HedgeBudget b = byRule.get(rule);
        if (b != null && b.windowMs() == windowMs) {
            return b;
        }
        return byRule.compute(rule, (k, old) -> old != null && old.windowMs() == windowMs
            ? old : new HedgeBudget(windowMs));
    }
}
