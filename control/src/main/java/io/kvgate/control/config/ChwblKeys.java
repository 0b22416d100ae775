package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.ChwblConfig;

/** Section {@code rules[].chwbl}: consistent hashing with bounded loads. */
public final class ChwblKeys {
    private ChwblKeys() {}

    public static final ConfigSection<ChwblConfig> SECTION = ConfigSection.mapping(RuleKeys.SECTION, "chwbl",
        "policy `chwbl`: consistent hashing with bounded loads", RuleConfig::chwbl);

    public static final ConfigKey<ChwblConfig, Integer> PREFIX_TOKENS = SECTION.intKey("prefix_tokens", 0, 0, 1 << 20)
        .doc("ring key = N tokens of the prompt, after the common prefix (`skip_common_prefix`; 0: use `prefix_blocks`)").live()
        .readBack(ChwblConfig::prefixTokens);
    public static final ConfigKey<ChwblConfig, Integer> PREFIX_BLOCKS = SECTION.intKey("prefix_blocks", 8, 0, 1 << 16)
        .doc("ring key = N blocks of the prompt, after the common prefix (`skip_common_prefix`)").live()
        .readBack(ChwblConfig::prefixBlocks);
    public static final ConfigKey<ChwblConfig, Integer> VIRTUAL_NODES = SECTION.intKey("virtual_nodes", 128, 1, 4096)
        .doc("ring points per unit of weight").live().readBack(ChwblConfig::virtualNodes);
    public static final ConfigKey<ChwblConfig, Double> LOAD_FACTOR = SECTION.doubleKey("load_factor", 1.0, 0.0, 10.0)
        .doc("ε: an endpoint's bound is ⌈(1+ε)·mean load⌉").live().readBack(ChwblConfig::loadFactor);
    public static final ConfigKey<ChwblConfig, Integer> PREFIX_CHARS = SECTION.intKey("prefix_chars", RuleConfig.DEFAULT_PREFIX_CHARS,
            1, RuleConfig.MAX_PREFIX_CHARS)
        .doc("rules without a tokenizer: ring key = the first N characters of the request text").live()
        .readBack(ChwblConfig::prefixChars);
    public static final ConfigKey<ChwblConfig, Boolean> SKIP_COMMON_PREFIX = SECTION.boolKey("skip_common_prefix", true)
        .doc("the ring key starts after the block-aligned prefix every request of the rule has shared so far (a"
            + " system prompt all requests carry), so it keys what differs").live()
        .readBack(ChwblConfig::skipCommonPrefix);
}
