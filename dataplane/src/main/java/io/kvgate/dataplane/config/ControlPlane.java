package io.kvgate.dataplane.config;

import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import java.nio.file.Path;

/**
 * What the admin API and the control socket may do to the running gateway, and nothing more: the composition root
 * ({@code Gateway}) implements it and hands it to them, so they never depend on the gateway itself.
 */
public interface ControlPlane {
    /** The configuration in effect now. */
    AppliedConfig applied();

    /**
     * Applies {@code next} (already parsed): every check, then everything built, then one swap. A failure changes
     * nothing.
     */
    ReloadOutcome reload(GatewayConfig next) throws ConfigException, RestartRequiredException;

    /** Where relative paths in an uploaded configuration resolve (the --config file's directory), or null. */
    Path baseDir();

    /** The file given to {@code --config}, or null (then "reload" has nothing to read). */
    Path configFile();

    /** Gateway drain: new client requests are refused (503), requests in flight finish; undone by {@code drain(false)}. */
    void drain(boolean on);

    /**
     * {@code ctl drain ENDPOINT --migrate}: the live streams on {@code ep} move to other endpoints (mid-stream
     * failover, cause {@code drain}); those that cannot finish until {@code withinMs}, then end with an error event.
     * Does not wait. A control plane without live exchanges does nothing.
     */
    default void migrateStreams(io.kvgate.dataplane.route.EndpointState ep, long withinMs) {}

    boolean draining();
}
