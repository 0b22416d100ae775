package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Load;

/** Section {@code load}: engine-reported load, scraped from every endpoint's Prometheus page. */
public final class LoadKeys {
    private LoadKeys() {}

    public static final ConfigSection<Load> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "load",
        "engine-reported load (see [routing](routing.md): the load estimate)", GatewayConfig::load);

    private static final Load D = Load.DEFAULTS;

    public static final ConfigKey<Load, Boolean> ENABLED = SECTION.boolKey("enabled", D.enabled())
        .doc("scrape every endpoint's metrics page for its running + waiting requests").readBack(Load::enabled);
    public static final ConfigKey<Load, Long> SCRAPE_INTERVAL_MS = SECTION.longKey("scrape_interval_ms", D.scrapeIntervalMs(), 10,
            600_000)
        .doc("time between two scrapes of one endpoint").readBack(Load::scrapeIntervalMs);
    public static final ConfigKey<Load, Long> STALE_MS = SECTION.longKey("stale_ms", D.staleMs(), 10, 3_600_000)
        .doc("an older reading is unknown: the endpoint is routed on local counts (≥ `scrape_interval_ms`)")
        .readBack(Load::staleMs);
    public static final ConfigKey<Load, Long> TIMEOUT_MS = SECTION.longKey("timeout_ms", D.timeoutMs(), 1, 600_000)
        .doc("bound of one scrape, connect included").readBack(Load::timeoutMs);
    public static final ConfigKey<Load, Integer> MAX_BODY_BYTES = SECTION.intKey("max_body_bytes", D.maxBodyBytes(), 1024, 1 << 30)
        .doc("largest metrics page read; a larger one fails the scrape").readBack(Load::maxBodyBytes);
    public static final ConfigKey<Load, String> PATH = SECTION.stringKey("path", D.path())
        .doc("the metrics path on every endpoint (must start with `/`); unset: each engine's own, `/metrics`"
            + " (TensorRT-LLM: `/prometheus/metrics`, mounted with `return_perf_metrics`)").readBack(Load::path);
    public static final ConfigKey<Load, String> PEER_DECAY = SECTION.oneOfKey("peer_decay", D.peerDecay(), Load.PEER_DECAYS)
        .doc("how the other gateways' part of a reading ages: toward its recent mean over the request lifetime, or not at all")
        .readBack(Load::peerDecay);
    public static final ConfigKey<Load, Boolean> TTFT_AWARE = SECTION.boolKey("ttft_aware", D.ttftAware())
        .doc("load-aware policies weigh an endpoint whose recent time to first token is over twice its rule's fleet"
            + " value as that many times busier (outlier avoidance)").readBack(Load::ttftAware);
    public static final ConfigKey<Load, Long> TTFT_RECOVER_MS = SECTION.longKey("ttft_recover_ms", D.ttftRecoverMs(), 10,
            600_000)
        .doc("time constant over which a slow endpoint's excess TTFT fades toward the fleet's while no new first token"
            + " is measured there, so it is tried again").readBack(Load::ttftRecoverMs);
}
