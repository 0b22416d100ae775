package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.discovery.v1.Endpoint;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointConditions;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointPort;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.log.Log;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * {@code discovery.type kubernetes} with {@code service}: the endpoints of the Service's EndpointSlices
 * ({@code discovery.k8s.io/v1}, label {@code kubernetes.io/service-name}). The conditions decide, as kube-proxy reads
 * them: {@code ready} (absent = ready) is routed to; {@code terminating} is kept but drained, so requests in flight
 * finish; anything else is left out. Ports are numbers or the slice's port names (the Service's port names); the first
 * address of an endpoint is its address. An address in two slices (while the controller moves it) counts once, not
 * terminating if either says so.
 */
final class SliceSource implements EndpointSource {
    static final String SERVICE_NAME_LABEL = "kubernetes.io/service-name";

    private final String rule;
    private final DiscoveryConfig discovery;
    private final EndpointFactory factory;
    private final Informed<EndpointSlice> informer;
    private final Set<String> warned = ConcurrentHashMap.newKeySet();

    SliceSource(String rule, KubernetesClient client, String namespace, DiscoveryConfig discovery, EndpointFactory factory,
                SourceReport report) {
        this.rule = rule;
        this.discovery = discovery;
        this.factory = factory;
        this.informer = new Informed<>("rule '" + rule + "': EndpointSlices of Service " + discovery.service() + " in " + namespace,
            client.discovery().v1().endpointSlices().inNamespace(namespace).withLabel(SERVICE_NAME_LABEL, discovery.service())
                .runnableInformer(discovery.intervalMs()),
            this::endpoints, report);
    }

    private List<DiscoveredEndpoint> endpoints(List<EndpointSlice> slices) {
        Map<String, DiscoveredEndpoint> byKey = new LinkedHashMap<>();
        for (EndpointSlice s : slices) {
            List<EndpointPort> ports = s.getPorts() == null ? List.of() : s.getPorts();
            List<Integer> http = httpPorts(s, ports);
            if (http.isEmpty() || s.getEndpoints() == null) {
                continue;
            }
            int kv = named(s, ports, discovery.kvEventsPort(), "kv_events_port");
            for (Endpoint e : s.getEndpoints()) {
                if (e.getAddresses() == null || e.getAddresses().isEmpty()) {
                    continue;
                }
                EndpointConditions c = e.getConditions();
                boolean terminating = c != null && Boolean.TRUE.equals(c.getTerminating());
                boolean ready = c == null || c.getReady() == null || c.getReady();
                if (!ready && !terminating) {
                    continue;
                }
                String ip = e.getAddresses().get(0);
                for (int i = 0; i < http.size(); i++) {
                    DiscoveredEndpoint d = new DiscoveredEndpoint(factory.endpoint(ip, http.get(i), factory.kvPortOf(kv, i), null, 0),
                        terminating);
                    byKey.merge(d.config().key(), d, (a, b) -> a.terminating() ? b : a);
                }
            }
        }
        return new ArrayList<>(byKey.values());
    }

    private List<Integer> httpPorts(EndpointSlice s, List<EndpointPort> ports) {
        List<Integer> out = new ArrayList<>();
        if (discovery.ports().isEmpty()) {
            if (!ports.isEmpty() && ports.get(0).getPort() != null) {
                out.add(ports.get(0).getPort());
            }
            return out;
        }
        for (String spec : discovery.ports()) {
            int n = named(s, ports, spec, "ports");
            if (n <= 0) {
                return List.of();
            }
            out.add(n);
        }
        return out;
    }

    /** A port spec's number: the number, or the slice's port of that name (0, warned once, when it has none). */
    private int named(EndpointSlice s, List<EndpointPort> ports, String spec, String key) {
        if (spec == null) {
            return 0;
        }
        int n = DiscoveryConfig.portNumber(spec);
        if (n > 0) {
            return n;
        }
        for (EndpointPort p : ports) {
            if (spec.equals(p.getName()) && p.getPort() != null) {
                return p.getPort();
            }
        }
        if (warned.add(s.getMetadata().getName() + "/" + spec)) {
            Log.warn("discovery: rule '" + rule + "': EndpointSlice " + s.getMetadata().getName() + " has no port named '" + spec
                + "' (discovery." + key + "; name the Service's port so)");
        }
        return 0;
    }

    @Override
    public void start() {
        informer.start();
    }

    @Override
    public void close() {
        informer.close();
    }
}
