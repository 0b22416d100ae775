package io.kvgate.discovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.autoscaling.v2.HorizontalPodAutoscaler;
import io.fabric8.kubernetes.api.model.gatewayapi.v1.HTTPRoute;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.kvgate.control.config.ConfigSchema;
import io.kvgate.control.config.GatewayConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.Yaml;

/**
 * deploy/kubernetes: every manifest parses into fabric8's typed model (InferencePool, which it has no model for, as a
 * generic resource), every kustomization names files that exist, each overlay (base + its own files, its ConfigMap
 * patch in place of the base's) is applied to the mock API server and read back, and what the files must agree on
 * does: probes on the routes docs/operations.md names, the termination grace period covering preStop + drain delay +
 * drain + ingest's stop, the ConfigMap a configuration kvgate accepts, the Role granting what discovery reads,
 * selectors and references that meet. No kustomize binary: kustomize's own job (labels, patch merging) is not redone.
 */
@Tag("system")
class ManifestsTest {
    private static final Path ROOT = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
        .resolve("deploy/kubernetes");
    /** How long ingest may take to stop after the drain (Gateway's close: subscribers joined within 10 s). */
    private static final long INGEST_STOP_S = 10;

    private KubeFixture kube;

    @BeforeEach
    void start() {
        kube = new KubeFixture();
    }

    @AfterEach
    void stop() {
        kube.close();
    }

    private static List<Path> yamlFiles() throws Exception {
        try (Stream<Path> s = Files.walk(ROOT)) {
            return s.filter(p -> p.toString().endsWith(".yaml")).sorted().toList();
        }
    }

    private HasMetadata parse(Path f) throws Exception {
        return kube.client().getKubernetesSerialization().unmarshal(Files.readString(f));
    }

    @Test
    void everyManifestParsesIntoTheTypedModelAndEveryKustomizationNamesFilesThatExist() throws Exception {
        List<Path> files = yamlFiles();
        assertTrue(files.size() >= 15, "deploy/kubernetes has its manifests: " + files);
        for (Path f : files) {
            if (f.getFileName().toString().equals("kustomization.yaml")) {
                Map<String, Object> k = new Yaml().load(Files.readString(f));
                assertEquals("Kustomization", k.get("kind"), f.toString());
                for (Object r : (List<?>) k.getOrDefault("resources", List.of())) {
                    Path p = f.getParent().resolve((String) r).normalize();
                    assertTrue(Files.isRegularFile(p) || Files.isRegularFile(p.resolve("kustomization.yaml")),
                        f + " names resource " + r + ", which does not exist");
                }
                for (Object patch : (List<?>) k.getOrDefault("patches", List.of())) {
                    Path p = f.getParent().resolve((String) ((Map<?, ?>) patch).get("path"));
                    assertTrue(Files.isRegularFile(p), f + " names patch " + p + ", which does not exist");
                }
                continue;
            }
            HasMetadata m = parse(f);
            assertNotNull(m.getMetadata().getName(), f + " has a name");
            if (m instanceof GenericKubernetesResource g) {
                assertEquals("InferencePool", g.getKind(), f + ": only the InferencePool has no typed fabric8 model");
            }
        }
    }

    /** An overlay's objects: the base's, its own resources, and its patches in place of the base objects they name. */
    private Map<String, HasMetadata> overlay(String name) throws Exception {
        Map<String, HasMetadata> out = new LinkedHashMap<>();
        collect(ROOT.resolve("overlays").resolve(name), out);
        return out;
    }

