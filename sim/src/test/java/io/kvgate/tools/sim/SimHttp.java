package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** Test helper: small blocking HTTP client against a simulator on loopback. */
final class SimHttp {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final HttpClient CLIENT = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5)).build();

    private SimHttp() {}

    static HttpResponse<String> post(EngineSimulator sim, String path, String body, String... headers)
        throws IOException, InterruptedException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(sim.baseUrl() + path))
            .timeout(Duration.ofSeconds(20))
            .header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
        for (int i = 0; i + 1 < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static HttpResponse<String> get(EngineSimulator sim, String path) throws IOException, InterruptedException {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(sim.baseUrl() + path)).timeout(Duration.ofSeconds(20))
            .GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    static JsonNode json(HttpResponse<String> r) throws IOException {
        return MAPPER.readTree(r.body());
    }

    static String chat(String model, String content, String extra) {
        return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content + "\"}]"
            + (extra.isEmpty() ? "" : "," + extra) + "}";
    }

    static SimulatorConfig fast(SimulatorConfig.Dialect dialect) {
        return new SimulatorConfig().dialect(dialect).model("m").ttftMs(0).itlMs(0).prefillUsPerToken(0)
            .epochSeconds(() -> 1_700_000_000L);
    }
}
