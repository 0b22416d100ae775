package io.kvgate.control.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Section {@code shutdown}: what SIGTERM/SIGINT do before the listener closes.
 *
 * @param drainDelayMs how long the gateway keeps accepting and serving after the signal while {@code /ready} already
 *                     answers 503, so balancers and orchestrators take it out of rotation before it stops accepting
 *                     (0 = stop accepting at once, as before this key existed)
 */
public record ShutdownConfig(long drainDelayMs) {
    /** Longer than any balancer's health-check interval times its fall count needs, short of systemd's stop timeout. */
    public static final long MAX_DRAIN_DELAY_MS = 600_000;
    public static final ShutdownConfig DEFAULTS = new ShutdownConfig(5_000);

    /** Reads {@code shutdown} from the configuration's root; problems are named {@code shutdown.KEY}. */
    public static ShutdownConfig read(ConfigNode root) {
        ConfigNode s = root.child("shutdown");
        ShutdownConfig c = new ShutdownConfig(s.longValue("drain_delay_ms", DEFAULTS.drainDelayMs(), 0, MAX_DRAIN_DELAY_MS));
        s.finish();
        return c;
    }

    /** The section as {@link ConfigTree} writes it back. */
    public Map<String, Object> tree() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("drain_delay_ms", drainDelayMs);
        return m;
    }
}
