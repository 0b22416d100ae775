package io.kvgate.dataplane;

import io.kvgate.control.config.GatewayConfig;

/** Starts a fully wired gateway (all request hooks installed): the one entry point for serve, demo and tests. */
public final class GatewayLauncher {
    private GatewayLauncher() {}

    public static Gateway start(GatewayConfig cfg) throws Exception {
        return Gateway.start(cfg);
    }
}
