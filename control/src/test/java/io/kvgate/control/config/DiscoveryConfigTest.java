package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code rules[].discovery} (issue #42 item 1): each type's keys, and every misuse named by field, value and rule. */
class DiscoveryConfigTest {
    private static String rule(String policy, String engine, String discovery, String endpoints) {
        return "rules:\n  - name: r\n    models: [m]\n    engine: " + engine + "\n    policy: " + policy + "\n"
            + (discovery == null ? "" : "    discovery: " + discovery + "\n")
            + (endpoints == null ? "" : "    endpoints: " + endpoints + "\n");
    }

    private static String rule(String discovery) {
        return rule("round_robin", "vllm", discovery, null);
    }

    private static String problems(String yaml) {
        ConfigException e = assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml));
        return String.join("\n", e.problems());
    }

    private static void roundTrips(GatewayConfig c) throws Exception {
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(c, true))), "read back");
    }

    @Test
    void withoutDiscoveryTheRuleIsStaticAndNeedsEndpoints() throws Exception {
        GatewayConfig c = GatewayConfig.parse(rule("round_robin", "vllm", null, "[{url: \"http://127.0.0.1:9001\"}]"));
        assertTrue(c.rules().get(0).discovery().isStatic());
        assertTrue(!ConfigTree.dump(ConfigTree.toTree(c, true)).contains("discovery"), "static is not written");
        String none = problems(rule(null));
        assertTrue(none.contains("rules[0] (name=r).endpoints: must list at least one endpoint"), none);
    }

    @Test
    void dnsAndKubernetesAndPoolRulesNeedNoEndpointsAndReadBack() throws Exception {
        GatewayConfig dns = GatewayConfig.parse(rule("{type: dns, name: vllm.llm.svc.cluster.local, ports: [8000, 8001],"
            + " kv_events_port: 5557, interval_ms: 2000}"));
        DiscoveryConfig d = dns.rules().get(0).discovery();
        assertEquals(DiscoveryConfig.Type.DNS, d.typeKind());
        assertEquals(List.of("8000", "8001"), d.ports());
        assertEquals("a", d.record());
        assertEquals("5557", d.kvEventsPort());
        assertEquals(List.of(), dns.rules().get(0).endpoints());
        roundTrips(dns);

        GatewayConfig pods = GatewayConfig.parse(rule("{type: kubernetes, selector: {app: vllm}, ports: [http],"
            + " kv_events_port: kv-events, namespace: llm}"));
        assertEquals(Map.of("app", "vllm"), pods.rules().get(0).discovery().selector());
        assertEquals("kv-events", pods.rules().get(0).discovery().kvEventsPort());
        roundTrips(pods);

        GatewayConfig pd = GatewayConfig.parse(rule("pd", "sglang", "{type: kubernetes, prefill_selector: {role: prefill},"
            + " decode_selector: {role: decode}, bootstrap_port: sglang-boot}", null));
        assertEquals("sglang-boot", pd.rules().get(0).discovery().bootstrapPort());
        roundTrips(pd);

        GatewayConfig pool = GatewayConfig.parse(rule("{type: inference_pool, pool: vllm-pool}"));
        assertEquals("vllm-pool", pool.rules().get(0).discovery().pool());
        roundTrips(pool);
    }

    @Test
    void discoveredEndpointsAreNotWrittenBackSoAReloadOfTheDumpReadsTheSameRule() throws Exception {
        GatewayConfig c = GatewayConfig.parse(rule("{type: kubernetes, service: vllm}"));
        EndpointConfig found = new EndpointConfig("http://10.0.0.7:8000", "10.0.0.7", 8000, 1, null, false, "", 1, null, null, 0);
        GatewayConfig withFound = c.withRules(List.of(c.rules().get(0).withDiscoveredEndpoints(List.of(found))));
        assertEquals(List.of(found), withFound.rules().get(0).endpoints());
        assertEquals(c, GatewayConfig.parse(ConfigTree.dump(ConfigTree.toTree(withFound, true))),
            "the dump of a configuration with discovered endpoints parses to the configured rule, endpoints empty");
        RuleConfig staticRule = GatewayConfig.parse(rule("round_robin", "vllm", null, "[{url: \"http://127.0.0.1:9001\"}]"))
            .rules().get(0);
        assertThrows(IllegalStateException.class, () -> staticRule.withDiscoveredEndpoints(List.of(found)));
    }

    @Test
    void misusesNameFieldValueAndRule() {
        String both = problems(rule("round_robin", "vllm", "{type: kubernetes, service: vllm}", "[{url: \"http://127.0.0.1:9001\"}]"));
        assertTrue(both.contains("rules[0] (name=r).endpoints: must be absent with discovery.type kubernetes"), both);
        String type = problems(rule("{type: consul}"));
        assertTrue(type.contains("rules[0] (name=r).discovery.type: value 'consul' must be one of"), type);
        String noName = problems(rule("{type: dns, ports: [8000]}"));
        assertTrue(noName.contains("rules[0] (name=r).discovery.name: is required with discovery.type dns"), noName);
        String noPort = problems(rule("{type: dns, name: x.svc}"));
        assertTrue(noPort.contains("rules[0] (name=r).discovery.ports: is required with discovery.record a"), noPort);
        String srvPort = problems(rule("{type: dns, name: x.svc, record: srv, ports: [8000]}"));
        assertTrue(srvPort.contains("discovery.ports: value [8000] must be absent with discovery.record srv"), srvPort);
        String namedDns = problems(rule("{type: dns, name: x.svc, ports: [http]}"));
        assertTrue(namedDns.contains("discovery.ports: value 'http' must be a port number with discovery.type dns"), namedDns);
        String badPort = problems(rule("{type: kubernetes, service: s, ports: [70000]}"));
        assertTrue(badPort.contains("discovery.ports: value 70000 must be a port number in [1, 65535] or a Kubernetes port name"),
            badPort);
        String twoSources = problems(rule("{type: kubernetes, service: s, selector: {app: a}}"));
        assertTrue(twoSources.contains("discovery.service: discovery.type kubernetes needs exactly one of service, selector"),
            twoSources);
        String noSource = problems(rule("{type: kubernetes}"));
        assertTrue(noSource.contains("this rule sets 0"), noSource);
        String wrongType = problems(rule("{type: dns, name: x.svc, ports: [8000], service: s}"));
        assertTrue(wrongType.contains("discovery.service: value 's' applies only with discovery.type kubernetes (this rule's"
            + " discovery.type is dns)"), wrongType);
        String staticKeys = problems(rule("round_robin", "vllm", "{ports: [8000]}", "[{url: \"http://127.0.0.1:9001\"}]"));
        assertTrue(staticKeys.contains("discovery.ports: value [8000] applies to discovered endpoints only"), staticKeys);
        String ns = problems(rule("{type: kubernetes, service: s, namespace: Bad_NS}"));
        assertTrue(ns.contains("discovery.namespace: value 'Bad_NS' must be a Kubernetes namespace name"), ns);
        String noPool = problems(rule("{type: inference_pool}"));
        assertTrue(noPool.contains("discovery.pool: is required with discovery.type inference_pool"), noPool);
        String poolPorts = problems(rule("{type: inference_pool, pool: p, ports: [8000]}"));
        assertTrue(poolPorts.contains("discovery.ports: value [8000] must be absent with discovery.type inference_pool"), poolPorts);
        String unknown = problems(rule("{type: kubernetes, service: s, label_selector: x}"));
        assertTrue(unknown.contains("discovery.label_selector: unknown key"), unknown);
    }

    @Test
    void pdNeedsBothRoleSelectorsAndOnlyKubernetesHasRoles() {
        String dns = problems(rule("pd", "vllm", "{type: dns, name: x.svc, ports: [8000]}", null));
        assertTrue(dns.contains("discovery.type: value 'dns' cannot serve policy 'pd'"), dns);
        String pool = problems(rule("pd", "vllm", "{type: inference_pool, pool: p}", null));
        assertTrue(pool.contains("discovery.type: value 'inference_pool' cannot serve policy 'pd'"), pool);
        String oneRole = problems(rule("pd", "vllm", "{type: kubernetes, prefill_selector: {role: p}}", null));
        assertTrue(oneRole.contains("discovery.decode_selector: is required under policy 'pd'"), oneRole);
        String roleOutsidePd = problems(rule("{type: kubernetes, prefill_selector: {role: p}, decode_selector: {role: d}}"));
        assertTrue(roleOutsidePd.contains("discovery.prefill_selector: value {role=p} applies only under policy 'pd'"), roleOutsidePd);
        String bootstrap = problems(rule("{type: kubernetes, service: s, bootstrap_port: 8998}"));
        assertTrue(bootstrap.contains("discovery.bootstrap_port: value '8998' is only valid on SGLang rules under policy 'pd'"),
            bootstrap);
        String llama = problems(rule("round_robin", "llamacpp", "{type: kubernetes, service: s, kv_events_port: 5557}", null));
        assertTrue(llama.contains("discovery.kv_events_port: value '5557' is only valid for engines that publish KV events"), llama);
    }
}