    private void collect(Path dir, Map<String, HasMetadata> out) throws Exception {
        Map<String, Object> k = new Yaml().load(Files.readString(dir.resolve("kustomization.yaml")));
        for (Object r : (List<?>) k.getOrDefault("resources", List.of())) {
            Path p = dir.resolve((String) r).normalize();
            if (Files.isDirectory(p)) {
                collect(p, out);
            } else {
                HasMetadata m = parse(p);
                out.put(m.getKind() + "/" + m.getMetadata().getName(), m);
            }
        }
        for (Object patch : (List<?>) k.getOrDefault("patches", List.of())) {
            HasMetadata m = parse(dir.resolve((String) ((Map<?, ?>) patch).get("path")));
            String key = m.getKind() + "/" + m.getMetadata().getName();
            assertTrue(out.containsKey(key), dir + ": patch " + key + " names no object of the base");
            if (m instanceof ConfigMap) {
                out.put(key, m); // the whole configuration is replaced
            } else if (m instanceof Deployment d) {
                // Strategic merge of the one thing overlays patch: the container's ports.
                Container base = ((Deployment) out.get(key)).getSpec().getTemplate().getSpec().getContainers().get(0);
                Container over = d.getSpec().getTemplate().getSpec().getContainers().get(0);
                assertEquals(base.getName(), over.getName(), "the patch names the container");
                base.setPorts(over.getPorts());
            }
        }
    }

    @Test
    void theStandaloneOverlayAppliesAndItsPartsAgree() throws Exception {
        Map<String, HasMetadata> objs = overlay("standalone");
        apply("standalone", objs);
        checkGateway(objs, false);
    }

    @Test
    void theEppOverlayAppliesWithItsPoolAndRouteAndItsPartsAgree() throws Exception {
        Map<String, HasMetadata> objs = overlay("epp");
        apply("epp", objs);
        checkGateway(objs, true);
        GenericKubernetesResource pool = (GenericKubernetesResource) objs.get("InferencePool/vllm-pool");
        assertNotNull(PoolSource.selection(pool), "the pool's selector and targetPorts are what inference_pool discovery reads");
        Map<?, ?> ref = (Map<?, ?>) ((Map<?, ?>) pool.getAdditionalProperties().get("spec")).get("endpointPickerRef");
        Service epp = (Service) objs.get("Service/" + ref.get("name"));
        assertNotNull(epp, "the pool's endpointPickerRef names the EPP Service");
        assertEquals(9002, ((Map<?, ?>) ref.get("port")).get("number"));
        assertEquals(9002, epp.getSpec().getPorts().get(0).getPort());
        Container c = ((Deployment) objs.get("Deployment/kvgate")).getSpec().getTemplate().getSpec().getContainers().get(0);
        assertTrue(c.getPorts().stream().anyMatch(p -> p.getName().equals(epp.getSpec().getPorts().get(0).getTargetPort().getStrVal())
            && p.getContainerPort() == 9002), "the EPP Service's target port is the container's epp_listen port");
        HTTPRoute route = (HTTPRoute) objs.get("HTTPRoute/llm");
        var backend = route.getSpec().getRules().get(0).getBackendRefs().get(0);
        assertEquals("InferencePool", backend.getKind());
        assertEquals(pool.getMetadata().getName(), backend.getName());
        assertTrue(config(objs).contains("epp_listen: 0.0.0.0:9002"), "epp_listen serves the picker on the pool's port");
    }

    private static String config(Map<String, HasMetadata> objs) {
        return ((ConfigMap) objs.get("ConfigMap/kvgate-config")).getData().get("kvgate.yaml");
    }

    /** Creates every object in {@code ns} on the mock API server and reads it back. */
    private void apply(String ns, Map<String, HasMetadata> objs) {
        KubernetesClient c = kube.client();
        for (HasMetadata m : objs.values()) {
            m.getMetadata().setNamespace(ns);
            if (m instanceof GenericKubernetesResource g) {
                c.genericKubernetesResources(KubeFixture.INFERENCE_POOLS).inNamespace(ns).resource(g).create();
                assertNotNull(c.genericKubernetesResources(KubeFixture.INFERENCE_POOLS).inNamespace(ns).withName(g.getMetadata().getName()).get());
            } else {
                c.resource(m).inNamespace(ns).create();
                assertNotNull(c.resource(m).inNamespace(ns).get(), m.getKind() + "/" + m.getMetadata().getName() + " read back");
            }
        }
    }

