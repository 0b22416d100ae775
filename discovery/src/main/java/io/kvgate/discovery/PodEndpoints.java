package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerPort;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.log.Log;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The endpoints of engine pods: one per HTTP port (several ports = data-parallel ranks serving HTTP each), at the pod's
 * IP. A pod is routed to while its Ready condition is True and it is not being deleted; a pod being deleted (a
 * deletion timestamp: Kubernetes' {@code terminating}) is kept, drained, so its requests in flight finish; any other
 * pod (starting, unready, without an IP) is left out. Ports are numbers or the names of container ports; the pod's
 * annotations {@value DiscoveryConfig#KV_EVENTS_ANNOTATION} and {@value DiscoveryConfig#BOOTSTRAP_ANNOTATION} win over
 * the configured KV-event and bootstrap ports.
 */
final class PodEndpoints {
    private final String rule;
    private final DiscoveryConfig discovery;
    private final EndpointFactory factory;
    /** Pods already warned about (by uid and problem), so that a resync does not repeat the warning. */
    private final Set<String> warned = ConcurrentHashMap.newKeySet();

    PodEndpoints(String rule, DiscoveryConfig discovery, EndpointFactory factory) {
        this.rule = rule;
        this.discovery = discovery;
        this.factory = factory;
    }

    /** The endpoints of {@code pods}, of role {@code role} (null outside P/D), their HTTP ports {@code ports}. */
    List<DiscoveredEndpoint> of(List<Pod> pods, String role, List<String> ports) {
        List<DiscoveredEndpoint> out = new ArrayList<>();
        for (Pod p : pods) {
            String ip = p.getStatus() == null ? null : p.getStatus().getPodIP();
            if (ip == null || ip.isEmpty()) {
                continue;
            }
            boolean terminating = p.getMetadata().getDeletionTimestamp() != null;
            if (!terminating && !ready(p)) {
                continue;
            }
            List<Integer> http = new ArrayList<>();
            if (ports.isEmpty()) {
                ContainerPort first = firstPort(p);
                if (first == null) {
                    warnOnce(p, "declares no container port and the rule's discovery.ports is empty");
                    continue;
                }
                http.add(first.getContainerPort());
            } else {
                for (String spec : ports) {
                    int n = portOf(p, spec);
                    if (n <= 0) {
                        warnOnce(p, "has no container port named '" + spec + "' (discovery.ports)");
                        http.clear();
                        break;
                    }
                    http.add(n);
                }
                if (http.isEmpty()) {
                    continue;
                }
            }
            Map<String, String> ann = p.getMetadata().getAnnotations() == null ? Map.of() : p.getMetadata().getAnnotations();
            int kv = port(p, ann.getOrDefault(DiscoveryConfig.KV_EVENTS_ANNOTATION, discovery.kvEventsPort()), "KV-event");
            int boot = "prefill".equals(role)
                ? port(p, ann.getOrDefault(DiscoveryConfig.BOOTSTRAP_ANNOTATION, discovery.bootstrapPort()), "bootstrap") : 0;
            for (int i = 0; i < http.size(); i++) {
                out.add(new DiscoveredEndpoint(factory.endpoint(ip, http.get(i), factory.kvPortOf(kv, i), role, boot), terminating));
            }
        }
        return out;
    }

    static boolean ready(Pod p) {
        if (p.getStatus() == null || p.getStatus().getConditions() == null) {
            return false;
        }
        for (PodCondition c : p.getStatus().getConditions()) {
            if ("Ready".equals(c.getType())) {
                return "True".equals(c.getStatus());
            }
        }
        return false;
    }

    private int port(Pod p, String spec, String what) {
        if (spec == null) {
            return 0;
        }
        int n = portOf(p, spec);
        if (n <= 0) {
            warnOnce(p, "has no container port named '" + spec + "' (its " + what + " port); it is routed without one");
        }
        return Math.max(n, 0);
    }

    private static ContainerPort firstPort(Pod p) {
        for (Container c : p.getSpec().getContainers()) {
            if (c.getPorts() != null && !c.getPorts().isEmpty()) {
                return c.getPorts().get(0);
            }
        }
        return null;
    }

    /** A port spec's number: the number itself, or the container port of that name (0 when none has it). */
    private static int portOf(Pod p, String spec) {
        int n = DiscoveryConfig.portNumber(spec);
        if (n > 0) {
            return n;
        }
        if (p.getSpec() == null) {
            return 0;
        }
        for (Container c : p.getSpec().getContainers()) {
            for (ContainerPort cp : c.getPorts() == null ? List.<ContainerPort>of() : c.getPorts()) {
                if (spec.equals(cp.getName())) {
                    return cp.getContainerPort();
                }
            }
        }
        return 0;
    }

    private void warnOnce(Pod p, String problem) {
        if (warned.add(p.getMetadata().getUid() + problem)) {
            Log.warn("discovery: rule '" + rule + "': pod " + p.getMetadata().getName() + " " + problem + "; it is left out");
        }
    }
}
