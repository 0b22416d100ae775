package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.TierWeights;

/** Section {@code rules[].kv.tier_weights}: what a cached block is worth by the memory tier its engine reported. */
public final class TierWeightKeys {
    private TierWeightKeys() {}

    public static final ConfigSection<TierWeights> SECTION = ConfigSection.mapping(KvKeys.SECTION, "tier_weights",
        "a match counts as its length × the weight of its last block's tier", RuleConfig.KvExactConfig::tierWeights);

    private static final TierWeights D = TierWeights.DEFAULTS;

    public static final ConfigKey<TierWeights, Double> GPU = SECTION.doubleKey("GPU", D.gpu(), 0.0, 1.0)
        .doc("blocks in GPU memory").live().readBack(TierWeights::gpu);
    public static final ConfigKey<TierWeights, Double> CPU_TIER = SECTION.doubleKey("CPU_TIER", D.cpu(), 0.0, 1.0)
        .doc("blocks offloaded to CPU memory (vLLM CPU, SGLang CPU_PINNED)").live().readBack(TierWeights::cpu);
    public static final ConfigKey<TierWeights, Double> DISK = SECTION.doubleKey("DISK", D.disk(), 0.0, 1.0)
        .doc("blocks on storage (STORAGE, DISK, EXTERNAL)").live().readBack(TierWeights::disk);
}
