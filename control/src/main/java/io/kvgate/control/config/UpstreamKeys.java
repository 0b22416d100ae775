package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Upstream;

/** Section {@code upstream}: engine-side timeouts and retry bounds. */
public final class UpstreamKeys {
    private UpstreamKeys() {}

    public static final ConfigSection<Upstream> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "upstream",
        "engine-side timeouts and retry bounds", GatewayConfig::upstream);

    public static final ConfigKey<Upstream, Long> CONNECT_TIMEOUT_MS = SECTION.longKey("connect_timeout_ms", 2_000, 1, 600_000)
        .doc("then another endpoint is tried").readBack(Upstream::connectTimeoutMs);
    public static final ConfigKey<Upstream, Long> FIRST_BYTE_TIMEOUT_MS = SECTION.longKey("first_byte_timeout_ms", 300_000, 1,
            3_600_000)
        .doc("no response head → 504").readBack(Upstream::firstByteTimeoutMs);
    public static final ConfigKey<Upstream, Long> IDLE_TIMEOUT_MS = SECTION.longKey("idle_timeout_ms", 120_000, 1, 3_600_000)
        .doc("no bytes (or no complete SSE event) mid-stream → error frame + `[DONE]`").readBack(Upstream::idleTimeoutMs);
    public static final ConfigKey<Upstream, Integer> MAX_CONNECT_ATTEMPTS = SECTION.intKey("max_connect_attempts", 3, 1, 16)
        .doc("endpoints tried per request when one processed nothing").readBack(Upstream::maxConnectAttempts);
    public static final ConfigKey<Upstream, Integer> MAX_IDLE_PER_ENDPOINT = SECTION.intKey("max_idle_per_endpoint", 256, 0, 100_000)
        .doc("pooled keep-alive connections per event loop and endpoint").readBack(Upstream::maxIdlePerEndpoint);
    public static final ConfigKey<Upstream, Integer> MAX_ERROR_BODY_BYTES = SECTION.intKey("max_error_body_bytes", 64 << 10, 1024,
            16 << 20)
        .doc("largest engine error body read to rewrite it into an OpenAI error").readBack(Upstream::maxErrorBodyBytes);
}
