package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import io.kvgate.control.config.DiscoveryConfig;
import io.kvgate.control.log.Log;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code discovery.type inference_pool}: the pods an {@code inference.networking.k8s.io/v1} InferencePool selects
 * ({@code spec.selector.matchLabels}), one endpoint per pod and {@code spec.targetPorts[].number} (several = DP ranks).
 * The pool itself is watched: a changed selector or port list starts a new pod watch; a deleted pool leaves the rule
 * without endpoints until it comes back.
 */
final class PoolSource implements EndpointSource {
    static final ResourceDefinitionContext INFERENCE_POOL = new ResourceDefinitionContext.Builder()
        .withGroup("inference.networking.k8s.io").withVersion("v1").withKind("InferencePool").withPlural("inferencepools")
        .withNamespaced(true).build();

    /** What the pods are watched for: the pool's selector and target ports. */
    record Selection(Map<String, String> selector, List<String> ports) {}

    private final String rule;
    private final KubernetesClient client;
    private final String namespace;
    private final DiscoveryConfig discovery;
    private final EndpointFactory factory;
    private final SourceReport report;
    private final Informed<GenericKubernetesResource> pool;
    private Selection selection;
    private PodSource pods;
    private boolean closed;

    PoolSource(String rule, KubernetesClient client, String namespace, DiscoveryConfig discovery, EndpointFactory factory,
               SourceReport report) {
        this.rule = rule;
        this.client = client;
        this.namespace = namespace;
        this.discovery = discovery;
        this.factory = factory;
        this.report = report;
        this.pool = new Informed<>("rule '" + rule + "': InferencePool " + discovery.pool() + " in " + namespace,
            client.genericKubernetesResources(INFERENCE_POOL).inNamespace(namespace).withName(discovery.pool())
                .runnableInformer(discovery.intervalMs()),
            this::poolChanged, report);
    }

    /** The pool's store changed: follow its selection. Reports only when the pool is gone (the pods report the rest). */
    private synchronized List<DiscoveredEndpoint> poolChanged(List<GenericKubernetesResource> pools) {
        if (closed) {
            return null;
        }
        Selection next = pools.isEmpty() ? null : selection(pools.get(0));
        if (next != null && next.equals(selection)) {
            return null;
        }
        if (pods != null) {
            pods.close();
            pods = null;
        }
        selection = next;
        if (next == null) {
            if (!pools.isEmpty()) {
                Log.warn("discovery: rule '" + rule + "': InferencePool " + discovery.pool() + " has no spec.selector.matchLabels"
                    + " or no spec.targetPorts[].number; the rule has no endpoints until it does");
            }
            return List.of();
        }
        Log.info("discovery: rule '" + rule + "': InferencePool " + discovery.pool() + " selects " + next.selector()
            + " on ports " + next.ports());
        pods = new PodSource(rule, client, namespace, java.util.Collections.singletonMap(null, next.selector()), next.ports(),
            discovery, factory, report);
        pods.start();
        return null;
    }

    /** A v1 pool's selector and target ports, or null when it names none. */
    @SuppressWarnings("unchecked")
    static Selection selection(GenericKubernetesResource pool) {
        Object spec = pool.getAdditionalProperties().get("spec");
        if (!(spec instanceof Map<?, ?> s) || !(s.get("selector") instanceof Map<?, ?> sel)
            || !(sel.get("matchLabels") instanceof Map<?, ?> labels) || labels.isEmpty()
            || !(s.get("targetPorts") instanceof List<?> targets) || targets.isEmpty()) {
            return null;
        }
        Map<String, String> selector = new LinkedHashMap<>();
        ((Map<Object, Object>) labels).forEach((k, v) -> selector.put(String.valueOf(k), String.valueOf(v)));
        List<String> ports = new ArrayList<>();
        for (Object t : targets) {
            if (!(t instanceof Map<?, ?> m) || !(m.get("number") instanceof Number n) || n.intValue() < 1 || n.intValue() > 65535) {
                return null;
            }
            ports.add(Integer.toString(n.intValue()));
        }
        return new Selection(Map.copyOf(selector), List.copyOf(ports));
    }

    @Override
    public void start() {
        pool.start();
    }

    @Override
    public synchronized void close() {
        closed = true;
        pool.close();
        if (pods != null) {
            pods.close();
        }
    }
}
