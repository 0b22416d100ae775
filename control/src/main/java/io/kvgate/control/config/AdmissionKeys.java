package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.AdmissionConfig;
import java.util.LinkedHashMap;
import java.util.Map;

/** Section {@code rules[].admission}: admission control (on when a saturation threshold is set). */
public final class AdmissionKeys {
    private AdmissionKeys() {}

    public static final ConfigSection<AdmissionConfig> SECTION = ConfigSection.optionalMapping(RuleKeys.SECTION, "admission",
        "admission control (see [routing](routing.md)); on when a saturation threshold is set", RuleConfig::admission,
        AdmissionConfig::enabled);

    public static final ConfigKey<AdmissionConfig, Integer> MAX_QUEUE = SECTION.intKey("max_queue",
            AdmissionConfig.DEFAULT_MAX_QUEUE, 0, 1 << 22)
        .doc("requests that may wait while every eligible endpoint is saturated (≤ `router.ring_size`)")
        .readBack(AdmissionConfig::maxQueue);
    public static final ConfigKey<AdmissionConfig, Long> MAX_WAIT_MS = SECTION.longKey("max_wait_ms",
            AdmissionConfig.DEFAULT_MAX_WAIT_MS, 50, 600_000)
        .doc("no request waits longer: it is shed with 429").readBack(AdmissionConfig::maxWaitMs);
    public static final ConfigKey<AdmissionConfig, Integer> MAX_WAITING = SECTION.optionalIntKey("max_waiting", 0, 1 << 24, "off")
        .doc("an endpoint whose engine reports more waiting requests is saturated")
        .readBack(a -> a.maxWaiting() >= 0 ? a.maxWaiting() : null);
    public static final ConfigKey<AdmissionConfig, Double> MAX_KV_USAGE = SECTION.optionalDoubleKey("max_kv_usage", 0.0, 1.0, "off")
        .doc("an endpoint whose engine reports a higher KV-cache usage fraction is saturated")
        .readBack(a -> a.maxKvUsage() >= 0 ? a.maxKvUsage() : null);
    public static final ConfigKey<AdmissionConfig, Integer> MAX_OUTSTANDING = SECTION.optionalIntKey("max_outstanding", 1, 1 << 24,
            "off")
        .doc("an endpoint with this many requests in flight from this gateway is saturated")
        .readBack(a -> a.maxOutstanding() >= 0 ? a.maxOutstanding() : null);
    public static final ConfigKey<AdmissionConfig, Integer> INTERACTIVE_RESERVE = SECTION.intKey("interactive_reserve", 0, 0, 1 << 24)
        .doc("of `max_outstanding` / `max_waiting`, how much only `interactive` requests may use")
        .readBack(a -> a.interactiveReserve() > 0 ? a.interactiveReserve() : null);
    public static final ConfigKey<AdmissionConfig, Map<String, String>> API_KEY_PRIORITIES = SECTION.stringMapKey("api_key_priorities")
        .doc("`{<SHA-256 hex of an API key>: interactive|standard|batch}`: the key's priority class")
        .readBack(a -> a.apiKeyPriorities().isEmpty() ? null : new LinkedHashMap<>(a.apiKeyPriorities()));
}
