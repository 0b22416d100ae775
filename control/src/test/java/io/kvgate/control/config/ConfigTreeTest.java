package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Read-back, redaction, secrets from files and the environment, restart-only keys, patches and diffs. */
class ConfigTreeTest {
    private static final String FULL = """
        listen: 127.0.0.1:8080
        admin_listen: 127.0.0.1:8081
        admin_token: admin-secret-0123456789
        api_keys: [k1-secret, k2-secret]
        rules:
          - name: chat
            models: [qwen3]
            engine: vllm
            policy: kv_exact
            kv_capacity_blocks: 2000000
            kv:
              load_cap_factor: 1.5
            endpoints:
              - url: http://127.0.0.1:9001
                kv_events: tcp://127.0.0.1:5557
              - url: http://127.0.0.1:9002
                role: null
          - name: sess
            models: [m2]
            engine: sglang
            policy: session
            session:
              key: header
              header: x-conv
            endpoints:
              - url: http://127.0.0.1:9003
                weight: 3
        """;

    private static String problems(String yaml) {
        return String.join("\n", assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml, null, n -> null)).problems());
    }

    @Test
    void readBackNeverContainsASecretAndParsesToTheSameConfiguration() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        String yaml = ConfigTree.toYaml(cur);
        assertFalse(yaml.contains("admin-secret"), yaml);
        assertFalse(yaml.contains("k1-secret"), yaml);
        assertTrue(yaml.contains("admin_token: <redacted>"), yaml);
        GatewayConfig back = GatewayConfig.parse(ConfigTree.keepRedactedSecrets(yaml, cur));
        assertTrue(ConfigTree.sameEffective(cur, back), "GET -> PUT unchanged is the same configuration");
        assertEquals(List.of("k1-secret", "k2-secret"), back.apiKeys());
        assertEquals(ConfigTree.digest(cur), ConfigTree.digest(back));
    }

    @Test
    void aRedactedSecretCannotBeStartedWithAndAnExtraRedactedKeyIsRefused() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        assertTrue(problems(ConfigTree.toYaml(cur)).contains("admin_token: is '<redacted>'"));
        String threeKeys = ConfigTree.toYaml(cur).replace("- <redacted>\n- <redacted>", "- <redacted>\n- <redacted>\n- <redacted>");
        ConfigException e = assertThrows(ConfigException.class, () -> ConfigTree.keepRedactedSecrets(threeKeys, cur));
        assertTrue(e.getMessage().contains("api_keys[2]"), e.getMessage());
        // A new key next to kept ones: the kept ones keep their values.
        String added = ConfigTree.toYaml(cur).replace("- <redacted>\n- <redacted>", "- <redacted>\n- k3-new");
        assertEquals(List.of("k1-secret", "k3-new"), GatewayConfig.parse(ConfigTree.keepRedactedSecrets(added, cur)).apiKeys());
    }

    @Test
    void secretsComeFromFilesAndTheEnvironment(@TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve("keys"), "# clients\nk-a\n\n  k-b  \n");
        Files.writeString(dir.resolve("token"), "tok-from-file-0123456789\n");
        String yaml = FULL.replace("admin_token: admin-secret-0123456789", "admin_token_file: token")
            .replace("api_keys: [k1-secret, k2-secret]", "api_keys_file: keys")
            .replace("http://127.0.0.1:9003", "${ENGINE_URL}");
        GatewayConfig c = GatewayConfig.parse(yaml, dir, Map.of("ENGINE_URL", "http://127.0.0.1:9333")::get);
        assertEquals(List.of("k-a", "k-b"), c.apiKeys());
        assertEquals("tok-from-file-0123456789", c.adminToken());
        assertEquals(9333, c.rules().get(1).endpoints().get(0).port());
        String back = ConfigTree.toYaml(c);
        assertTrue(back.contains("api_keys_file: keys") && back.contains("admin_token_file: token"), back);
        assertTrue(ConfigTree.sameEffective(c, GatewayConfig.parse(back, dir, n -> null)));

        String p = String.join("\n", assertThrows(ConfigException.class, () -> GatewayConfig.parse(yaml, dir, n -> null)).problems());
        assertTrue(p.contains("rules[1] (name=sess).endpoints[0] (url=${ENGINE_URL}).url: refers to environment variable ENGINE_URL, which is not set"), p);
        Files.writeString(dir.resolve("keys"), "# nothing\n");
        p = String.join("\n", assertThrows(ConfigException.class,
            () -> GatewayConfig.parse(yaml, dir, Map.of("ENGINE_URL", "http://h:1")::get)).problems());
        assertTrue(p.contains("api_keys_file: value 'keys' holds no key"), p);
        p = problems(FULL.replace("admin_token: admin-secret-0123456789", "admin_token_file: /nonexistent/t"));
        assertTrue(p.contains("admin_token_file: value '/nonexistent/t' cannot be read"), p);
        assertEquals("a$b", GatewayConfig.parse(FULL.replace("admin-secret-0123456789", "a$$b")).adminToken());
    }

    @Test
    void restartOnlyChangesAreNamed() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        GatewayConfig next = GatewayConfig.parse(FULL.replace("listen: 127.0.0.1:8080", "listen: 127.0.0.1:8090")
            .replace("kv_capacity_blocks: 2000000", "kv_capacity_blocks: 4000000") + "router:\n  ring_size: 1024\n");
        assertEquals(List.of("listen", "router.ring_size", "rules[*].kv_capacity_blocks (index capacity 2000000 -> 4000000)"),
            cur.restartOnlyChanges(next));
        assertEquals(List.of(), cur.restartOnlyChanges(GatewayConfig.parse(FULL.replace("k2-secret", "k9"))));
        assertEquals(List.of("ingest"),
            cur.restartOnlyChanges(GatewayConfig.parse(FULL + "ingest:\n  retry_max_ms: 5000\n")));
    }

    @Test
    void rangesTheIndexAndTheCastWouldHaveHidden() {
        String p = problems(FULL.replace("kv_capacity_blocks: 2000000", "kv_capacity_blocks: 1500000000"));
        assertTrue(p.contains("kv_capacity_blocks: value 1500000000 must be in [1024, 1000000000]"), p);
        p = problems(FULL.replace("policy: kv_exact", "policy: kv_exact\n    block_size: 4294967312"));
        assertTrue(p.contains("block_size: value 4294967312 must be in [1, 4096]"), p);
    }

    @Test
    void loopbackMeansAnIpLiteral() {
        assertTrue(GatewayConfig.isLoopback("127.0.0.1"));
        assertTrue(GatewayConfig.isLoopback("127.255.3.4"));
        assertTrue(GatewayConfig.isLoopback("::1"));
        assertFalse(GatewayConfig.isLoopback("localhost"));
        assertFalse(GatewayConfig.isLoopback("127.evil.example"));
        assertFalse(GatewayConfig.isLoopback("127.0.0.1.nip.io"));
        assertFalse(GatewayConfig.isLoopback("0.0.0.0"));
        assertFalse(GatewayConfig.isLoopback("10.0.0.1"));
        assertTrue(problems(FULL.replace("admin_listen: 127.0.0.1:8081", "admin_listen: 127.x.example:8081")
            .replace("admin_token: admin-secret-0123456789\n", "")).contains("set admin_token"));
    }

    @Test
    void patchChangesTunablesAndNamesRefusedKeys() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        Map<String, Object> ch = new LinkedHashMap<>();
        ch.put("kv.load_cap_factor", 1.2);
        ch.put("fallback", "round_robin");
        GatewayConfig next = GatewayConfig.parse(ConfigTree.patchRule(cur, "chat", ch));
        assertEquals(1.2, next.rules().get(0).kvExact().loadCapFactor());
        assertEquals("round_robin", next.rules().get(0).fallback());
        assertEquals(List.of("rules[name=chat].fallback: least_outstanding -> round_robin",
            "rules[name=chat].kv.load_cap_factor: 1.5 -> 1.2"), ConfigTree.diff(cur, next));
        ConfigException e = assertThrows(ConfigException.class,
            () -> ConfigTree.patchRule(cur, "chat", Map.of("kv.load_cap_facter", 2, "kv_capacity_blocks", 5, "engine", "sglang")));
        String p = String.join("\n", e.problems());
        assertTrue(p.contains("rules (name=chat).kv.load_cap_facter: is not a rule key"), p);
        assertTrue(p.contains("rules (name=chat).kv_capacity_blocks: is restart-only"), p);
        assertTrue(p.contains("rules (name=chat).engine: is not a live tunable"), p);
        assertThrows(ConfigException.class, () -> ConfigTree.patchRule(cur, "nope", Map.of("explain", true)));
        // Out-of-range values are refused by the ordinary validation.
        assertTrue(assertThrows(ConfigException.class, () -> GatewayConfig.parse(ConfigTree.patchRule(cur, "chat",
            Map.of("kv.load_cap_factor", 0.5)))).getMessage().contains("kv.load_cap_factor: value 0.5 must be in [1.0, 100.0]"));
    }

    @Test
    void weightAndSecretRotationShowInDiffWithoutTheSecret() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        GatewayConfig next = GatewayConfig.parse(ConfigTree.withEndpointWeight(cur, "127.0.0.1:9003", 7));
        assertEquals(7, next.rules().get(1).endpoints().get(0).weight());
        assertEquals(List.of("rules[name=sess].endpoints[url=http://127.0.0.1:9003].weight: 3 -> 7"), ConfigTree.diff(cur, next));
        GatewayConfig rotated = GatewayConfig.parse(FULL.replace("k2-secret", "k2-rotated"));
        List<String> d = ConfigTree.diff(cur, rotated);
        assertEquals(List.of("api_keys: <redacted> -> <redacted, changed>"), d);
        assertEquals(ConfigTree.digest(cur), ConfigTree.digest(rotated), "the digest does not cover secret values");
        assertFalse(ConfigTree.sameEffective(cur, rotated));
        assertNotEquals(ConfigTree.digest(cur), ConfigTree.digest(next));
        assertThrows(ConfigException.class, () -> ConfigTree.withEndpointWeight(cur, "127.0.0.1:1", 2));
    }
    @Test
    void aWholeAddedOrRemovedEndpointIsOneLineOfTheDiff() throws Exception {
        GatewayConfig cur = GatewayConfig.parse(FULL);
        GatewayConfig moved = GatewayConfig.parse(FULL.replace("127.0.0.1:9003", "127.0.0.1:9999"));
        assertEquals(List.of("rules[name=sess].endpoints[url=http://127.0.0.1:9003]: removed",
            "rules[name=sess].endpoints[url=http://127.0.0.1:9999]: added"), ConfigTree.diff(cur, moved));
    }
}
