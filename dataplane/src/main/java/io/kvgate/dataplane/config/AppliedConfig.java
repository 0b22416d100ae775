package io.kvgate.dataplane.config;

import io.kvgate.control.config.ConfigTree;
import io.kvgate.control.config.GatewayConfig;

/**
 * A configuration the gateway accepted: its version (1 at start-up, +1 for every accepted change, exported as
 * {@code kvgate_config_version}) and the digest of its effective, redacted form ({@code kvgate_config_info}).
 */
public record AppliedConfig(long version, String digest, GatewayConfig config, long appliedAtEpochMs) {
    public static AppliedConfig first(GatewayConfig cfg) {
        return new AppliedConfig(1, ConfigTree.digest(cfg), cfg, System.currentTimeMillis());
    }

    public AppliedConfig next(GatewayConfig cfg) {
        return new AppliedConfig(version + 1, ConfigTree.digest(cfg), cfg, System.currentTimeMillis());
    }
}
