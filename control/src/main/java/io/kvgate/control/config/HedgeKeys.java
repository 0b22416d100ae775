package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.HedgeConfig;

/** Section {@code rules[].hedge}: hedged first token for interactive requests (on when {@code after_ms} is set). */
public final class HedgeKeys {
    private HedgeKeys() {}

    public static final ConfigSection<HedgeConfig> SECTION = ConfigSection.optionalMapping(RuleKeys.SECTION, "hedge",
        "hedged first token for `interactive` requests (see [hedging](hedging.md)); on when `after_ms` is set",
        RuleConfig::hedge, HedgeConfig::enabled);

    public static final ConfigKey<HedgeConfig, Integer> AFTER_MS = SECTION.optionalIntKey("after_ms", 1, 600_000, "off")
        .doc("an interactive request with no first token this long after it was sent also goes to the next-best endpoint")
        .readBack(h -> h.enabled() ? (int) h.afterMs() : null);
    public static final ConfigKey<HedgeConfig, Double> MAX_EXTRA_RATIO = SECTION.doubleKey("max_extra_ratio",
            HedgeConfig.DEFAULT_MAX_EXTRA_RATIO, 0.0, 1.0)
        .doc("hedge legs' prompt tokens may be at most this fraction of the rule's interactive prompt tokens over"
            + " `window_ms`; over it a request is not hedged (`kvgate_hedges_total{result=\"skipped_budget\"}`)")
        .readBack(HedgeConfig::maxExtraRatio);
    public static final ConfigKey<HedgeConfig, Long> WINDOW_MS = SECTION.longKey("window_ms", HedgeConfig.DEFAULT_WINDOW_MS,
            1_000, 3_600_000)
        .doc("the sliding window the `max_extra_ratio` budget is measured over").readBack(HedgeConfig::windowMs);
    public static final ConfigKey<HedgeConfig, Double> TTFT_FACTOR = SECTION.optionalDoubleKey("ttft_factor", 1.0, 100.0, "off")
        .doc("wait max(`after_ms`, this × the endpoint's recent TTFT, capped at the rule's fleet value) before hedging;"
            + " `after_ms` alone while the endpoint has no estimate")
        .readBack(h -> h.ttftFactor() > 0 ? h.ttftFactor() : null);
}
