package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;

/** Section {@code rules[].discovery}: where the rule's endpoints come from (see [kubernetes](kubernetes.md)). */
public final class DiscoveryKeys {
    private DiscoveryKeys() {}

    public static final ConfigSection<DiscoveryConfig> SECTION = ConfigSection.optionalMapping(RuleKeys.SECTION, "discovery",
        "where the rule's endpoints come from (see [kubernetes](kubernetes.md)); absent = its own `endpoints`",
        RuleConfig::discovery, d -> !d.isStatic());

    public static final ConfigKey<DiscoveryConfig, String> TYPE = SECTION.enumKey("type", "static", DiscoveryConfig.Type.class)
        .doc("`static` (the rule's `endpoints`), `dns`, `kubernetes` (EndpointSlices or pods), `inference_pool`")
        .readBack(DiscoveryConfig::type);
    public static final ConfigKey<DiscoveryConfig, String> NAME = SECTION.stringKey("name", null)
        .doc("dns: the name resolved (a headless Service's)").readBack(DiscoveryConfig::name);
    public static final ConfigKey<DiscoveryConfig, String> RECORD = SECTION.oneOfKey("record", "a", List.of("a", "srv"))
        .doc("dns: `a` (A and AAAA records; port from `ports`) or `srv`")
        .readBack(d -> d.typeKind() == DiscoveryConfig.Type.DNS ? d.record() : null);
    public static final ConfigKey<DiscoveryConfig, Object> PORTS = SECTION.customKey("ports", "list of port numbers or names")
        .defaultText("the first port declared").doc("the engines' HTTP port(s); several = one endpoint per port (DP ranks)")
        .readBack(d -> d.ports().isEmpty() ? null : new ArrayList<Object>(d.ports().stream()
            .map(p -> DiscoveryConfig.portNumber(p) > 0 ? (Object) DiscoveryConfig.portNumber(p) : p).toList()));
    public static final ConfigKey<DiscoveryConfig, String> SCHEME = SECTION.oneOfKey("scheme", "http", List.of("http", "https"))
        .doc("how the discovered engines are reached (`https`: see `upstream_tls`)")
        .readBack(d -> d.isStatic() ? null : d.scheme());
    public static final ConfigKey<DiscoveryConfig, Long> INTERVAL_MS = SECTION.longKey("interval_ms", 10_000, 100, 3_600_000)
        .doc("dns: longest time between resolutions (a shorter TTL resolves sooner); kubernetes: informer resync")
        .readBack(d -> d.isStatic() ? null : d.intervalMs());
    public static final ConfigKey<DiscoveryConfig, String> NAMESPACE = SECTION.stringKey("namespace", null)
        .defaultText("the gateway pod's own").doc("kubernetes, inference_pool: the namespace watched")
        .readBack(DiscoveryConfig::namespace);
    public static final ConfigKey<DiscoveryConfig, String> SERVICE = SECTION.stringKey("service", null)
        .doc("kubernetes: the Service whose EndpointSlices are the endpoints").readBack(DiscoveryConfig::service);
    public static final ConfigKey<DiscoveryConfig, java.util.Map<String, String>> SELECTOR = SECTION.stringMapKey("selector")
        .doc("kubernetes: the engine pods' labels (instead of `service`)")
        .readBack(d -> d.selector().isEmpty() ? null : new LinkedHashMap<>(d.selector()));
    public static final ConfigKey<DiscoveryConfig, java.util.Map<String, String>> PREFILL_SELECTOR = SECTION.stringMapKey(
            "prefill_selector")
        .doc("kubernetes, policy `pd`: the prefill pods' labels")
        .readBack(d -> d.prefillSelector().isEmpty() ? null : new LinkedHashMap<>(d.prefillSelector()));
    public static final ConfigKey<DiscoveryConfig, java.util.Map<String, String>> DECODE_SELECTOR = SECTION.stringMapKey(
            "decode_selector")
        .doc("kubernetes, policy `pd`: the decode pods' labels")
        .readBack(d -> d.decodeSelector().isEmpty() ? null : new LinkedHashMap<>(d.decodeSelector()));
    public static final ConfigKey<DiscoveryConfig, String> POOL = SECTION.stringKey("pool", null)
        .doc("inference_pool: the `inference.networking.k8s.io/v1` InferencePool's name").readBack(DiscoveryConfig::pool);
    public static final ConfigKey<DiscoveryConfig, Object> KV_EVENTS_PORT = SECTION.customKey("kv_events_port", "port number or name")
        .defaultText("no KV events").doc("the KV-event publisher's port (pod annotation `kvgate.io/kv-events-port` wins)")
        .readBack(d -> portValue(d.kvEventsPort()));
    public static final ConfigKey<DiscoveryConfig, Object> BOOTSTRAP_PORT = SECTION.customKey("bootstrap_port", "port number or name")
        .defaultText("8998").doc("SGLang P/D: the prefill pods' bootstrap port (annotation `kvgate.io/bootstrap-port` wins)")
        .readBack(d -> portValue(d.bootstrapPort()));
    public static final ConfigKey<DiscoveryConfig, String> KV_TOPIC = SECTION.stringKey("kv_topic", "")
        .doc("topic prefix of the discovered publishers").readBack(d -> d.isStatic() || d.kvEventsPort() == null ? null : d.kvTopic());
    public static final ConfigKey<DiscoveryConfig, Integer> DP_RANKS = SECTION.intKey("dp_ranks", 1, 1, 8)
        .doc("data-parallel ranks behind one HTTP port publishing events (rank r at the KV port + r)")
        .readBack(d -> d.isStatic() || d.kvEventsPort() == null ? null : d.dpRanks());

    private static Object portValue(String spec) {
        return spec == null ? null : DiscoveryConfig.portNumber(spec) > 0 ? (Object) DiscoveryConfig.portNumber(spec) : spec;
    }
}
