package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Limits;

/** Section {@code limits}: what one client request or connection may cost the gateway before it is refused. */
public final class LimitsKeys {
    private LimitsKeys() {}

    public static final ConfigSection<Limits> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "limits",
        "client-side bounds (connection-level ones apply to the next connection)", GatewayConfig::limits);

    public static final ConfigKey<Limits, Integer> MAX_BODY_BYTES = SECTION.intKey("max_body_bytes", 8 << 20, 1024, 1 << 30)
        .doc("larger request bodies → 413").readBack(Limits::maxBodyBytes);
    public static final ConfigKey<Limits, Integer> MAX_HEADER_BYTES = SECTION.intKey("max_header_bytes", 16 << 10, 1024, 1 << 20)
        .doc("larger request heads → 431 and close").readBack(Limits::maxHeaderBytes);
    public static final ConfigKey<Limits, Integer> MAX_INITIAL_LINE_BYTES = SECTION.intKey("max_initial_line_bytes", 8 << 10, 256,
            1 << 20)
        .doc("longer request lines → 414 and close").readBack(Limits::maxInitialLineBytes);
    public static final ConfigKey<Limits, Long> REQUEST_READ_TIMEOUT_MS = SECTION.longKey("request_read_timeout_ms", 30_000, 1,
            3_600_000)
        .doc("a request must arrive within this, first head byte to last body byte → 408 and close")
        .readBack(Limits::requestReadTimeoutMs);
    public static final ConfigKey<Limits, Long> CLIENT_IDLE_TIMEOUT_MS = SECTION.longKey("client_idle_timeout_ms", 120_000, 1,
            86_400_000L)
        .doc("idle keep-alive connections are closed").readBack(Limits::clientIdleTimeoutMs);
    public static final ConfigKey<Limits, Integer> MAX_CONNECTIONS = SECTION.intKey("max_connections", 100_000, 1, 10_000_000)
        .doc("open client connections; one more is closed on accept").readBack(Limits::maxConnections);
    public static final ConfigKey<Limits, Long> CLIENT_STALL_TIMEOUT_MS = SECTION.longKey("client_stall_timeout_ms", 60_000, 1,
            3_600_000)
        .doc("a client that takes no response bytes for this long is disconnected").readBack(Limits::clientStallTimeoutMs);
    // Unset, it follows max_connections (also after a GET -> PUT): the marker is kept, not a number.
    public static final ConfigKey<Limits, Integer> MAX_CONNECTIONS_PER_CLIENT = SECTION.optionalIntKey("max_connections_per_client",
            0, 10_000_000, "half of `max_connections`")
        .doc("open connections one client address may hold; 0 = no limit")
        .readBack(l -> l.maxConnectionsPerClient() == Limits.CONNECTIONS_PER_CLIENT_DEFAULT ? null : l.maxConnectionsPerClient());
    public static final ConfigKey<Limits, Integer> MAX_BUFFERED_RESPONSE_BYTES = SECTION.intKey("max_buffered_response_bytes",
            Limits.DEFAULT_BUFFERED_RESPONSE_BYTES, Limits.DEFAULT_BUFFERED_RESPONSE_BYTES, 1 << 30)
        .doc("unsent response bytes per client connection above which it is no longer read")
        .readBack(Limits::maxBufferedResponseBytes);
}
