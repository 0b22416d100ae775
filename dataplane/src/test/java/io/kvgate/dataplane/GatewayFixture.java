package io.kvgate.dataplane;

import io.kvgate.control.config.GatewayConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * The real gateway on loopback in front of two fake engines, for the system tests that drive it over HTTP: engines
 * {@link #a()} and {@link #b()} are up before each test, the test starts the gateway from its own YAML
 * ({@link #start}), and after each test, passed or failed, the gateway is closed before the engines it proxies to.
 * <pre>{@code @RegisterExtension final GatewayFixture fx = new GatewayFixture();}</pre>
 */
final class GatewayFixture implements BeforeEachCallback, AfterEachCallback {
    /** The smallest chat request the fake engines answer. */
    static final String CHAT = "{\"model\":\"qwen3\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private FakeEngine a;
    private FakeEngine b;
    private Gateway gw;

    @Override
    public void beforeEach(ExtensionContext context) throws Exception {
        a = new FakeEngine("a");
        b = new FakeEngine("b");
    }

    @Override
    public void afterEach(ExtensionContext context) {
        try {
            closeGateway();
        } finally {
            if (a != null) {
                a.close();
            }
            if (b != null) {
                b.close();
            }
        }
    }

    FakeEngine a() {
        return a;
    }

    FakeEngine b() {
        return b;
    }

    /** Starts the gateway from {@code yaml}, closing the one a test started before (a restart with another config). */
    Gateway start(String yaml) throws Exception {
        closeGateway();
        gw = Gateway.start(GatewayConfig.parse(yaml));
        return gw;
    }

    Gateway gateway() {
        return gw;
    }

    /** Hands the gateway to a test that closes it itself (a drain deadline it asserts on); teardown leaves it alone. */
    Gateway release() {
        Gateway g = gw;
        gw = null;
        return g;
    }

    /** Closes the running gateway (100 ms drain), if any. */
    void closeGateway() {
        Gateway g = release();
        if (g != null) {
            g.close(100);
        }
    }

    /** The {@code endpoints:} entries of a rule for {@code urls}, indented for the rule templates of these tests. */
    static String endpoints(String... urls) {
        StringBuilder eps = new StringBuilder();
        for (String u : urls) {
            eps.append("      - url: ").append(u).append('\n');
        }
        return eps.toString();
    }

    HttpClient http() {
        return http;
    }

    /** {@code path} on the client listener. */
    URI uri(String path) {
        return URI.create("http://127.0.0.1:" + gw.port() + path);
    }

    /** {@code path} on the admin listener. */
    URI adminUri(String path) {
        return URI.create("http://127.0.0.1:" + gw.adminPort() + path);
    }

    /** POSTs a JSON body to {@code path} on the client listener. */
    HttpResponse<String> post(String path, String body) throws Exception {
        return post(uri(path), body);
    }

    /** POSTs a JSON body to {@code to}. */
    HttpResponse<String> post(URI to, String body) throws Exception {
        return http.send(HttpRequest.newBuilder(to).header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** GETs {@code path} on the client listener. */
    HttpResponse<String> get(String path) throws Exception {
        return http.send(HttpRequest.newBuilder(uri(path)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }
}
