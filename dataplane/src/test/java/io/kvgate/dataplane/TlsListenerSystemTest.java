package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.kvgate.control.clock.NanoClock;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.config.ReloadOutcome;
import io.kvgate.dataplane.tls.TestPki;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.math.BigInteger;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * TLS on the client listener, end to end on loopback: a request through the gateway over TLS (JDK client and curl),
 * certificates swapped by a reload and by the file watch while an open keep-alive connection keeps working on the old
 * one, a bad file refused naming it (the old certificate stays), client certificates required, and a certificate's
 * CN standing in for an API key.
 */
@Timeout(60)
@Tag("system")
class TlsListenerSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    @TempDir
    Path dir;
    private TestPki pki;
    private FakeEngine engine;
    private Gateway gw;
    private Path configFile;

    @BeforeEach
    void setUp() throws Exception {
        pki = new TestPki(dir);
        engine = new FakeEngine("a");
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        engine.close();
    }

    private Gateway start(String tls, String extra) throws Exception {
        configFile = dir.resolve("kvgate.yaml");
        Files.writeString(configFile, """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: off
            health: {interval_ms: 60000}
            load: {enabled: false}
            tls: %s
            %s
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: %s
            """.formatted(tls, extra, engine.url()));
        gw = Gateway.start(new Gateway.Options(GatewayConfig.load(configFile), NanoClock.SYSTEM, configFile, null));
        return gw;
    }

    private static String serverTls(String provider) {
        return "{cert_file: server.pem, key_file: server.key, provider: " + provider + ", watch_interval_ms: 0}";
    }

    private HttpClient client(SSLContext ctx) {
        return HttpClient.newBuilder().sslContext(ctx).connectTimeout(Duration.ofSeconds(20)).build(); // a bound: 5 s was missed at load average 35
    }

    private HttpResponse<String> chat(HttpClient http, String apiKey) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("https://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(10)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(CHAT));
        if (apiKey != null) {
            b.header("authorization", "Bearer " + apiKey);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    @ParameterizedTest
    @ValueSource(strings = {"openssl", "jdk"})
    void aRequestGoesThroughTheGatewayOverTlsWithHttp11Negotiated(String provider) throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1,DNS:localhost", 0x1001);
        start(serverTls(provider), "");
        HttpResponse<String> r = chat(client(pki.clientContext(null)), null);
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("hello"), r.body());
        assertEquals(HttpClient.Version.HTTP_1_1, r.version());
        try (SSLSocket s = open(pki.clientContext(null))) {
            var params = s.getSSLParameters();
            params.setApplicationProtocols(new String[] {"h2", "http/1.1"}); // a client that would like h2
            s.setSSLParameters(params);
            s.startHandshake();
            assertEquals("http/1.1", s.getApplicationProtocol(), "ALPN");
            assertTrue(s.getSession().getProtocol().equals("TLSv1.3"), s.getSession().getProtocol());
        }
        // A plain-HTTP client on the TLS port gets no HTTP answer.
        try (var plain = new java.net.Socket("127.0.0.1", gw.port())) {
            plain.setSoTimeout(5_000);
            plain.getOutputStream().write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            byte[] got = plain.getInputStream().readNBytes(5);
            assertFalse(new String(got, StandardCharsets.ISO_8859_1).startsWith("HTTP/"));
        }
    }

    @Test
    void rsaCertificatesWorkToo() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0x1002, "rsa");
        start(serverTls("openssl"), "");
        assertEquals(200, chat(client(pki.clientContext(null)), null).statusCode());
    }

    @Test
    void curlWithTheCaCertificateGetsAnAnswer() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1,DNS:localhost", 0x1003);
        start(serverTls("openssl"), "");
        Process p = new ProcessBuilder("curl", "-sS", "--max-time", "10", "--cacert", pki.caCert.toString(),
            "https://127.0.0.1:" + gw.port() + "/health").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(20, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        // Without the CA curl refuses the certificate: it is verified, not merely accepted.
        Process refused = new ProcessBuilder("curl", "-sS", "--max-time", "10", "https://127.0.0.1:" + gw.port() + "/health")
            .redirectErrorStream(true).start();
        refused.getInputStream().readAllBytes();
        assertTrue(refused.waitFor(20, TimeUnit.SECONDS));
        assertEquals(60, refused.exitValue(), "curl: peer certificate cannot be authenticated");
    }

    private SSLSocket open(SSLContext ctx) throws IOException {
        SSLSocket s = (SSLSocket) ctx.getSocketFactory().createSocket("127.0.0.1", gw.port());
        s.setSoTimeout(10_000);
        return s;
    }

    private static BigInteger serialOf(SSLSocket s) throws Exception {
        return ((X509Certificate) s.getSession().getPeerCertificates()[0]).getSerialNumber();
    }

    /** One keep-alive GET /health on an open connection: its status line. */
    private static String health(SSLSocket s, BufferedReader in) throws IOException {
        OutputStream out = s.getOutputStream();
        out.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
        out.flush();
        String status = in.readLine();
        int length = 0;
        for (String h; !(h = in.readLine()).isEmpty(); ) {
            if (h.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
                length = Integer.parseInt(h.substring(15).trim());
            }
        }
        char[] body = new char[length];
        for (int read = 0; read < length; ) {
            read += in.read(body, read, length - read);
        }
        return status;
    }

    private BigInteger newConnectionSerial() throws Exception {
        try (SSLSocket s = open(pki.clientContext(null))) {
            s.startHandshake();
            return serialOf(s);
        }
    }

    @Test
    void reloadSwapsTheCertificateForNewConnectionsWhileAnOpenOneKeepsWorking() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xA1);
        start(serverTls("openssl"), "");
        try (SSLSocket kept = open(pki.clientContext(null))) {
            BufferedReader in = new BufferedReader(new InputStreamReader(kept.getInputStream(), StandardCharsets.ISO_8859_1));
            assertEquals("HTTP/1.1 200 OK", health(kept, in));
            assertEquals(BigInteger.valueOf(0xA1), serialOf(kept));

            pki.leaf("server", "localhost", "IP:127.0.0.1", 0xA2); // renewed on disk
            ReloadOutcome outcome = gw.reloadConfigFile();
            assertTrue(outcome.applied(), "a renewed certificate is a change even with the same configuration text");
            assertTrue(String.join("\n", outcome.changes()).contains("serial a2"), outcome.changes().toString());
            assertEquals(BigInteger.valueOf(0xA2), newConnectionSerial());

            assertEquals("HTTP/1.1 200 OK", health(kept, in), "the open connection is untouched");
            assertEquals(BigInteger.valueOf(0xA1), serialOf(kept));
        }
        // Reloading unchanged files again is a no-op.
        assertFalse(gw.reloadConfigFile().applied());
    }

    @Test
    void aBadKeyOnReloadKeepsTheOldCertificateAndTheAnswerNamesTheFile() throws Exception {
        TestPki.Leaf first = pki.leaf("server", "localhost", "IP:127.0.0.1", 0xB1);
        start(serverTls("openssl"), "");
        TestPki.Leaf other = pki.leaf("other", "localhost", "IP:127.0.0.1", 0xB2);
        Files.copy(other.cert(), first.cert(), java.nio.file.StandardCopyOption.REPLACE_EXISTING); // the key stays the old one
        ConfigException e = assertThrows(ConfigException.class, () -> gw.reloadConfigFile());
        assertTrue(e.getMessage().contains("tls.key_file: value '" + first.key() + "' is not the key of the certificate in"
            + " tls.cert_file (" + first.cert()), e.getMessage());
        assertEquals(BigInteger.valueOf(0xB1), newConnectionSerial());
        Files.writeString(first.key(), "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n");
        e = assertThrows(ConfigException.class, () -> gw.reloadConfigFile());
        assertTrue(e.getMessage().contains("holds a PKCS#1 RSA key: it must be an unencrypted PKCS#8 key"), e.getMessage());
        assertEquals(BigInteger.valueOf(0xB1), newConnectionSerial());
        assertTrue(gw.metrics().render().contains("kvgate_tls_certificate_reloads_total{result=\"error\"} 2"),
            gw.metrics().render());
    }

    @Test
    void theFileWatchSwapsAChangedCertificateAndKeepsTheOldOneWhenTheNewFilesAreBad() throws Exception {
        TestPki.Leaf first = pki.leaf("server", "localhost", "IP:127.0.0.1", 0xC1);
        start(serverTls("openssl"), "");
        var tls = gw.serverTls();
        assertFalse(tls.checkFiles(), "unchanged files: nothing to do");
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xC2);
        assertTrue(tls.checkFiles());
        assertEquals(BigInteger.valueOf(0xC2), newConnectionSerial());

        Files.writeString(first.cert(), "not a certificate");
        assertFalse(tls.checkFiles());
        assertTrue(tls.lastError().startsWith("tls.cert_file: value '" + first.cert() + "'"), tls.lastError());
        assertFalse(tls.checkFiles(), "the same bad contents are not tried (nor logged) again");
        assertEquals(BigInteger.valueOf(0xC2), newConnectionSerial());
        String metrics = gw.metrics().render();
        assertTrue(metrics.contains("kvgate_tls_certificate_error 1"), metrics);
        assertTrue(metrics.contains("kvgate_tls_certificate_reloads_total{result=\"error\"} 1"), metrics);

        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xC3); // fixed
        assertTrue(tls.checkFiles());
        assertEquals(BigInteger.valueOf(0xC3), newConnectionSerial());
        assertTrue(gw.metrics().render().contains("kvgate_tls_certificate_error 0"));
    }

    @Test
    void clientAuthRequireRefusesAClientWithoutACertificate() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xD1);
        TestPki.Leaf client = pki.leaf("client", "batch-jobs", null, 0xD2);
        start("{cert_file: server.pem, key_file: server.key, client_ca_file: ca.pem, client_auth: require}", "");
        assertEquals(200, chat(client(pki.clientContext(client)), null).statusCode());
        assertThrows(IOException.class, () -> chat(client(pki.clientContext(null)), null));
        // A certificate from another CA is refused too.
        TestPki stranger = new TestPki(Files.createDirectory(dir.resolve("stranger")));
        TestPki.Leaf foreign = stranger.leaf("client", "batch-jobs", null, 0xD3);
        SSLContext foreignClient = SSLContext.getInstance("TLS");
        foreignClient.init(keyManagersOf(foreign), trustOnly(), null);
        assertThrows(IOException.class, () -> chat(client(foreignClient), null));
        assertTrue(gw.metrics().render().contains("kvgate_tls_handshake_failures_total"));
    }

    private static javax.net.ssl.KeyManager[] keyManagersOf(TestPki.Leaf leaf) throws Exception {
        var ks = java.security.KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        var key = java.security.KeyFactory.getInstance("EC").generatePrivate(new java.security.spec.PKCS8EncodedKeySpec(
            java.util.Base64.getMimeDecoder().decode(Files.readString(leaf.key()).replaceAll("-----[A-Z ]+-----", ""))));
        ks.setKeyEntry("leaf", key, new char[0], new java.security.cert.Certificate[] {TestPki.read(leaf.cert())});
        var kmf = javax.net.ssl.KeyManagerFactory.getInstance(javax.net.ssl.KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, new char[0]);
        return kmf.getKeyManagers();
    }

    private javax.net.ssl.TrustManager[] trustOnly() throws Exception {
        var ts = java.security.KeyStore.getInstance("PKCS12");
        ts.load(null, null);
        ts.setCertificateEntry("ca", TestPki.read(pki.caCert));
        var tmf = javax.net.ssl.TrustManagerFactory.getInstance(javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ts);
        return tmf.getTrustManagers();
    }

    @Test
    void aVerifiedClientCertificateListedInClientIdentitiesStandsInForAnApiKey() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xE1);
        TestPki.Leaf billing = pki.leaf("billing", "billing-batch", null, 0xE2);
        TestPki.Leaf other = pki.leaf("other", "someone-else", null, 0xE3);
        start("{cert_file: server.pem, key_file: server.key, client_ca_file: ca.pem, client_auth: optional,"
            + " client_identities: [billing-batch]}", "api_keys: [sk-test-key-1]");
        assertEquals(200, chat(client(pki.clientContext(billing)), null).statusCode(), "the certificate identifies the caller");
        assertEquals(401, chat(client(pki.clientContext(other)), null).statusCode(), "a verified but unlisted certificate");
        assertEquals(401, chat(client(pki.clientContext(null)), null).statusCode(), "no certificate, no key");
        assertEquals(200, chat(client(pki.clientContext(null)), "sk-test-key-1").statusCode(), "a key still works");
        assertEquals(200, chat(client(pki.clientContext(other)), "sk-test-key-1").statusCode());
    }

    @Test
    void aGatewayWithABadCertificateFileDoesNotStartAndSaysWhichFile() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0xF1);
        Files.writeString(dir.resolve("server.pem"), "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n");
        Exception e = assertThrows(ConfigException.class, () -> start(serverTls("openssl"), ""));
        assertTrue(e.getMessage().startsWith("tls.cert_file: value '" + dir.resolve("server.pem") + "' is not a PEM certificate"),
            e.getMessage());
    }

    @Test
    void tlsCanBeTurnedOffByAReload() throws Exception {
        pki.leaf("server", "localhost", "IP:127.0.0.1", 0x1);
        start(serverTls("jdk"), "");
        String text = Files.readString(configFile).replace("tls: " + serverTls("jdk"), "");
        Files.writeString(configFile, text);
        ReloadOutcome off = gw.reloadConfigFile();
        assertTrue(off.changes().contains("tls: the listener serves plain HTTP to new connections"), off.changes().toString());
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
            URI.create("http://127.0.0.1:" + gw.port() + "/health")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode());
        assertThrows(SSLException.class, () -> {
            try (SSLSocket s = open(pki.clientContext(null))) {
                s.startHandshake();
            }
        });
    }
}
