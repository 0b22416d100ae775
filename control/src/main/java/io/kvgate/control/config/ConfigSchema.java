package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;

/**
 * Every configuration section, in document order: the one list the read-back, the live tunables, the restart-only
 * keys and docs/configuration.md ({@link ConfigDocs}) are derived from. A new section is one {@code *Keys} class
 * and one line here.
 */
public final class ConfigSchema {
    private ConfigSchema() {}

    public static final List<ConfigSection<?>> SECTIONS = List.of(
        GatewayKeys.SECTION,
        AdminLimitsKeys.SECTION,
        LimitsKeys.SECTION,
        UpstreamKeys.SECTION,
        HealthKeys.SECTION,
        RouterKeys.SECTION,
        IngestKeys.SECTION,
        LoadKeys.SECTION,
        TlsKeys.LISTENER,
        TlsKeys.UPSTREAM,
        TlsKeys.PICKER,
        TracingKeys.SECTION,
        LoggingKeys.SECTION,
        ShutdownKeys.SECTION,
        TenancyKeys.TENANTS,
        TenancyKeys.LIMITS,
        TenancyKeys.STORE,
        TenancyKeys.SALT,
        RuleKeys.SECTION,
        ModelKeys.SECTION,
        SessionKeys.SECTION,
        ChwblKeys.SECTION,
        KvKeys.SECTION,
        TierWeightKeys.SECTION,
        PdKeys.SECTION,
        AdmissionKeys.SECTION,
        HedgeKeys.SECTION,
        FailoverKeys.SECTION,
        RuleHealthKeys.SECTION,
        EndpointKeys.SECTION,
        DiscoveryKeys.SECTION);

    /** Every declared key, in document order. */
    public static List<ConfigKey<?, ?>> keys() {
        List<ConfigKey<?, ?>> out = new ArrayList<>();
        for (ConfigSection<?> s : SECTIONS) {
            out.addAll(s.keys());
        }
        return out;
    }

    /** The key declared at {@code path} ({@code limits.max_body_bytes}, {@code rules[].kv.mode}), or null. */
    public static ConfigKey<?, ?> key(String path) {
        for (ConfigKey<?, ?> k : keys()) {
            if (k.path().equals(path)) {
                return k;
            }
        }
        return null;
    }

    /** The sections written inside {@code parent}, in document order. */
    static List<ConfigSection<?>> childrenOf(ConfigSection<?> parent) {
        List<ConfigSection<?>> out = new ArrayList<>();
        for (ConfigSection<?> s : SECTIONS) {
            if (s.parent() == parent) {
                out.add(s);
            }
        }
        return out;
    }

    /** Rule keys {@code ctl patch} may change (scope {@link Scope#LIVE}), as paths within a rule ({@code kv.mode}). */
    public static List<String> ruleTunables() {
        List<String> out = new ArrayList<>();
        for (ConfigKey<?, ?> k : keys()) {
            if (k.scope() == Scope.LIVE && k.rulePath() != null) {
                out.add(k.rulePath());
            }
        }
        return List.copyOf(out);
    }

    /**
     * Keys that only take effect at start-up (scope {@link Scope#RESTART}); a section that restarts as a whole is
     * named once. Rule keys are written {@code rules[*].key} plus what the restart is for.
     */
    public static List<String> restartOnly() {
        List<String> out = new ArrayList<>();
        for (ConfigSection<?> s : SECTIONS) {
            if (s.isRestartAsWhole()) {
                out.add(s.path());
                continue;
            }
            for (ConfigKey<?, ?> k : s.keys()) {
                if (k.scope() == Scope.RESTART) {
                    out.add(k.rulePath() == null ? k.path() : "rules[*]." + k.rulePath()
                        + (k.restartReason() == null ? "" : " (" + k.restartReason() + ")"));
                }
            }
        }
        return List.copyOf(out);
    }
}
