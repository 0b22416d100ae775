package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.KvExactConfig;

/** Section {@code rules[].kv}: the KV-aware policy ({@code kv_exact}). */
public final class KvKeys {
    private KvKeys() {}

    public static final ConfigSection<KvExactConfig> SECTION = ConfigSection.mapping(RuleKeys.SECTION, "kv",
        "policy `kv_exact`: longest cached prefix under a load bound", RuleConfig::kvExact);

    public static final ConfigKey<KvExactConfig, String> MODE = SECTION.enumKey("mode", "bounded", RuleConfig.KvMode.class)
        .doc("`bounded`: best prefix among endpoints under the load cap; `soft`: min(missed blocks + λ·load)").live()
        .readBack(KvExactConfig::mode);
    public static final ConfigKey<KvExactConfig, Double> LOAD_CAP_FACTOR = SECTION.doubleKey("load_cap_factor", 1.5, 1.0, 100.0)
        .doc("bounded: an endpoint takes the request while load + 1 ≤ max(factor·mean, mean + slack)").live()
        .readBack(KvExactConfig::loadCapFactor);
    public static final ConfigKey<KvExactConfig, Double> LOAD_SLACK = SECTION.doubleKey("load_slack", 2.0, 0.0, 1e6)
        .doc("bounded: the absolute slack of that bound").live().readBack(KvExactConfig::loadSlack);
    public static final ConfigKey<KvExactConfig, Double> LAMBDA = SECTION.doubleKey("lambda", 4.0, 0.0, 1e6)
        .doc("soft: cost per unit of load").live().readBack(KvExactConfig::lambda);
    public static final ConfigKey<KvExactConfig, Integer> MIN_MATCH_BLOCKS = SECTION.intKey("min_match_blocks", 1, 0, 1 << 20)
        .doc("fewer matched blocks → the fallback policy").live().readBack(KvExactConfig::minMatchBlocks);
    public static final ConfigKey<KvExactConfig, Integer> COLD_READMIT_EVERY = SECTION.intKey("cold_readmit_every", 64, 0, 1 << 20)
        .doc("every N decisions an endpoint with an empty inventory gets a request").live()
        .readBack(KvExactConfig::coldReadmitEvery);
    public static final ConfigKey<KvExactConfig, Long> SPECULATIVE_TTL_MS = SECTION.longKey("speculative_ttl_ms", 2_000, 0, 600_000)
        .doc("routed blocks count for the chosen endpoint until its events confirm them").live()
        .readBack(KvExactConfig::speculativeTtlMs);
    public static final ConfigKey<KvExactConfig, Integer> WATCHDOG_ZERO_HIT_STREAK = SECTION.intKey("watchdog_zero_hit_streak", 200,
            1, 1 << 24)
        .doc("zero-hit lookups against a non-empty inventory before the hash-mismatch warning").live()
        .readBack(KvExactConfig::watchdogZeroHitStreak);
    public static final ConfigKey<KvExactConfig, Boolean> PARITY_PROBE_AT_STARTUP = SECTION.boolKey("parity_probe_at_startup", false)
        .doc("check at start-up that the gateway's block hashes match the engines'").readBack(KvExactConfig::parityProbeAtStartup);
    public static final ConfigKey<KvExactConfig, Long> WARMUP_MS = SECTION.longKey("warmup_ms", 0, 0, 3_600_000)
        .doc("`/ready` waits this long after the rule's last expected KV subscriber connected").live()
        .readBack(KvExactConfig::warmupMs);
    public static final ConfigKey<KvExactConfig, Double> PREFILL_TOKEN_WEIGHT = SECTION.doubleKey("prefill_token_weight",
            KvExactConfig.DEFAULT_PREFILL_TOKEN_WEIGHT, 0.0, 1.0)
        .doc("request load added per uncached prompt token still in prefill (0: request counts alone)").live()
        .readBack(KvExactConfig::prefillTokenWeight);
    public static final ConfigKey<KvExactConfig, Boolean> DP_RANK_HINT = SECTION.boolKey("dp_rank_hint", true)
        .defaultText("`true` (vllm, sglang); `false` (refused true) for trtllm, llamacpp")
        .doc("score each DP rank on its own and pin the request with `X-data-parallel-rank`").live()
        .readBack(KvExactConfig::dpRankHint);
    public static final ConfigKey<KvExactConfig, Double> MIN_MATCH_FRACTION = SECTION.doubleKey("min_match_fraction",
            KvExactConfig.DEFAULT_MIN_MATCH_FRACTION, 0.0, 1.0)
        .doc("a best match below this fraction of the prompt's blocks does not pin the request: it goes to the least"
            + " loaded endpoint, ties to the longer match (0: any match pins)").live()
        .readBack(KvExactConfig::minMatchFraction);
    public static final ConfigKey<KvExactConfig, String> SPREAD = SECTION.enumKey("spread", KvExactConfig.DEFAULT_SPREAD,
            RuleConfig.Spread.class)
        .doc("where a request no cached prefix pins goes (no match, or below min_match_fraction): `least_loaded` (the"
            + " fallback policy; the least loaded endpoint for a weak match); `two_choices` (the less loaded of two"
            + " endpoints drawn at random); `recent_work` (among endpoints within one request of the least load, the one"
            + " that stored the fewest new KV blocks lately (recent_work_window_ms), every gateway's requests alike, seen"
            + " through the engines' KV events: use it behind several gateway replicas, which otherwise herd)")
        .live().readBack(KvExactConfig::spread);
    public static final ConfigKey<KvExactConfig, Long> RECENT_WORK_WINDOW_MS = SECTION.longKey("recent_work_window_ms",
            KvExactConfig.DEFAULT_RECENT_WORK_WINDOW_MS, 1, 600_000)
        .doc("spread recent_work: the decay time of an endpoint's recently stored blocks (long enough that a"
            + " conversation's blocks still count at its engine's next comparison)").live()
        .readBack(KvExactConfig::recentWorkWindowMs);
}
