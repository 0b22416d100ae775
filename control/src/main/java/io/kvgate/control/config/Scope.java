package io.kvgate.control.config;

/**
 * When a change of a configuration key takes effect. Declared once per key ({@link ConfigKey}); the reload's refusal
 * of restart-only changes, the list of live tunables {@code ctl patch} accepts and the scope column of
 * docs/configuration.md all come from it.
 */
public enum Scope {
    /** Read at start-up only: a reload that changes it is refused (409) naming it. */
    RESTART,
    /** Applied by a reload (a full configuration: {@code PUT /admin/v1/config}, {@code ctl apply}, SIGHUP). */
    RELOAD,
    /** A per-rule tunable: also applied by {@code PATCH /control/v1/rules/{name}} ({@code ctl patch}). */
    LIVE;

    /** How docs/configuration.md names it. */
    public String docName() {
        return switch (this) {
            case RESTART -> "restart";
            case RELOAD -> "reload";
            case LIVE -> "live";
        };
    }
}
