package io.kvgate.discovery;

import io.fabric8.kubernetes.api.model.ContainerPortBuilder;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSlice;
import io.fabric8.kubernetes.api.model.discovery.v1.EndpointSliceBuilder;
import io.fabric8.kubernetes.client.NamespacedKubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.CustomResourceDefinitionContext;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * fabric8's mock API server in CRUD mode (what is created is listed and watched, as a real API server does), on
 * loopback, and builders for the objects discovery reads: engine pods with their Ready condition, EndpointSlices with
 * their conditions, InferencePools. Shared by the discovery tests here and the gateway's end-to-end tests.
 */
public final class KubeFixture implements AutoCloseable {
    public static final String NS = "llm";
    public static final CustomResourceDefinitionContext INFERENCE_POOLS = new CustomResourceDefinitionContext.Builder()
        .withGroup("inference.networking.k8s.io").withVersion("v1").withKind("InferencePool").withPlural("inferencepools")
        .withScope("Namespaced").build();

    /** Watch requests still to be answered 410 Gone (see {@link #expireNextWatches}), and how many were. */
    private final java.util.concurrent.atomic.AtomicInteger watchesToExpire = new java.util.concurrent.atomic.AtomicInteger();
    private final java.util.concurrent.atomic.AtomicInteger watchesExpired = new java.util.concurrent.atomic.AtomicInteger();
    /** The API server's store: it outlives a restart of the server, as etcd outlives the API server's. */
    private final KubernetesCrudDispatcher store = new KubernetesCrudDispatcher(List.of(INFERENCE_POOLS)) {
        @Override
        public io.fabric8.mockwebserver.http.MockResponse handleWatch(String path) {
            if (watchesToExpire.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                watchesExpired.incrementAndGet();
                // What an API server answers a watch from a resource version it no longer keeps (compacted).
                return new io.fabric8.mockwebserver.http.MockResponse().setResponseCode(410).setBody("{\"kind\":\"Status\","
                    + "\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"too old resource version\","
                    + "\"reason\":\"Expired\",\"code\":410}");
            }
            return super.handleWatch(path);
        }
    };

    /** The next {@code n} watch requests are answered 410 Gone (the resource version they resume from expired). */
    public void expireNextWatches(int n) {
        watchesToExpire.set(n);
    }

    /** How many watch requests were answered 410 Gone. */
    public int watchesExpired() {
        return watchesExpired.get();
    }
    /**
     * Every watch open now is detached from the store (it hears of no further change, as a watch whose events were
     * compacted away) and then sent an {@code ERROR} event whose object is a 410 Gone Status, inside the open watch:
     * what an API server sends when the watch's resource version expires while it streams. Returns the watches that
     * got it. fabric8's mock keeps its listeners private: reached by reflection (test only).
     */
    public List<Object> detachOpenWatches() throws ReflectiveOperationException {
        var field = KubernetesCrudDispatcher.class.getDeclaredField("watchEventListeners");
        field.setAccessible(true);
        java.util.Set<?> listeners = (java.util.Set<?>) field.get(store);
        List<Object> detached = new java.util.ArrayList<>(listeners);
        listeners.clear();
        return detached;
    }

    /** Sends each of {@code watches} ({@link #detachOpenWatches}) an ERROR event with a 410 Gone Status. */
    public void expireInsideWatches(List<Object> watches) throws ReflectiveOperationException {
        String gone = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
            + "\"message\":\"too old resource version: 5 (9)\",\"reason\":\"Expired\",\"code\":410}";
        for (Object w : watches) {
            var send = w.getClass().getDeclaredMethod("sendWebSocketResponse", String.class,
                io.fabric8.kubernetes.client.Watcher.Action.class);
            send.setAccessible(true);
            send.invoke(w, gone, io.fabric8.kubernetes.client.Watcher.Action.ERROR);
        }
    }

    private KubernetesMockServer server;
    private final NamespacedKubernetesClient client;

    public KubeFixture() {
        server = newServer();
        server.init(java.net.InetAddress.getLoopbackAddress(), 0);
        client = server.createClient();
    }

    private KubernetesMockServer newServer() {
        return new KubernetesMockServer(new Context(), new MockWebServer(), new HashMap<>(), store, false);
    }

    /** A client of the mock API server (each caller gets its own; discovery closes the one it is given). */
    public NamespacedKubernetesClient newClient() {
        return server.createClient();
    }

    public NamespacedKubernetesClient client() {
        return client;
    }

    public KubernetesMockServer server() {
        return server;
    }

    /** Stops the API server and starts it again on the same port, its objects kept (what a control-plane restart does). */
    public void restartApiServer() {
        stopApiServer();
        startApiServer();
    }

    private int port;

    /** Stops the API server (its objects kept): clients get connection errors until {@link #startApiServer}. */
    public void stopApiServer() {
        port = server.getPort();
        server.destroy();
    }

    /** The API server's port (the same across restarts). */
    public int port() {
        return port > 0 ? port : server.getPort();
    }

    /** Starts the API server again on the port it had. */
    public void startApiServer() {
        server = newServer();
        server.init(java.net.InetAddress.getLoopbackAddress(), port);
    }

