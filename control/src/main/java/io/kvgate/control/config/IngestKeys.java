package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Ingest;

/** Section {@code ingest}: what one engine, or any peer of a bound socket, may cost the KV-event ingest. */
public final class IngestKeys {
    private IngestKeys() {}

    public static final ConfigSection<Ingest> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "ingest",
        "KV-event ingest bounds (restart-only: subscriptions are opened with them)", GatewayConfig::ingest).restartAsWhole();

    private static final Ingest D = Ingest.DEFAULTS;

    public static final ConfigKey<Ingest, Integer> MAX_FRAME_BYTES = SECTION.intKey("max_frame_bytes", D.maxFrameBytes(), 1024,
            1 << 30)
        .doc("largest KV-event frame (`ZMQ_MAXMSGSIZE`); a peer declaring more is disconnected").restartOnly()
        .readBack(Ingest::maxFrameBytes);
    public static final ConfigKey<Ingest, Long> RECEIVE_BUFFER_BYTES = SECTION.longKey("receive_buffer_bytes",
            D.receiveBufferBytes(), 1024, 1L << 40)
        .doc("worst-case bytes one event socket may queue (≥ `max_frame_bytes`)").restartOnly()
        .readBack(Ingest::receiveBufferBytes);
    public static final ConfigKey<Ingest, Integer> SOCKET_RECEIVE_BUFFER_BYTES = SECTION.intKey("socket_receive_buffer_bytes",
            D.socketReceiveBufferBytes(), 0, 1 << 30)
        .doc("`SO_RCVBUF` of every connecting event socket; 0 = the kernel's default").restartOnly()
        .readBack(Ingest::socketReceiveBufferBytes);
    public static final ConfigKey<Ingest, Long> RETRY_INITIAL_MS = SECTION.longKey("retry_initial_ms", D.retryInitialMs(), 1, 600_000)
        .doc("first delay before re-opening a failed subscription; doubles per failure").restartOnly()
        .readBack(Ingest::retryInitialMs);
    public static final ConfigKey<Ingest, Long> RETRY_MAX_MS = SECTION.longKey("retry_max_ms", D.retryMaxMs(), 1, 3_600_000)
        .doc("cap of that delay (≥ `retry_initial_ms`)").restartOnly().readBack(Ingest::retryMaxMs);
    public static final ConfigKey<Ingest, Integer> MAX_PEERS_PER_BIND_SOCKET = SECTION.intKey("max_peers_per_bind_socket",
            D.maxPeersPerBindSocket(), 1, 1024)
        .doc("connections one bound socket admits at once; the ZAP handler refuses more").restartOnly()
        .readBack(Ingest::maxPeersPerBindSocket);
}
