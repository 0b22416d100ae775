package io.kvgate.dataplane.engine;

import io.kvgate.control.config.RuleConfig;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/** The profile of each configured engine kind: the one place that maps a kind to its class. */
public final class EngineProfiles {
    /** Every profile, one per {@link RuleConfig.Engine} constant (EngineProfilesTest checks both ways). */
    public static final List<EngineProfile> ALL = List.of(VllmProfile.INSTANCE, SglangProfile.INSTANCE,
        TrtllmProfile.INSTANCE, LlamaCppProfile.INSTANCE);

    private static final Map<RuleConfig.Engine, EngineProfile> BY_KIND = new EnumMap<>(RuleConfig.Engine.class);

    static {
        for (EngineProfile p : ALL) {
            if (BY_KIND.put(p.kind(), p) != null) {
                throw new IllegalStateException("two profiles for engine " + p.name());
            }
        }
    }

    private EngineProfiles() {}

    /** The profile of {@code kind} (every kind has one). */
    public static EngineProfile of(RuleConfig.Engine kind) {
        EngineProfile p = BY_KIND.get(kind);
        if (p == null) {
            throw new IllegalArgumentException("no engine profile for " + kind);
        }
        return p;
    }

    /** The profile of a rule's configured engine. */
    public static EngineProfile of(RuleConfig rule) {
        return of(rule.engineKind());
    }
}
