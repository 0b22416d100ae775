package io.kvgate.control.config;

import io.kvgate.control.config.GatewayConfig.Router;

/** Section {@code router}: the routing stage's ring and thread. */
public final class RouterKeys {
    private RouterKeys() {}

    public static final ConfigSection<Router> SECTION = ConfigSection.mapping(GatewayKeys.SECTION, "router",
        "the routing stage: its ring, who runs it and how a dedicated thread waits", GatewayConfig::router);

    public static final ConfigKey<Router, Integer> RING_SIZE = SECTION.intKey("ring_size", 4096, 16, 1 << 22)
        .doc("routing ring slots (a power of two)").restartOnly().readBack(Router::ringSize);
    public static final ConfigKey<Router, String> WAIT_STRATEGY = SECTION.enumKey("wait_strategy", "blocking",
            GatewayConfig.WaitStrategy.class)
        .doc("how a dedicated routing thread waits (spinning burns a core); only `blocking` with `thread: io`")
        .restartOnly().readBack(Router::waitStrategy);
    public static final ConfigKey<Router, String> THREAD = SECTION.enumKey("thread", "auto", GatewayConfig.RouterThread.class)
        .doc("who runs the routing stage: a thread of its own, the one I/O loop (`io`, needs `io_threads: 1`), or `auto`")
        .restartOnly().readBack(Router::thread);
}
