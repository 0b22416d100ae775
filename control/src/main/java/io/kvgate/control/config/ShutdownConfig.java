package io.kvgate.control.config;


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
        ConfigNode s = root.child(ShutdownKeys.SECTION.name());
        ShutdownConfig c = new ShutdownConfig(ShutdownKeys.DRAIN_DELAY_MS.read(s));
        s.finish();
        return c;
    }
}
