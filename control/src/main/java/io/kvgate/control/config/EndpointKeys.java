package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;

/** One engine endpoint of a rule ({@code rules[].endpoints[]}). */
public final class EndpointKeys {
    private EndpointKeys() {}

    public static final ConfigSection<EndpointConfig> SECTION = ConfigSection.listOf(RuleKeys.SECTION, "endpoints",
        "the rule's engines (at least one, unless `discovery` finds them)",
        // Discovered endpoints are run-time state, not configuration: they are written nowhere a reload would read back.
        r -> r.discovery().isStatic() ? r.endpoints() : java.util.List.of());

    public static final ConfigKey<EndpointConfig, Object> URL = SECTION.customKey("url", "`http://host:port`, required")
        .defaultText("required").doc("base URL of the engine's HTTP server (no path)").readBack(EndpointConfig::url);
    public static final ConfigKey<EndpointConfig, Integer> WEIGHT = SECTION.intKey("weight", 1, 1, 1_000_000)
        .doc("relative share for weighted policies").readBack(EndpointConfig::weight);
    public static final ConfigKey<EndpointConfig, String> KV_EVENTS = SECTION.stringKey("kv_events", null)
        .doc("`tcp://host:port` of DP rank 0's KV-event publisher (vllm, sglang, trtllm streaming),"
            + " `http://host:port/kv_cache_events` (trtllm)")
        .readBack(EndpointConfig::kvEvents);
    public static final ConfigKey<EndpointConfig, Boolean> KV_EVENTS_BIND = SECTION.boolKey("kv_events_bind", false)
        .doc("the engine connects to us (its config names a concrete host): the gateway binds")
        .readBack(e -> e.kvEvents() == null ? null : e.kvEventsBind());
    public static final ConfigKey<EndpointConfig, String> KV_TOPIC = SECTION.stringKey("kv_topic", "")
        .doc("topic prefix subscribed to (`\"\"` = every message)").readBack(e -> e.kvEvents() == null ? null : e.kvTopic());
    public static final ConfigKey<EndpointConfig, Integer> DP_RANKS = SECTION.intKey("dp_ranks", 1, 1, 8)
        .doc("data-parallel ranks publishing events (rank r at port + r)")
        .readBack(e -> e.kvEvents() == null ? null : e.dpRanks());
    public static final ConfigKey<EndpointConfig, Integer> KV_POLL_MS = SECTION.intKey("kv_poll_ms", EndpointConfig.DEFAULT_KV_POLL_MS,
            1, 60_000)
        .doc("HTTP `kv_events` only: time from the end of one drain to the start of the next")
        .readBack(e -> e.kvEventsOverHttp() ? e.kvPollMs() : null);
    public static final ConfigKey<EndpointConfig, List<String>> KV_EVENTS_ALLOW = SECTION.stringListKey("kv_events_allow")
        .doc("bind mode only: IP addresses / CIDR blocks allowed to connect (empty = any peer)")
        .readBack(e -> e.kvEvents() == null || e.kvEventsAllow().isEmpty() ? null : new ArrayList<>(e.kvEventsAllow()));
    public static final ConfigKey<EndpointConfig, String> KV_EVENTS_CURVE_SERVER_KEY = SECTION.stringKey("kv_events_curve_server_key",
            null)
        .doc("CURVE: the binding side's Z85 public key (40 characters)")
        .readBack(e -> e.kvEvents() == null ? null : e.kvEventsCurveServerKey());
    public static final ConfigKey<EndpointConfig, String> KV_EVENTS_CURVE_SECRET_FILE = SECTION.stringKey(
            "kv_events_curve_secret_file", null)
        .doc("CURVE: file with the gateway's key pair (required with the server key)")
        .readBack(e -> e.kvEvents() == null || e.kvEventsCurveServerKey() == null ? null : e.kvEventsCurveSecretFile());
    public static final ConfigKey<EndpointConfig, String> KV_REPLAY = SECTION.stringKey("kv_replay", null)
        .doc("`tcp://host:port` of the engine's replay ROUTER (needs `kv_events`)").readBack(EndpointConfig::kvReplay);
    public static final ConfigKey<EndpointConfig, String> ROLE = SECTION.enumKey("role", null, EndpointConfig.Role.class)
        .doc("P/D role, only (and required) under policy `pd`").readBack(EndpointConfig::role);
    public static final ConfigKey<EndpointConfig, Integer> BOOTSTRAP_PORT = SECTION.intKey("bootstrap_port", 8998, 1, 65535)
        .defaultText("8998 on SGLang prefill endpoints of a `pd` rule, else none")
        .doc("SGLang prefill bootstrap port (P/D)").readBack(e -> e.bootstrapPort() > 0 ? e.bootstrapPort() : null);
}
