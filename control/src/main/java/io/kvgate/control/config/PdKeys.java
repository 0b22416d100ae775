package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.PdConfig;
import java.util.List;

/** Section {@code rules[].pd}: prefill/decode disaggregation (policy {@code pd}). */
public final class PdKeys {
    private PdKeys() {}

    public static final ConfigSection<PdConfig> SECTION = ConfigSection.mapping(RuleKeys.SECTION, "pd",
        "policy `pd`: prefill/decode disaggregation", RuleConfig::pd);

    public static final ConfigKey<PdConfig, Long> PREFILL_TIMEOUT_MS = SECTION.longKey("prefill_timeout_ms", 120_000, 1, 3_600_000)
        .doc("first-byte timeout of the prefill leg (→ 504)").live().readBack(PdConfig::prefillTimeoutMs);
    public static final ConfigKey<PdConfig, Long> DECODE_TIMEOUT_MS = SECTION.longKey("decode_timeout_ms", 600_000, 1, 3_600_000)
        .doc("first-byte timeout of the decode leg (→ 504)").live().readBack(PdConfig::decodeTimeoutMs);
    public static final ConfigKey<PdConfig, String> PREFILL_POLICY = SECTION.oneOfKey("prefill_policy", "kv_exact",
            List.of("kv_exact", "least_outstanding"))
        .doc("prefill choice when the prefills publish events (else least outstanding)").readBack(PdConfig::prefillPolicy);
    public static final ConfigKey<PdConfig, Boolean> SESSION_AFFINITY = SECTION.boolKey("session_affinity", false)
        .doc("keep a conversation (the rule's `session.key`) on the same prefill/decode pair").readBack(PdConfig::sessionAffinity);
    public static final ConfigKey<PdConfig, Integer> MIN_UNCACHED_TOKENS = SECTION.intKey("min_uncached_tokens",
            PdConfig.DEFAULT_MIN_UNCACHED_TOKENS, 0, 1 << 24)
        .defaultText("256 (sglang: 0, the only value it accepts)")
        .doc("conditional P/D: the decode endpoint serves alone when fewer prompt tokens than this are not cached on it")
        .readBack(PdConfig::minUncachedTokens);
}
