package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TenancyConfigTest {
    private static final String RULES = """
        rules:
          - name: chat
            models: [qwen3]
            engine: vllm
            endpoints:
              - url: http://127.0.0.1:9001
        """;
    private static final String ACME = TenancyConfig.sha256Hex("acme-key");

    @TempDir
    Path dir;

    private GatewayConfig parse(String head) throws ConfigException {
        return GatewayConfig.parse(head + RULES, dir);
    }

    private String problems(String head) {
        ConfigException e = assertThrows(ConfigException.class, () -> parse(head));
        return String.join("\n", e.problems());
    }

    @Test
    void withoutTheKeysThereAreNoTenantsAndTheTreeIsUnchanged() throws Exception {
        GatewayConfig c = parse("");
        assertEquals(TenancyConfig.NONE, c.tenancy());
        var tree = ConfigTree.toTree(c, false);
        for (String k : List.of("tenants", "rate_limit_store", "cache_salt", "replicas")) {
            assertTrue(!tree.containsKey(k) || tree.get(k) instanceof List<?> l && l.isEmpty(), k + " written: " + tree.get(k));
        }
    }

    @Test
    void aTenantReadsItsDigestsModelsPriorityAndLimits() throws Exception {
        Files.writeString(dir.resolve("beta.keys"), "# beta's keys\n" + TenancyConfig.sha256Hex("b1").toUpperCase() + "\n\n");
        GatewayConfig c = parse("""
            replicas: 3
            tenants:
              - name: acme
                api_key_sha256: [%s]
                models: [qwen3]
                priority: batch
                limits: {requests_per_minute: 60, tokens_per_minute: 1000}
              - name: beta
                api_keys_file: beta.keys
            """.formatted(ACME));
        TenancyConfig t = c.tenancy();
        assertEquals(3, t.replicas());
        assertEquals(List.of(ACME), t.tenants().get(0).apiKeySha256());
        assertEquals("batch", t.tenants().get(0).priority());
        assertEquals(new TenancyConfig.Limits(60, 1000, 0, 0), t.tenants().get(0).limits());
        assertEquals(List.of(TenancyConfig.sha256Hex("b1")), t.tenants().get(1).apiKeySha256(), "lower-cased, comments skipped");
        assertFalse(t.tenants().get(1).limits().any());
        assertNull(t.rateLimitStore());
        assertTrue(t.anyLimits());
    }

    @Test
    void aPlaintextKeyWhereADigestBelongsIsRefusedWithoutEchoingIt() {
        String p = problems("""
            tenants:
              - {name: acme, api_key_sha256: [sk-live-0123456789abcdef]}
            """);
        assertTrue(p.contains("tenants[0] (name=acme).api_key_sha256: value 'sk-live-0123...' must be a SHA-256 hex digest"), p);
        assertFalse(p.contains("0123456789abcdef"), "the secret is not echoed: " + p);
    }

    @Test
    void badTenantsAreNamedByFieldValueAndRule() {
        String p = problems("""
            tenants:
              - {name: acme, api_key_sha256: [%1$s], limits: {tokens_per_minute: -1}}
              - {name: acme, api_key_sha256: [%1$s], priority: urgent}
              - {name: "no spaces", api_key_sha256: [%2$s]}
              - {name: nokey}
            api_keys: [acme-key]
            """.formatted(ACME, TenancyConfig.sha256Hex("x")));
        assertTrue(p.contains("limits.tokens_per_minute: value -1"), p);
        assertTrue(p.contains("tenants[1] (name=acme).name: value 'acme' is already the name of another tenant"), p);
        assertTrue(p.contains(".api_key_sha256: value '" + ACME + "' is already a key of tenant 'acme'"), p);
        assertTrue(p.contains("priority: value 'urgent' must be one of interactive|standard|batch"), p);
        assertTrue(p.contains("(name=no spaces).name: value 'no spaces' must be 1-64 letters"), p);
        assertTrue(p.contains("(name=nokey).api_key_sha256: is required (or api_keys_file)"), p);
        assertTrue(p.contains("api_keys: holds a key that is also a key of tenant 'acme'"), p);
    }

    @Test
    void theRateLimitStoreIsReadAndChecked() throws Exception {
        TenancyConfig t = parse("rate_limit_store: {url: \"redis://127.0.0.1:6379/2\", on_failure: deny, timeout_ms: 20}\n").tenancy();
        assertEquals(new TenancyConfig.RateLimitStore("redis://127.0.0.1:6379/2", "deny", 20), t.rateLimitStore());
        assertEquals(new TenancyConfig.RateLimitStore("redis://redis.internal:6379", "local", 50),
            parse("rate_limit_store: {url: \"redis://redis.internal:6379\"}\n").tenancy().rateLimitStore(), "defaults");
        String p = problems("rate_limit_store: {url: \"http://127.0.0.1:6379\", on_failure: maybe, timeout_ms: 0}\n");
        assertTrue(p.contains("rate_limit_store.url: value 'http://127.0.0.1:6379' must be redis://host:port[/db]"), p);
        assertTrue(p.contains("rate_limit_store.on_failure: value 'maybe' must be one of local|deny|allow"), p);
        assertTrue(p.contains("rate_limit_store.timeout_ms: value 0 must be in [1, 10000]"), p);
        assertTrue(problems("rate_limit_store: {}\n").contains("rate_limit_store.url: is required"));
        assertTrue(problems("rate_limit_store: {url: \"redis://h:99999\"}\n").contains("rate_limit_store.url: value 'redis://h:99999' has port 99999, outside 1-65535"));
        assertTrue(problems("rate_limit_store: {url: \"redis://:pw@h:6379\"}\n").contains("no password in the URL"));
        assertTrue(problems("rate_limit_store: {url: \"redis://h:6379\", pool: 3}\n").contains("rate_limit_store.pool"), "unknown key");
    }

    @Test
    void theSaltSecretIsChecked() throws Exception {
        Files.writeString(dir.resolve("short.secret"), "tooshort\n");
        String p = problems("cache_salt: {secret_file: short.secret}\n");
        assertTrue(p.contains("cache_salt.secret_file: value 'short.secret' holds 8 characters: a salt secret needs at least 16"), p);
        assertTrue(problems("cache_salt: {secret_file: missing.secret}\n").contains("cache_salt.secret_file: value '"), "unreadable");
        assertTrue(problems("cache_salt: {}\n").contains("cache_salt.secret_file: is required"));
    }

    @Test
    void theSaltSecretIsReadButNeverWrittenBack() throws Exception {
        Files.writeString(dir.resolve("salt.secret"), "0123456789abcdef-secret\n");
        GatewayConfig c = parse("cache_salt: {secret_file: salt.secret}\n");
        assertEquals("0123456789abcdef-secret", c.tenancy().cacheSalt().secret());
        String yaml = ConfigTree.toYaml(c);
        assertFalse(yaml.contains("0123456789abcdef-secret"), yaml);
        assertTrue(yaml.contains("secret_file: " + dir.resolve("salt.secret")), yaml);
    }
}
