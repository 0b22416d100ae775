package io.kvgate.control.config;

/**
 * A rule's mid-stream failover ({@code rules[].failover}, issue #41): when the engine of a started stream fails (its
 * connection drops, it sends a retryable in-stream error, or it sends nothing for {@code stallMs}), the generation
 * continues on another endpoint chosen by the rule's policy, at most {@code maxMigrations} times per request; a
 * non-streamed request is retried whole within the same budget. Off by default.
 *
 * @param midStream     failover is on
 * @param maxMigrations how many times one request may move to another endpoint (1..16)
 * @param stallMs       an engine that sends no byte of a started stream for this long is given up on and the stream
 *                      moves; 0: only a failed connection or an error event moves it (a silent engine then meets
 *                      {@code upstream.idle_timeout_ms} as before)
 */
public record FailoverConfig(boolean midStream, int maxMigrations, int stallMs) {
    public static final int DEFAULT_MAX_MIGRATIONS = 2;
    public static final FailoverConfig OFF = new FailoverConfig(false, DEFAULT_MAX_MIGRATIONS, 0);

    public boolean enabled() {
        return midStream;
    }

    /** Reads {@code rules[].failover}; {@code policy} is the rule's (P/D rules are not in scope). */
    static FailoverConfig read(ConfigNode f, String policy) {
        boolean on = FailoverKeys.MID_STREAM.read(f);
        int max = FailoverKeys.MAX_MIGRATIONS.read(f);
        int stall = FailoverKeys.STALL_MS.readIfSet(f, 0);
        if (!on && (f.has("max_migrations") || f.has("stall_ms"))) {
            f.problem(f.has("stall_ms") ? "stall_ms" : "max_migrations", f.has("stall_ms") ? stall : max,
                "only applies with failover.mid_stream: true (failover is off on this rule)");
        }
        if (on && "pd".equals(policy)) {
            f.problem("mid_stream", true, "is not available under policy 'pd': a prefill/decode request's KV hand-off"
                + " cannot be continued on another pair (failover covers plain rules)");
            on = false;
        }
        f.finish();
        return new FailoverConfig(on, max, stall);
    }
}
