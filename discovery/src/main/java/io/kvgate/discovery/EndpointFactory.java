package io.kvgate.discovery;

import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.config.EndpointConfig;
import io.kvgate.control.config.RuleConfig;

/**
 * Builds the endpoint configuration of one discovered address, as a configured endpoint of the rule would read: the
 * URL from the discovery's scheme, the KV-event publisher of DP rank 0 when the rule's engines publish, SGLang's
 * bootstrap port on prefill endpoints.
 */
final class EndpointFactory {
    /** SGLang's default {@code --disaggregation-bootstrap-port}, as for configured endpoints. */
    static final int SGLANG_BOOTSTRAP_DEFAULT = 8998;

    private final DiscoveryConfig discovery;
    private final boolean sglangPd;

    EndpointFactory(RuleConfig rule) {
        this.discovery = rule.discovery();
        this.sglangPd = "sglang".equals(rule.engine()) && "pd".equals(rule.policy());
    }

    /**
     * @param host      an IP address (v4 or v6) or a host name
     * @param port      the HTTP port
     * @param kvPort    rank 0's KV-event port, or 0 for none
     * @param role      "prefill", "decode" or null
     * @param bootstrap the SGLang bootstrap port, or 0 for the default on prefill endpoints
     */
    EndpointConfig endpoint(String host, int port, int kvPort, String role, int bootstrap) {
        String h = host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
        String url = discovery.scheme() + "://" + h + ":" + port;
        String kv = kvPort > 0 ? "tcp://" + h + ":" + kvPort : null;
        int boot = sglangPd && "prefill".equals(role) ? (bootstrap > 0 ? bootstrap : SGLANG_BOOTSTRAP_DEFAULT) : 0;
        // The host as EndpointConfig.read takes it from a URL (java.net.URI keeps an IPv6 literal's brackets): the
        // endpoint's identity (host:port) is the same whether it was configured or discovered.
        return new EndpointConfig(url, h, port, 1, kv, false, kv == null ? "" : discovery.kvTopic(),
            kv == null ? 1 : discovery.dpRanks(), null, role, boot);
    }

    /** The KV-event port of the {@code index}-th HTTP port of a pod whose rank-0 publisher is at {@code base}. */
    int kvPortOf(int base, int index) {
        return base <= 0 ? 0 : base + index * discovery.dpRanks();
    }
}
