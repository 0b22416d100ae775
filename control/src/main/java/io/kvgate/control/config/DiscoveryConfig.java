package io.kvgate.control.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Where a rule's endpoints come from ({@code rules[].discovery}): the configuration's own {@code endpoints}
 * ({@code static}, the default), the records of a DNS name ({@code dns}), the EndpointSlices of a Service or the pods a
 * label selector picks ({@code kubernetes}), or the pods an {@code inference.networking.k8s.io/v1} InferencePool
 * selects ({@code inference_pool}). Discovered endpoints reach the routing table the way a configuration reload does.
 *
 * @param type            static | dns | kubernetes | inference_pool
 * @param name            dns: the name resolved (a headless Service's, e.g. {@code vllm.llm.svc.cluster.local})
 * @param record          dns: {@code a} (A and AAAA records, the port from {@code ports}) or {@code srv}
 * @param ports           the engine's HTTP port(s) as numbers or port names; several = one endpoint per port and pod
 *                        (data-parallel ranks each serving HTTP); empty = the first port the Service or pod declares
 * @param scheme          http or https (TLS to the engine, see {@code upstream_tls})
 * @param intervalMs      dns: the longest time between two resolutions (a shorter TTL resolves sooner);
 *                        kubernetes: the informers' resync period
 * @param namespace       kubernetes: the namespace, null = the gateway pod's own
 * @param service         kubernetes: the Service whose EndpointSlices list the endpoints
 * @param selector        kubernetes: the pods' labels (instead of {@code service})
 * @param prefillSelector kubernetes, policy pd: the prefill pods' labels
 * @param decodeSelector  kubernetes, policy pd: the decode pods' labels
 * @param pool            inference_pool: the InferencePool's name
 * @param kvEventsPort    the KV-event publisher's port (number or name; a pod's {@value #KV_EVENTS_ANNOTATION}
 *                        annotation wins), null = no KV events
 * @param bootstrapPort   SGLang prefill bootstrap port (number or name; {@value #BOOTSTRAP_ANNOTATION} wins), or null
 * @param kvTopic         the discovered publishers' topic prefix
 * @param dpRanks         data-parallel ranks behind one HTTP port publishing events (rank r at the KV port + r)
 */
public record DiscoveryConfig(String type, String name, String record, List<String> ports, String scheme, long intervalMs,
                              String namespace, String service, Map<String, String> selector,
                              Map<String, String> prefillSelector, Map<String, String> decodeSelector, String pool,
                              String kvEventsPort, String bootstrapPort, String kvTopic, int dpRanks) {

    /** A pod annotation naming the KV-event port (number or container port name); wins over {@code kv_events_port}. */
    public static final String KV_EVENTS_ANNOTATION = "kvgate.io/kv-events-port";
    /** A pod annotation naming SGLang's bootstrap port; wins over {@code bootstrap_port}. */
    public static final String BOOTSTRAP_ANNOTATION = "kvgate.io/bootstrap-port";
    /** The endpoints are the rule's own {@code endpoints}. */
    public static final DiscoveryConfig STATIC = new DiscoveryConfig("static", null, "a", List.of(), "http", 10_000, null,
        null, Map.of(), Map.of(), Map.of(), null, null, null, "", 1);

    public enum Type { STATIC, DNS, KUBERNETES, INFERENCE_POOL }

    /** A port name as Kubernetes spells one (an IANA service name). */
    private static final Pattern PORT_NAME = Pattern.compile("[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?");

    public DiscoveryConfig {
        ports = List.copyOf(ports);
        selector = Map.copyOf(selector);
        prefillSelector = Map.copyOf(prefillSelector);
        decodeSelector = Map.copyOf(decodeSelector);
    }

    public Type typeKind() {
        return Type.valueOf(type.toUpperCase(Locale.ROOT));
    }

    /** Whether the endpoints are the configuration's own (nothing to discover). */
    public boolean isStatic() {
        return typeKind() == Type.STATIC;
    }

    /** A port spec's number, or -1 when it is a name. */
    public static int portNumber(String spec) {
        return spec != null && !spec.isEmpty() && spec.chars().allMatch(Character::isDigit) ? Integer.parseInt(spec) : -1;
    }

    static DiscoveryConfig read(ConfigNode d, String policy, String engine) {
        String type = DiscoveryKeys.TYPE.read(d);
        String name = DiscoveryKeys.NAME.read(d);
        String record = DiscoveryKeys.RECORD.read(d);
        List<String> ports = portList(d, DiscoveryKeys.PORTS.name());
        String scheme = DiscoveryKeys.SCHEME.read(d);
        long interval = DiscoveryKeys.INTERVAL_MS.read(d);
        String namespace = DiscoveryKeys.NAMESPACE.read(d);
        String service = DiscoveryKeys.SERVICE.read(d);
        Map<String, String> selector = DiscoveryKeys.SELECTOR.read(d);
        Map<String, String> prefill = DiscoveryKeys.PREFILL_SELECTOR.read(d);
        Map<String, String> decode = DiscoveryKeys.DECODE_SELECTOR.read(d);
        String pool = DiscoveryKeys.POOL.read(d);
        String kvPort = port(d, DiscoveryKeys.KV_EVENTS_PORT.name());
        String bootstrap = port(d, DiscoveryKeys.BOOTSTRAP_PORT.name());
        String topic = DiscoveryKeys.KV_TOPIC.read(d);
        int dpRanks = DiscoveryKeys.DP_RANKS.read(d);
        DiscoveryConfig c = new DiscoveryConfig(type, name, record, ports, scheme, interval, namespace, service, selector,
            prefill, decode, pool, kvPort, bootstrap, topic, dpRanks);
        boolean pd = "pd".equals(policy);
        Type t = c.typeKind();
        // Keys of another type would be silently ignored: each is refused, naming the type it belongs to.
        only(d, t, Type.DNS, "name", name != null, "record", d.has("record"));
        only(d, t, Type.KUBERNETES, "service", service != null, "selector", !selector.isEmpty(),
            "prefill_selector", !prefill.isEmpty(), "decode_selector", !decode.isEmpty());
        only(d, t, Type.INFERENCE_POOL, "pool", pool != null);
        if (t == Type.STATIC) {
            for (String k : List.of("ports", "scheme", "interval_ms", "namespace", "kv_events_port", "bootstrap_port",
                "kv_topic", "dp_ranks")) {
                if (d.has(k)) {
                    d.problem(k, d.raw(k), "applies to discovered endpoints only (discovery.type dns, kubernetes or"
                        + " inference_pool); this rule's endpoints are its own (discovery.type static)");
                }
            }
        }
        if (t == Type.DNS) {
            if (name == null) {
                d.problems().add(d.where("name") + ": is required with discovery.type dns (the name to resolve, e.g. a"
                    + " headless Service's vllm.llm.svc.cluster.local)");
            }
            if ("a".equals(record) && ports.isEmpty()) {
                d.problems().add(d.where("ports") + ": is required with discovery.record a (A/AAAA records carry no port)");
            }
            if ("srv".equals(record) && !ports.isEmpty()) {
                d.problem("ports", ports, "must be absent with discovery.record srv: each SRV record carries its port");
            }
            numbersOnly(d, "ports", ports);
            numbersOnly(d, "kv_events_port", kvPort == null ? List.of() : List.of(kvPort));
            numbersOnly(d, "bootstrap_port", bootstrap == null ? List.of() : List.of(bootstrap));
            if (pd) {
                d.problem("type", type, "cannot serve policy 'pd': DNS records carry no prefill/decode role; use discovery.type"
                    + " kubernetes with prefill_selector and decode_selector");
            }
        }
        if (t == Type.KUBERNETES) {
            boolean roles = !(prefill.isEmpty() && decode.isEmpty());
            int sources = (service != null ? 1 : 0) + (selector.isEmpty() ? 0 : 1) + (roles ? 1 : 0);
            if (sources != 1) {
                d.problems().add(d.where("service") + ": discovery.type kubernetes needs exactly one of service, selector, or"
                    + " prefill_selector with decode_selector (policy pd); this rule sets " + sources);
            }
            if (pd && (prefill.isEmpty() || decode.isEmpty())) {
                d.problems().add(d.where(prefill.isEmpty() ? "prefill_selector" : "decode_selector") + ": is required under"
                    + " policy 'pd' (the endpoints' roles come from which selector picks their pods)");
            }
            if (!pd && roles) {
                d.problem(prefill.isEmpty() ? "decode_selector" : "prefill_selector", prefill.isEmpty() ? decode : prefill,
                    "applies only under policy 'pd' (this rule's policy is '" + policy + "'); use selector");
            }
        }
        if (t == Type.INFERENCE_POOL) {
            if (pool == null) {
                d.problems().add(d.where("pool") + ": is required with discovery.type inference_pool (the InferencePool's name)");
            }
            if (!ports.isEmpty()) {
                d.problem("ports", ports, "must be absent with discovery.type inference_pool: the pool's targetPorts are the ports");
            }
            if (pd) {
                d.problem("type", type, "cannot serve policy 'pd': an InferencePool selects one set of pods without roles;"
                    + " use discovery.type kubernetes with prefill_selector and decode_selector");
            }
        }
        if ((t == Type.KUBERNETES || t == Type.INFERENCE_POOL) && namespace != null
            && !namespace.matches("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")) {
            d.problem("namespace", namespace, "must be a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)");
        }
        if (!(t == Type.KUBERNETES || t == Type.INFERENCE_POOL) && namespace != null && t != Type.STATIC) {
            d.problem("namespace", namespace, "applies only with discovery.type kubernetes or inference_pool");
        }
        if (bootstrap != null && !("sglang".equals(engine) && pd)) {
            d.problem("bootstrap_port", bootstrap, "is only valid on SGLang rules under policy 'pd' (the prefill servers'"
                + " bootstrap port)");
        }
        if (kvPort != null && "llamacpp".equals(engine)) {
            d.problem("kv_events_port", kvPort, "is only valid for engines that publish KV events (vllm, sglang, trtllm);"
                + " engine 'llamacpp' publishes none");
        }
        d.finish();
        return c;
    }

    /** Keys of {@code owner} set under another type are refused. {@code keysAndSet}: a name, whether it is set, ... */
    private static void only(ConfigNode d, Type type, Type owner, Object... keysAndSet) {
        if (type == owner) {
            return;
        }
        for (int i = 0; i < keysAndSet.length; i += 2) {
            String k = (String) keysAndSet[i];
            if ((Boolean) keysAndSet[i + 1]) {
                d.problem(k, d.raw(k), "applies only with discovery.type " + owner.name().toLowerCase(Locale.ROOT)
                    + " (this rule's discovery.type is " + type.name().toLowerCase(Locale.ROOT) + ")");
            }
        }
    }

    private static void numbersOnly(ConfigNode d, String key, List<String> specs) {
        for (String s : specs) {
            if (portNumber(s) < 0) {
                d.problem(key, s, "must be a port number with discovery.type dns (port names exist only in Kubernetes)");
            }
        }
    }

    /** One port by number or name, null when absent. */
    private static String port(ConfigNode d, String key) {
        return d.has(key) ? portSpec(d, key, d.raw(key)) : null;
    }

    private static List<String> portList(ConfigNode d, String key) {
        if (!d.has(key)) {
            return List.of();
        }
        Object raw = d.raw(key);
        List<?> items = raw instanceof List<?> l ? l : List.of(raw);
        List<String> out = new ArrayList<>();
        for (Object o : items) {
            String s = portSpec(d, key, o);
            if (s != null) {
                out.add(s);
            }
        }
        if (out.size() > 8) {
            d.problem(key, raw, "must list at most 8 ports (InferencePool's limit on targetPorts)");
        }
        return out;
    }

    private static String portSpec(ConfigNode d, String key, Object v) {
        if (v instanceof Integer i && i >= 1 && i <= 65535) {
            return Integer.toString(i);
        }
        if (v instanceof String s && (PORT_NAME.matcher(s).matches() && portNumber(s) < 0
            || s.matches("\\d{1,5}") && Integer.parseInt(s) >= 1 && Integer.parseInt(s) <= 65535)) {
            return s;
        }
        d.problem(key, v, "must be a port number in [1, 65535] or a Kubernetes port name (lower-case letters, digits and"
            + " '-', at most 15)");
        return null;
    }
}
