package io.kvgate.tools.sim;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** What the contract system tests share: a JSON request to a gateway, and what an engine simulator last received. */
final class SimRecords {
    private SimRecords() {
    }

    /** The last request {@code sim} received, as it recorded it (model, n, include_usage, temperature, ...). */
    static JsonNode lastRequest(EngineSimulator sim) {
        JsonNode recent = sim.stats().toJson().get("recent");
        return recent.get(recent.size() - 1);
    }

    /** {@code method path} with a JSON body (or none) to the gateway listening on {@code port}, 20 s at most. */
    static HttpResponse<String> send(int port, String method, String path, String body) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json");
        b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        return SimHttp.CLIENT.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }
}
