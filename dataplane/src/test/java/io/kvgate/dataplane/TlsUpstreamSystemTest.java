package io.kvgate.dataplane;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import io.kvgate.control.config.ConfigException;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.tls.TestPki;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSession;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code https://} engines: the gateway verifies the engine's certificate against {@code upstream_tls.ca_file} and
 * its host name against the URL, and presents its client certificate to an engine that requires one (mTLS). Every
 * part that connects to an engine does so over TLS: the proxied request, the health probe, the model probe.
 */
@Timeout(60)
@Tag("system")
class TlsUpstreamSystemTest {
    private static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    @TempDir
    Path dir;
    private TestPki pki;
    private HttpsServer engine;
    private Gateway gw;
    /** Per request the engine served: its path and the client certificate's CN ("-" without one). */
    private final List<String> served = new CopyOnWriteArrayList<>();
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void setUp() throws Exception {
        pki = new TestPki(dir);
    }

    @AfterEach
    void tearDown() {
        if (gw != null) {
            gw.close(100);
        }
        if (engine != null) {
            engine.stop(0);
        }
    }

    /** A TLS engine on loopback serving {@code leaf}; {@code requireClientCert}: mTLS. */
    private String startEngine(TestPki.Leaf leaf, boolean requireClientCert) throws Exception {
        SSLContext ctx = pki.serverContext(leaf);
        engine = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        engine.setHttpsConfigurator(new HttpsConfigurator(ctx) {
            @Override
            public void configure(HttpsParameters params) {
                var p = ctx.getDefaultSSLParameters();
                p.setNeedClientAuth(requireClientCert);
                params.setSSLParameters(p);
            }
        });
        engine.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "tls-engine");
            t.setDaemon(true);
            return t;
        }));
        engine.createContext("/", this::answer);
        engine.start();
        return "https://127.0.0.1:" + engine.getAddress().getPort();
    }

    private void answer(HttpExchange ex) throws IOException {
        ex.getRequestBody().readAllBytes();
        SSLSession s = ((com.sun.net.httpserver.HttpsExchange) ex).getSSLSession();
        String cn = "-";
        try {
            cn = ((java.security.cert.X509Certificate) s.getPeerCertificates()[0]).getSubjectX500Principal().getName();
        } catch (javax.net.ssl.SSLPeerUnverifiedException none) {
            // no client certificate
        }
        served.add(ex.getRequestURI().getPath() + " " + cn);
        String path = ex.getRequestURI().getPath();
        String body = path.equals("/v1/models") ? "{\"object\":\"list\",\"data\":[{\"id\":\"qwen3\",\"object\":\"model\"}]}"
            : path.startsWith("/v1/chat") ? "{\"id\":\"x\",\"object\":\"chat.completion\",\"model\":\"qwen3\",\"choices\":[{\"index\":0,"
                + "\"message\":{\"role\":\"assistant\",\"content\":\"over tls\"},\"finish_reason\":\"stop\"}],"
                + "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}" : "{}";
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("content-type", "application/json");
        ex.sendResponseHeaders(200, b.length);
        ex.getResponseBody().write(b);
        ex.close();
    }

    private void startGateway(String url, String upstreamTls) throws Exception {
        Path file = dir.resolve("kvgate.yaml");
        Files.writeString(file, """
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            control_socket: off
            health: {interval_ms: 100, healthy_threshold: 1}
            load: {enabled: false}
            upstream: {max_connect_attempts: 1}
            %s
            rules:
              - name: chat
                models: [qwen3]
                engine: vllm
                policy: round_robin
                endpoints:
                  - url: %s
            """.formatted(upstreamTls, url));
        gw = Gateway.start(GatewayConfig.load(file));
    }

    private HttpResponse<String> chat() throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + "/v1/chat/completions"))
            .timeout(Duration.ofSeconds(10)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(CHAT)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** Waits (bounded) until the engine served a request for {@code path}. */
    private void awaitServed(String prefix) throws InterruptedException {
        for (int i = 0; i < 200 && served.stream().noneMatch(s -> s.startsWith(prefix)); i++) {
            Thread.sleep(25);
        }
        assertTrue(served.stream().anyMatch(s -> s.startsWith(prefix)), prefix + " never reached the engine: " + served);
    }

    @Test
    void anHttpsEngineIsVerifiedAgainstTheConfiguredCa() throws Exception {
        String url = startEngine(pki.leaf("engine", "engine-1", "IP:127.0.0.1", 0x11), false);
        startGateway(url, "upstream_tls: {ca_file: ca.pem}");
        HttpResponse<String> r = chat();
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("over tls"), r.body());
        awaitServed("/health"); // the health probe speaks TLS too
        awaitServed("/v1/models"); // and the model probe (the JDK client)
    }

    @Test
    void anEngineWhoseCertificateDoesNotNameTheUrlHostIsRefused() throws Exception {
        String url = startEngine(pki.leaf("engine", "engine-1", "DNS:engine-1.internal", 0x12), false);
        startGateway(url, "upstream_tls: {ca_file: ca.pem}");
        HttpResponse<String> r = chat();
        assertTrue(r.statusCode() == 502 || r.statusCode() == 503, r.statusCode() + " " + r.body());
        assertTrue(served.stream().noneMatch(s -> s.startsWith("/v1/chat")), served.toString());
    }

    @Test
    void anEngineWithACertificateFromAnotherCaIsRefused() throws Exception {
        TestPki other = new TestPki(Files.createDirectory(dir.resolve("other")));
        String url = startEngine(pki.leaf("engine", "engine-1", "IP:127.0.0.1", 0x13), false);
        startGateway(url, "upstream_tls: {ca_file: other/ca.pem}"); // the gateway trusts only the other CA
        HttpResponse<String> r = chat();
        assertTrue(r.statusCode() == 502 || r.statusCode() == 503, r.statusCode() + " " + r.body());
    }

    @Test
    void mutualTlsPresentsTheGatewaysClientCertificate() throws Exception {
        String url = startEngine(pki.leaf("engine", "engine-1", "IP:127.0.0.1", 0x14), true);
        pki.leaf("gateway", "kvgate-gateway", null, 0x15);
        startGateway(url, "upstream_tls: {ca_file: ca.pem, cert_file: gateway.pem, key_file: gateway.key}");
        HttpResponse<String> r = chat();
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(served.stream().anyMatch(s -> s.equals("/v1/chat/completions CN=kvgate-gateway")), served.toString());
    }

    @Test
    void withoutAClientCertificateAnMtlsEngineRefusesTheGateway() throws Exception {
        String url = startEngine(pki.leaf("engine", "engine-1", "IP:127.0.0.1", 0x16), true);
        startGateway(url, "upstream_tls: {ca_file: ca.pem}");
        HttpResponse<String> r = chat();
        assertTrue(r.statusCode() == 502 || r.statusCode() == 503, r.statusCode() + " " + r.body());
        assertTrue(served.isEmpty(), served.toString());
    }

    @Test
    void aReloadWithABadUpstreamKeyIsRefusedNamingIt() throws Exception {
        String url = startEngine(pki.leaf("engine", "engine-1", "IP:127.0.0.1", 0x17), true);
        TestPki.Leaf gwLeaf = pki.leaf("gateway", "kvgate-gateway", null, 0x18);
        startGateway(url, "upstream_tls: {ca_file: ca.pem, cert_file: gateway.pem, key_file: gateway.key}");
        Files.writeString(gwLeaf.key(), "garbage");
        ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class,
            () -> gw.reload(GatewayConfig.load(dir.resolve("kvgate.yaml"))));
        assertTrue(e.getMessage().startsWith("upstream_tls.key_file: value '" + gwLeaf.key() + "' holds no private key"),
            e.getMessage());
        assertEquals(200, chat().statusCode(), "the settings in effect still reach the engine");
    }
}
