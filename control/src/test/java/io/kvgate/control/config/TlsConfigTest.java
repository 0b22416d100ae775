package io.kvgate.control.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TlsConfigTest {
    private static final String RULES = """
        rules:
          - name: chat
            models: [qwen3]
            engine: vllm
            policy: round_robin
            endpoints:
              - url: http://127.0.0.1:9001
        """;

    @TempDir
    Path dir;

    private GatewayConfig parse(String head) throws ConfigException {
        return GatewayConfig.parse(head + RULES, dir);
    }

    private String problems(String head) {
        ConfigException e = assertThrows(ConfigException.class, () -> parse(head));
        return String.join("\n", e.problems());
    }

    private void files(String... names) throws Exception {
        for (String n : names) {
            Files.writeString(dir.resolve(n), "pem");
        }
    }

    @Test
    void withoutTheSectionsThereIsNoTlsAndTheTreeIsUnchanged() throws Exception {
        GatewayConfig c = parse("");
        assertSame(TlsConfig.NONE, c.tls());
        assertFalse(ConfigTree.toTree(c, false).containsKey("tls"));
    }

    @Test
    void listenerFilesResolveAgainstTheConfigDirectoryAndRoundTripThroughTheTree() throws Exception {
        files("cert.pem", "key.pem", "ca.pem");
        GatewayConfig c = parse("""
            tls: {cert_file: cert.pem, key_file: key.pem, client_ca_file: ca.pem, client_auth: require,
                  client_identities: [billing-batch], provider: jdk}
            proxy_protocol: true
            upstream_tls: {ca_file: ca.pem, cert_file: cert.pem, key_file: key.pem}
            """);
        TlsConfig.Listener l = c.tls().listener();
        assertEquals(dir.resolve("cert.pem").toString(), l.certFile());
        assertEquals(TlsConfig.ClientAuth.REQUIRE, l.clientAuthKind());
        assertEquals(List.of("billing-batch"), l.clientIdentities());
        assertEquals("jdk", l.provider());
        assertEquals(5_000, l.watchIntervalMs());
        assertTrue(c.tls().proxyProtocol());
        assertEquals(dir.resolve("key.pem").toString(), c.tls().upstream().keyFile());
        // GET /admin/v1/config -> PUT keeps every key (absolute paths now).
        GatewayConfig again = GatewayConfig.parse(ConfigTree.toYaml(c));
        assertEquals(c.tls(), again.tls());
        assertTrue(ConfigTree.sameEffective(c, again));
    }

    @Test
    void defaultsAreOpensslProviderAndNoClientCertificate() throws Exception {
        files("cert.pem", "key.pem");
        TlsConfig.Listener l = parse("tls: {cert_file: cert.pem, key_file: key.pem}\n").tls().listener();
        assertEquals("openssl", l.provider());
        assertEquals(TlsConfig.ClientAuth.NONE, l.clientAuthKind());
        assertNull(l.clientCaFile());
    }

    @Test
    void missingKeyFileIsNamed() throws Exception {
        files("cert.pem");
        assertTrue(problems("tls: {cert_file: cert.pem}\n").contains("tls.key_file: is required in tls (a PEM file)"));
    }

    @Test
    void unreadableFileIsNamedWithItsValue() throws Exception {
        files("key.pem");
        String p = problems("tls: {cert_file: nope.pem, key_file: key.pem}\n");
        assertTrue(p.contains("tls.cert_file: value 'nope.pem' is not a readable file (" + dir.resolve("nope.pem") + ")"), p);
    }

    @Test
    void clientAuthWithoutClientCaIsRefused() throws Exception {
        files("cert.pem", "key.pem");
        String p = problems("tls: {cert_file: cert.pem, key_file: key.pem, client_auth: optional}\n");
        assertTrue(p.contains("tls.client_auth: value 'optional' needs tls.client_ca_file"), p);
    }

    @Test
    void clientCaOrIdentitiesWithoutClientAuthAreRefused() throws Exception {
        files("cert.pem", "key.pem", "ca.pem");
        String p = problems("tls: {cert_file: cert.pem, key_file: key.pem, client_ca_file: ca.pem, client_identities: [a]}\n");
        assertTrue(p.contains("tls.client_ca_file: value 'ca.pem' applies only with client_auth: optional or require"), p);
        assertTrue(p.contains("tls.client_identities: value [a] applies only with client_auth"), p);
    }

    @Test
    void unknownClientAuthProviderAndKeysAreRefused() throws Exception {
        files("cert.pem", "key.pem");
        String p = problems("tls: {cert_file: cert.pem, key_file: key.pem, client_auth: maybe, provider: gnutls, ciphers: x}\n");
        assertTrue(p.contains("tls.client_auth: value 'maybe' must be one of"), p);
        assertTrue(p.contains("tls.provider: value 'gnutls' must be one of"), p);
        assertTrue(p.contains("tls.ciphers: unknown key"), p);
    }

    @Test
    void upstreamClientCertificateNeedsItsKey() throws Exception {
        files("cert.pem");
        String p = problems("upstream_tls: {cert_file: cert.pem}\n");
        assertTrue(p.contains("upstream_tls.key_file: is required with upstream_tls.cert_file"), p);
    }

    @Test
    void httpsEndpointsAreAcceptedWithPort443ByDefault() throws Exception {
        GatewayConfig c = GatewayConfig.parse(RULES.replace("http://127.0.0.1:9001", "https://engine-1.internal"));
        EndpointConfig e = c.rules().get(0).endpoints().get(0);
        assertTrue(e.tls());
        assertEquals(443, e.port());
        assertEquals("engine-1.internal", e.host());
    }
}
