package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvgate.control.config.DiscoveryConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * {@code discovery.type kubernetes} with {@code selector} (or, under policy pd, {@code prefill_selector} and
 * {@code decode_selector}): the pods those labels pick in one namespace, one informer per role, reported as one set.
 */
final class PodSource implements EndpointSource {
    private final List<Informed<Pod>> informers = new ArrayList<>();
    private final List<String> roles = new ArrayList<>();

    /**
     * @param roles each role's label selector (the null role: no P/D role)
     * @param ports the HTTP ports, numbers or container port names (empty: the first container port)
     */
    PodSource(String rule, KubernetesClient client, String namespace, Map<String, Map<String, String>> roles, List<String> ports,
              DiscoveryConfig discovery, EndpointFactory factory, SourceReport report) {
        PodEndpoints pods = new PodEndpoints(rule, discovery, factory);
        roles.forEach((role, selector) -> {
            this.roles.add(role);
            informers.add(new Informed<>("rule '" + rule + "': pods " + selector + " in " + namespace,
                client.pods().inNamespace(namespace).withLabels(selector).runnableInformer(discovery.intervalMs()),
                unused -> all(pods, ports), report));
        });
    }

    /** Every role's endpoints, from every informer's store as it is now; null until every role's first list is in. */
    private List<DiscoveredEndpoint> all(PodEndpoints pods, List<String> ports) {
        if (!informers.stream().allMatch(Informed::synced)) {
            return null; // the prefills without the decodes (or the reverse) would be a set that is not there
        }
        List<DiscoveredEndpoint> out = new ArrayList<>();
        for (int i = 0; i < informers.size(); i++) {
            out.addAll(pods.of(informers.get(i).items(), roles.get(i), ports));
        }
        return out;
    }

    @Override
    public void start() {
        informers.forEach(Informed::start);
    }

    @Override
    public void close() {
        informers.forEach(Informed::close);
    }
}
