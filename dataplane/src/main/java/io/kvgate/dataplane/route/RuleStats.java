package io.kvgate.dataplane.route;

import io.prometheus.metrics.core.metrics.CounterWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Locale;
import java.util.function.Supplier;

/**
 * Per-rule routing counters of one gateway: decisions per tier, KV misses per reason, the zero-hit watchdog and the
 * matched prompt fraction. Preallocated arrays indexed by enum, built with the rule (no map lookups, no locked
 * increments per decision); a configuration swap carries the counts over to the new rule of the same name
 * ({@link #carryFrom}), and a removed rule's counters leave with its table.
 *
 * <p>Threading: written by the routing stage only (single writer: plain read + release store); read by
 * metrics/admin threads through acquire loads, possibly a few decisions old.
 */
public final class RuleStats {
    /** The policy tier that made a decision; the label is the metric's {@code tier} value. */
    public enum Tier {
        KV_EXACT, KV_COLD_READMIT, FALLBACK, SESSION_PINNED, SESSION_NEW, SESSION_REPINNED, CHWBL_OWNER, CHWBL_WALK,
        /** session.mode hash: the session key's rendezvous winner; its next endpoint because the winner was over the bound. */
        SESSION_HASH, SESSION_HASH_WALK;

        final String label = name().toLowerCase(Locale.ROOT);

        /** The {@code tier} label ({@code kvgate_route_decisions_total}, the access log's {@code tier}). */
        public String label() {
            return label;
        }
    }

    /** Why a KV-aware (or session/CHWBL) decision fell back; the label is the metric's {@code reason} value. */
    public enum MissReason {
        NO_KV_EVENTS, NO_TOKENS, SHORT_PROMPT, NO_MATCH, BELOW_MIN_MATCH, OVER_LOAD_BOUND, NO_SESSION_KEY, ALL_OVER_BOUND,
        /** {@code hash_seed: auto} not resolved yet by the parity probe: no keys to look up. */
        SEED_UNRESOLVED,
        /** kv_exact: the best match covers less than {@code kv.min_match_fraction} of the prompt: routed by load. */
        WEAK_MATCH;

        final String label = name().toLowerCase(Locale.ROOT);
    }

    private static final VarHandle LONGS = MethodHandles.arrayElementVarHandle(long[].class);
    private static final int WATCHDOG = 0;
    private static final int LOOKUPS = 1;
    private static final int PROMPT_BLOCKS = 2;
    private static final int MATCHED_BLOCKS = 3;

    private final String rule;
    private final long[] tiers = new long[Tier.values().length];
    private final long[] misses = new long[MissReason.values().length];
    private final long[] kv = new long[4];
    /** Consecutive lookups that matched nothing while the inventory was not empty (routing stage only). */
    int zeroHitStreak;
    /** The watchdog's warning is printed once per rule name for the life of the gateway (routing stage only). */
    boolean watchdogWarned;

    public RuleStats(String rule) {
        this.rule = rule;
    }

    public String rule() {
        return rule;
    }

    private static void add(long[] a, int i, long n) {
        LONGS.setRelease(a, i, (long) LONGS.get(a, i) + n);
    }

    private static long read(long[] a, int i) {
        return (long) LONGS.getAcquire(a, i);
    }

    void tier(Tier t) {
        add(tiers, t.ordinal(), 1);
    }

    void miss(MissReason r) {
        add(misses, r.ordinal(), 1);
    }

    void watchdogFired() {
        add(kv, WATCHDOG, 1);
    }

    void lookup(int promptBlocks) {
        add(kv, LOOKUPS, 1);
        add(kv, PROMPT_BLOCKS, promptBlocks);
    }

    void matched(int blocks) {
        add(kv, MATCHED_BLOCKS, blocks);
    }

    public long tierCount(Tier t) {
        return read(tiers, t.ordinal());
    }

    public long missCount(MissReason r) {
        return read(misses, r.ordinal());
    }

    public long watchdogFirings() {
        return read(kv, WATCHDOG);
    }

    public long lookups() {
        return read(kv, LOOKUPS);
    }

    public long promptBlocks() {
        return read(kv, PROMPT_BLOCKS);
    }

    public long matchedBlocks() {
        return read(kv, MATCHED_BLOCKS);
    }

    /** Adds the counts of the same rule's previous version (routing stage, during a configuration swap). */
    void carryFrom(RuleStats previous) {
        for (int i = 0; i < tiers.length; i++) {
            add(tiers, i, read(previous.tiers, i));
        }
        for (int i = 0; i < misses.length; i++) {
            add(misses, i, read(previous.misses, i));
        }
        for (int i = 0; i < kv.length; i++) {
            add(kv, i, read(previous.kv, i));
        }
        zeroHitStreak = previous.zeroHitStreak;
        watchdogWarned = previous.watchdogWarned;
    }

    /**
     * Registers the rule counters, read on scrape from the rules {@code rules} supplies then (the current table).
     * Tiers and reasons that never fired are left out.
     */
    public static void register(PrometheusRegistry registry, Supplier<? extends Iterable<Rule>> rules) {
        CounterWithCallback.builder().name("kvgate_route_decisions_total")
            .help("Routing decisions by rule and the policy tier that made them.").labelNames("rule", "tier")
            .callback(cb -> {
                for (Rule r : rules.get()) {
                    for (Tier t : Tier.values()) {
                        long v = r.stats().tierCount(t);
                        if (v > 0) {
                            cb.call(v, r.name(), t.label);
                        }
                    }
                }
            }).register(registry);
        CounterWithCallback.builder().name("kvgate_kv_misses_total").help("KV-aware decisions that fell back, by reason.")
            .labelNames("rule", "reason").callback(cb -> {
                for (Rule r : rules.get()) {
                    for (MissReason m : MissReason.values()) {
                        long v = r.stats().missCount(m);
                        if (v > 0) {
                            cb.call(v, r.name(), m.label);
                        }
                    }
                }
            }).register(registry);
        family(registry, rules, "kvgate_kv_zero_hit_watchdog_total",
            "Zero-hit streaks against a non-empty inventory (silent hash mismatch?).", WATCHDOG);
        family(registry, rules, "kvgate_kv_matched_blocks_total", "Prompt blocks found cached on the chosen endpoint.", MATCHED_BLOCKS);
        family(registry, rules, "kvgate_kv_prompt_blocks_total", "Full prompt blocks looked up.", PROMPT_BLOCKS);
    }

    private static void family(PrometheusRegistry registry, Supplier<? extends Iterable<Rule>> rules, String name, String help,
                               int counter) {
        CounterWithCallback.builder().name(name).help(help).labelNames("rule").callback(cb -> {
            for (Rule r : rules.get()) {
                cb.call(read(r.stats().kv, counter), r.name());
            }
        }).register(registry);
    }
}
