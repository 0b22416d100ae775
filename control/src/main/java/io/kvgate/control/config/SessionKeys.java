package io.kvgate.control.config;

import io.kvgate.control.config.RuleConfig.SessionConfig;
import io.kvgate.control.config.RuleConfig.SessionMode;

/** Section {@code rules[].session}: which request attribute keeps a conversation on one endpoint, and how. */
public final class SessionKeys {
    private SessionKeys() {}

    public static final ConfigSection<SessionConfig> SECTION = ConfigSection.mapping(RuleKeys.SECTION, "session",
        "session affinity (policy `session`, `pd.session_affinity`)", RuleConfig::session);

    public static final ConfigKey<SessionConfig, String> KEY = SECTION.enumKey("key", "user", RuleConfig.SessionKey.class)
        .doc("the session key: body `user` (else `X-Conversation-Id`), the conversation, a header or a cookie")
        .readBack(SessionConfig::key);
    public static final ConfigKey<SessionConfig, String> HEADER = SECTION.stringKey("header", null)
        .doc("the header naming the session (required with `key: header`)").readBack(SessionConfig::header);
    public static final ConfigKey<SessionConfig, String> COOKIE = SECTION.stringKey("cookie", null)
        .doc("the cookie naming the session (required with `key: cookie`)").readBack(SessionConfig::cookie);
    public static final ConfigKey<SessionConfig, String> MODE = SECTION.enumKey("mode", "hash", SessionMode.class)
        .defaultText("`hash` (`table` when `ttl_ms` or `max_entries` is set without a mode)")
        .doc("`hash`: rendezvous hashing, the same endpoint on every replica; `table`: a per-gateway TTL pin table")
        .readBack(SessionConfig::mode);
    // Each mode's knobs only: the other mode's are refused on read (they would do nothing).
    public static final ConfigKey<SessionConfig, Long> TTL_MS = SECTION.longKey("ttl_ms", 600_000, 1, 86_400_000L)
        .doc("`mode: table`: a pin's lifetime, renewed by use").live()
        .readBack(s -> s.modeKind() == SessionMode.TABLE ? s.ttlMs() : null);
    public static final ConfigKey<SessionConfig, Integer> MAX_ENTRIES = SECTION.intKey("max_entries", 100_000, 1, 10_000_000)
        .doc("`mode: table`: pins kept, least recently used first out").live()
        .readBack(s -> s.modeKind() == SessionMode.TABLE ? s.maxEntries() : null);
    public static final ConfigKey<SessionConfig, Double> LOAD_CAP_FACTOR = SECTION.doubleKey("load_cap_factor",
            SessionConfig.DEFAULT_LOAD_CAP_FACTOR, 1.0, 100.0)
        .doc("`mode: hash`: the winner takes the request while load + 1 ≤ max(factor·share, share + slack)").live()
        .readBack(s -> s.modeKind() == SessionMode.HASH ? s.loadCapFactor() : null);
    public static final ConfigKey<SessionConfig, Double> LOAD_SLACK = SECTION.doubleKey("load_slack",
            SessionConfig.DEFAULT_LOAD_SLACK, 0.0, 1e6)
        .doc("`mode: hash`: the absolute slack of that bound").live()
        .readBack(s -> s.modeKind() == SessionMode.HASH ? s.loadSlack() : null);
    public static final ConfigKey<SessionConfig, Double> SHARE_CAP_FACTOR = SECTION.doubleKey("share_cap_factor",
            SessionConfig.DEFAULT_SHARE_CAP_FACTOR, 0.0, 100.0)
        .defaultText("0 (off)").doc("`mode: hash`: request-share bound, a multiple (≥ 1.0) of an endpoint's fair share").live()
        .readBack(s -> s.modeKind() == SessionMode.HASH ? s.shareCapFactor() : null);
    public static final ConfigKey<SessionConfig, Boolean> PIN_SLOT = SECTION.boolKey("pin_slot", false)
        .doc("llama.cpp `session` rules: each request of a session carries a stable `id_slot`").readBack(SessionConfig::pinSlot);
    public static final ConfigKey<SessionConfig, Integer> SLOTS = SECTION.intKey("slots", RuleConfig.DEFAULT_SESSION_SLOTS, 1, 4096)
        .doc("llama-server's `--parallel`, until the health checker read the server's own count").readBack(SessionConfig::slots);
}