    /**
     * An engine pod.
     *
     * @param ports container ports as name, number, name, number...
     */
    public static Pod pod(String name, String ip, boolean ready, Map<String, String> labels, Object... ports) {
        PodBuilder b = new PodBuilder().withNewMetadata().withName(name).withNamespace(NS).withLabels(labels)
            .withUid(name + "-uid").withFinalizers("kvgate.io/test-termination").endMetadata();
        List<io.fabric8.kubernetes.api.model.ContainerPort> cps = new ArrayList<>();
        for (int i = 0; i < ports.length; i += 2) {
            cps.add(new ContainerPortBuilder().withName((String) ports[i]).withContainerPort((Integer) ports[i + 1]).build());
        }
        return b.withNewSpec().addNewContainer().withName("engine").withImage("vllm/vllm-openai").withPorts(cps).endContainer()
            .endSpec()
            .withNewStatus().withPhase("Running").withPodIP(ip)
            .addNewCondition().withType("Ready").withStatus(ready ? "True" : "False").endCondition().endStatus().build();
    }

    public Pod create(Pod p) {
        return client.pods().inNamespace(NS).resource(p).create();
    }

    /** Sets the pod's Ready condition (the kubelet's status update). */
    public void ready(String pod, boolean ready) {
        client.pods().inNamespace(NS).withName(pod).edit(p -> {
            p.getStatus().getConditions().forEach(c -> {
                if ("Ready".equals(c.getType())) {
                    c.setStatus(ready ? "True" : "False");
                }
            });
            return p;
        });
    }

    /**
     * Deletes the pod as the kubelet sees it while its grace period runs: the pod carries a finalizer (every pod
     * {@link #create}d here does), so the API server marks it with a deletion timestamp (Kubernetes' terminating) and
     * keeps it until {@link #delete} lifts the finalizer.
     */
    public void terminating(String pod) {
        client.pods().inNamespace(NS).withName(pod).delete();
    }

    /** Removes the pod for good (its termination ended: the finalizer is lifted). */
    public void delete(String pod) {
        client.pods().inNamespace(NS).withName(pod).edit(p -> {
            p.getMetadata().setFinalizers(List.of());
            return p;
        });
        client.pods().inNamespace(NS).withName(pod).delete();
    }

    /** A Service's EndpointSlice: addresses as ip, ready, terminating, ip, ready, terminating ...; ports as name, number ... */
    public static EndpointSlice slice(String name, String service, List<Object> endpoints, Object... ports) {
        EndpointSliceBuilder b = new EndpointSliceBuilder().withNewMetadata().withName(name).withNamespace(NS)
            .addToLabels(SliceSource.SERVICE_NAME_LABEL, service).endMetadata().withAddressType("IPv4");
        for (int i = 0; i < endpoints.size(); i += 3) {
            b.addNewEndpoint().withAddresses((String) endpoints.get(i)).withNewConditions().withReady((Boolean) endpoints.get(i + 1))
                .withServing((Boolean) endpoints.get(i + 1) || (Boolean) endpoints.get(i + 2))
                .withTerminating((Boolean) endpoints.get(i + 2)).endConditions().endEndpoint();
        }
        for (int i = 0; i < ports.length; i += 2) {
            b.addNewPort().withName((String) ports[i]).withPort((Integer) ports[i + 1]).withProtocol("TCP").endPort();
        }
        return b.build();
    }

    public void apply(EndpointSlice s) {
        client.discovery().v1().endpointSlices().inNamespace(NS).resource(s).createOr(r -> r.update());
    }

    /** An {@code inference.networking.k8s.io/v1} InferencePool selecting {@code labels} on {@code targetPorts}. */
    public static GenericKubernetesResource pool(String name, Map<String, String> labels, int... targetPorts) {
        List<Map<String, Object>> ports = new ArrayList<>();
        for (int p : targetPorts) {
            ports.add(Map.of("number", p));
        }
        return new GenericKubernetesResourceBuilder().withApiVersion("inference.networking.k8s.io/v1").withKind("InferencePool")
            .withNewMetadata().withName(name).withNamespace(NS).endMetadata()
            .addToAdditionalProperties("spec", Map.of("selector", Map.of("matchLabels", labels), "targetPorts", ports,
                "endpointPickerRef", Map.of("name", "kvgate-epp", "port", Map.of("number", 9002))))
            .build();
    }

    public void apply(GenericKubernetesResource pool) {
        client.genericKubernetesResources(INFERENCE_POOLS).inNamespace(NS).resource(pool).createOr(r -> r.update());
    }

    public void deletePool(String name) {
        client.genericKubernetesResources(INFERENCE_POOLS).inNamespace(NS).withName(name).delete();
    }

    @Override
    public void close() {
        client.close();
        try {
            server.destroy();
        } catch (IllegalStateException e) {
            // MockWebServer gives up waiting (10 s) for a watch connection the client side already abandoned: the test
            // is over and the port is released with the JVM's connections; nothing under test is involved
        }
    }
}