    private void checkGateway(Map<String, HasMetadata> objs, boolean epp) throws Exception {
        Deployment d = (Deployment) objs.get("Deployment/kvgate");
        var pod = d.getSpec().getTemplate().getSpec();
        Container c = pod.getContainers().get(0);
        assertEquals("/ready", c.getReadinessProbe().getHttpGet().getPath(), "readiness: the gateway's own /ready");
        assertEquals("/health", c.getLivenessProbe().getHttpGet().getPath(), "liveness: /health");
        assertEquals("/health", c.getStartupProbe().getHttpGet().getPath());
        int http = c.getPorts().stream().filter(p -> p.getName().equals("http")).findFirst().orElseThrow().getContainerPort();
        for (var probe : List.of(c.getReadinessProbe(), c.getLivenessProbe(), c.getStartupProbe())) {
            assertEquals("http", probe.getHttpGet().getPort().getStrVal(), "probes on the client listener's port");
        }

        String yaml = config(objs);
        // epp_listen belongs to the endpoint picker (another module of this release); a build without it still checks the rest.
        GatewayConfig cfg = GatewayConfig.parse(ConfigSchema.key("epp_listen") == null ? yaml.replaceAll("(?m)^epp_listen:.*$", "") : yaml);
        assertEquals(http, cfg.listen().port(), "the container port is the configuration's listen port");
        assertFalse(cfg.rules().get(0).discovery().isStatic(), "the rule discovers its engines");
        assertEquals(epp ? "inference_pool" : "kubernetes", cfg.rules().get(0).discovery().type());

        List<String> preStop = c.getLifecycle().getPreStop().getExec().getCommand();
        assertEquals("sleep", preStop.get(0));
        long preStopS = Long.parseLong(preStop.get(1));
        List<String> args = c.getArgs();
        long drainMs = Long.parseLong(args.get(args.indexOf("--drain-ms") + 1));
        long needed = preStopS + cfg.shutdown().drainDelayMs() / 1000 + drainMs / 1000 + INGEST_STOP_S;
        assertTrue(pod.getTerminationGracePeriodSeconds() >= needed, "terminationGracePeriodSeconds "
            + pod.getTerminationGracePeriodSeconds() + " must cover preStop + drain_delay_ms + --drain-ms + ingest's stop = " + needed);

        Role role = (Role) objs.get("Role/kvgate-discovery");
        Set<String> granted = new java.util.TreeSet<>();
        role.getRules().forEach(r -> {
            if (r.getVerbs().containsAll(List.of("get", "list", "watch"))) {
                r.getResources().forEach(res -> r.getApiGroups().forEach(g -> granted.add(g + "/" + res)));
            }
        });
        assertEquals(Set.of("/pods", "discovery.k8s.io/endpointslices", "inference.networking.k8s.io/inferencepools"), granted);
        role.getRules().forEach(r -> assertEquals(List.of("get", "list", "watch"), r.getVerbs(), "discovery writes nothing"));
        assertEquals("kvgate", pod.getServiceAccountName());
        assertNotNull(objs.get("ServiceAccount/kvgate"));

        Map<String, String> labels = d.getSpec().getTemplate().getMetadata().getLabels();
        assertTrue(labels.entrySet().containsAll(((Service) objs.get("Service/kvgate")).getSpec().getSelector().entrySet()));
        assertTrue(labels.entrySet().containsAll(((PodDisruptionBudget) objs.get("PodDisruptionBudget/kvgate")).getSpec()
            .getSelector().getMatchLabels().entrySet()));
        HorizontalPodAutoscaler hpa = (HorizontalPodAutoscaler) objs.get("HorizontalPodAutoscaler/kvgate");
        assertEquals("Deployment", hpa.getSpec().getScaleTargetRef().getKind());
        assertEquals(d.getMetadata().getName(), hpa.getSpec().getScaleTargetRef().getName());
        assertTrue(hpa.getSpec().getMinReplicas() >= 2, "two gateways at least: a rollout or a node drain keeps one serving");
        List<String> mounted = new ArrayList<>();
        c.getVolumeMounts().forEach(v -> mounted.add(v.getMountPath()));
        assertTrue(args.contains("/etc/kvgate/kvgate.yaml") && mounted.contains("/etc/kvgate"), "the ConfigMap is the --config file");
    }
}
