package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.Await;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What the engines were launched with, as the gateway's contract sees it (issue #13; review rows 27 and 18), the
 * same request through a vLLM rule and an SGLang rule of one gateway:
 * <ul>
 *   <li>Row 27, which routes are mounted: a pooling vLLM ({@code --runner pooling}) does not mount the generation
 *       routes (FastAPI's 404), an SGLang embedding server ({@code --is-embedding}) mounts them and cannot generate.
 *       The model probe reads each engine's route table ({@code /openapi.json}, {@code /get_server_info}); a rule's
 *       requests go only to the endpoints that serve their route, and a rule none of whose endpoints does answers the
 *       same 404 {@code route_not_served} from both.</li>
 *   <li>Row 18, tool-call parsers: engines launched without one disagree on {@code tool_choice: "auto"} (vLLM 400,
 *       SGLang 200 with the calls left in the text); {@code tool_call_parser: none} makes it vLLM's 400 for both.</li>
 * </ul>
 */
@Tag("system")
@Timeout(60)
class EngineCapabilitySystemTest {
    private static final String ADMIN = "engine-capability-admin-token";
    /** A generating engine and a pooling one of each dialect, launched without a tool-call parser. */
    static EngineSimulator vllmGen;
    static EngineSimulator vllmPool;
    static EngineSimulator sglangGen;
    static EngineSimulator sglangEmbed;
    static Gateway gw;

    @BeforeAll
    static void start() throws Exception {
        vllmGen = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model("cv"));
        vllmPool = EngineSimulator.start(SimHttp.fast(Dialect.VLLM).model("cv").pooling(true));
        sglangGen = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model("cs"));
        sglangEmbed = EngineSimulator.start(SimHttp.fast(Dialect.SGLANG).model("cs").pooling(true));
        gw = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            admin_token: %s
            upstream: {connect_timeout_ms: 1000, first_byte_timeout_ms: 5000}
            health: {interval_ms: 300, timeout_ms: 5000}
            rules:
              - name: mixed-vllm
                models: [cv]
                engine: vllm
                policy: round_robin
                tool_call_parser: none
                endpoints: [{url: "%s"}, {url: "%s"}]
              - name: mixed-sglang
                models: [cs]
                engine: sglang
                policy: round_robin
                tool_call_parser: none
                endpoints: [{url: "%s"}, {url: "%s"}]
              - name: pool-vllm
                models: [{name: ev, served_as: cv}]
                engine: vllm
                endpoints: [{url: "%s"}]
              - name: pool-sglang
                models: [{name: es, served_as: cs}]
                engine: sglang
                endpoints: [{url: "%s"}]
              - name: undeclared-vllm
                models: [{name: uv, served_as: cv}]
                engine: vllm
                endpoints: [{url: "%s"}]
              - name: undeclared-sglang
                models: [{name: us, served_as: cs}]
                engine: sglang
                endpoints: [{url: "%s"}]
            """.formatted(ADMIN, vllmGen.baseUrl(), vllmPool.baseUrl(), sglangGen.baseUrl(), sglangEmbed.baseUrl(),
            vllmPool.baseUrl(), sglangEmbed.baseUrl(), vllmGen.baseUrl(), sglangGen.baseUrl())));
        // The model probe reads every engine's routes once it answers GET /v1/models (bounded wait).
        Await.until(Duration.ofSeconds(20), "routes read", EngineCapabilitySystemTest::routesKnown,
            () -> gw.metrics().render());
    }

    private static boolean routesKnown() {
        String m = gw.metrics().render();
        for (EngineSimulator sim : List.of(vllmGen, vllmPool, sglangGen, sglangEmbed)) {
            String ep = sim.baseUrl().substring("http://".length());
            if (!m.contains("kvgate_endpoint_route_mounted{endpoint=\"" + ep + "\",route=\"/v1/completions\",")) {
                return false;
            }
        }
        return true;
    }

    @AfterAll
    static void stop() {
        if (gw != null) {
            gw.close(100);
        }
        vllmGen.close();
        vllmPool.close();
        sglangGen.close();
        sglangEmbed.close();
    }

    static HttpResponse<String> post(String path, String body) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    record Seen(int status, String type, String code, String param) {
        static Seen of(HttpResponse<String> r) throws Exception {
            JsonNode e = SimHttp.MAPPER.readTree(r.body()).path("error");
            assertFalse(e.path("message").asText().isEmpty(), r.body());
            return new Seen(r.statusCode(), text(e.get("type")), text(e.get("code")), text(e.get("param")));
        }

        private static String text(JsonNode n) {
            return n == null || n.isNull() ? null : n.asText();
        }
    }

    static String chat(String model, String extra) {
        return "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2" + extra + "}";
    }

    static String completion(String model) {
        return "{\"model\":\"" + model + "\",\"prompt\":\"once upon\",\"max_tokens\":2}";
    }

    static long generations(EngineSimulator sim) {
        return sim.stats().get("chat_requests") + sim.stats().get("completion_requests");
    }

    // review row 27: without the gateway, a pooling engine of each dialect refuses generation in its own way
    @Test
    void controlThePoolingEnginesRefuseGenerationEachInItsOwnWay() throws Exception {
        HttpResponse<String> v = SimHttp.post(vllmPool, "/v1/chat/completions", chat("cv", ""));
        assertEquals(404, v.statusCode(), "not mounted: FastAPI's 404");
        assertEquals("{\"detail\":\"Not Found\"}", v.body());
        HttpResponse<String> s = SimHttp.post(sglangEmbed, "/v1/chat/completions", chat("cs", ""));
        assertEquals(400, s.statusCode(), s.body());
        JsonNode openapi = SimHttp.json(SimHttp.get(vllmPool, "/openapi.json"));
        assertTrue(openapi.path("paths").has("/v1/embeddings") && !openapi.path("paths").has("/v1/chat/completions"), openapi.toString());
        assertTrue(SimHttp.json(SimHttp.get(sglangEmbed, "/get_server_info")).path("is_embedding").asBoolean());
    }

    // review row 27: an endpoint that does not serve the route is excluded for it; the others serve every request
    @Test
    void requestsGoOnlyToTheEndpointsThatServeTheirRoute() throws Exception {
        long poolBefore = vllmPool.stats().get("not_found") + sglangEmbed.stats().get("generation_refused_pooling");
        long vGen = generations(vllmGen);
        long sGen = generations(sglangGen);
        for (String model : new String[] {"cv", "cs"}) {
            for (int i = 0; i < 4; i++) { // round robin would alternate: every second request would hit the pooling engine
                HttpResponse<String> c = post("/v1/chat/completions", chat(model, ""));
                assertEquals(200, c.statusCode(), c.body());
                HttpResponse<String> t = post("/v1/completions", completion(model));
                assertEquals(200, t.statusCode(), t.body());
            }
        }
        assertEquals(vGen + 8, generations(vllmGen));
        assertEquals(sGen + 8, generations(sglangGen));
        assertEquals(poolBefore, vllmPool.stats().get("not_found") + sglangEmbed.stats().get("generation_refused_pooling"),
            "no request reached a pooling engine");
        String m = gw.metrics().render();
        String pool = vllmPool.baseUrl().substring("http://".length());
        String gen = vllmGen.baseUrl().substring("http://".length());
        assertTrue(m.contains("kvgate_endpoint_route_mounted{endpoint=\"" + pool
            + "\",route=\"/v1/chat/completions\",rule=\"mixed-vllm\"} 0"), m);
        assertTrue(m.contains("kvgate_endpoint_route_mounted{endpoint=\"" + gen
            + "\",route=\"/v1/chat/completions\",rule=\"mixed-vllm\"} 1"), m);
        String embed = sglangEmbed.baseUrl().substring("http://".length());
        assertTrue(m.contains("kvgate_endpoint_route_mounted{endpoint=\"" + embed
            + "\",route=\"/v1/completions\",rule=\"mixed-sglang\"} 0"), m);
        // an explained request names the endpoint it could not go to
        HttpResponse<String> explained = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                + "/v1/chat/completions")).timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .header("x-kvgate-explain", "1").header("x-kvgate-admin-token", ADMIN)
            .POST(HttpRequest.BodyPublishers.ofString(chat("cv", ""))).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, explained.statusCode(), explained.body());
        String why = explained.headers().firstValue("x-kvgate-route").orElse("");
        assertTrue(why.contains("excluded (adapter or route not served)=" + pool), why);
        // the rule read-back says which endpoint lacks what, and where the gateway read it
        JsonNode rules = SimHttp.MAPPER.readTree(SimHttp.CLIENT.send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + gw.adminPort() + "/control/v1/rules")).header("authorization", "Bearer " + ADMIN)
            .timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString()).body());
        for (JsonNode r : rules.path("rules")) {
            if (r.path("name").asText().equals("mixed-vllm")) {
                assertEquals("GET /openapi.json", r.at("/routes/" + pool + "/source").asText(), r.toString());
                assertEquals("[\"/v1/chat/completions\",\"/v1/completions\"]", r.at("/routes/" + pool + "/unmounted").toString());
                assertEquals("[]", r.at("/routes/" + gen + "/unmounted").toString());
            } else if (r.path("name").asText().equals("mixed-sglang")) {
                assertEquals("GET /server_info", r.at("/routes/" + embed + "/source").asText(), r.toString());
                assertEquals(2, r.at("/routes/" + embed + "/unmounted").size(), r.toString());
                // SGLang states its parser (none here), which agrees with the rule's tool_call_parser: none
                assertTrue(r.at("/routes/" + embed + "/tool_call_parser").isNull(), r.toString());
                assertTrue(r.at("/routes/" + embed + "/warning").isMissingNode(), r.toString());
            }
        }
    }

    // review row 27: a rule whose endpoints all serve another task
    @Test
    void aRuleWhoseEnginesMountNoneOfTheRouteIsTheSame404FromBoth() throws Exception {
        for (String[] path : new String[][] {{"/v1/chat/completions", "chat"}, {"/v1/completions", "text"}}) {
            HttpResponse<String> v = post(path[0], path[1].equals("chat") ? chat("ev", "") : completion("ev"));
            HttpResponse<String> s = post(path[0], path[1].equals("chat") ? chat("es", "") : completion("es"));
            Seen want = new Seen(404, "invalid_request_error", "route_not_served", "model");
            assertEquals(want, Seen.of(v), v.body());
            assertEquals(want, Seen.of(s), s.body());
            assertEquals("The model `ev` is not served on " + path[0] + ": no endpoint of rule 'pool-vllm' mounts that route"
                + " (its engines serve another task, e.g. a pooling model).",
                SimHttp.MAPPER.readTree(v.body()).at("/error/message").asText());
        }
    }

    // review row 18: engines launched without a tool-call parser
    static final String TOOLS = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
        + "{\"type\":\"object\",\"properties\":{}}}}]";

    @Test
    void controlWithoutTheKnobTheEnginesDisagreeOnAutoToolChoice() throws Exception {
        HttpResponse<String> v = post("/v1/chat/completions", chat("uv", TOOLS));
        HttpResponse<String> s = post("/v1/chat/completions", chat("us", TOOLS));
        assertEquals(new Seen(400, "invalid_request_error", null, null), Seen.of(v), "vLLM's own 400, in the vocabulary");
        assertEquals("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
            SimHttp.MAPPER.readTree(v.body()).at("/error/message").asText());
        assertEquals(200, s.statusCode(), "SGLang answers, calls left in the text: " + s.body());
    }

    @Test
    void autoToolChoiceWithoutAParserIsTheSame400FromBoth() throws Exception {
        long before = generations(vllmGen) + generations(sglangGen);
        String want = "{\"error\":{\"message\":\"\\\"auto\\\" tool choice requires --enable-auto-tool-choice and "
            + "--tool-call-parser to be set\",\"type\":\"invalid_request_error\",\"param\":\"tool_choice\",\"code\":\"invalid_value\"}}";
        for (String extra : new String[] {TOOLS, TOOLS + ",\"tool_choice\":\"auto\"", ",\"tool_choice\":\"auto\"" + TOOLS}) {
            for (String model : new String[] {"cv", "cs"}) {
                HttpResponse<String> r = post("/v1/chat/completions", chat(model, extra));
                assertEquals(400, r.statusCode(), r.body());
                assertEquals(want, r.body(), model + extra);
            }
        }
        assertEquals(before, generations(vllmGen) + generations(sglangGen), "no engine saw them");
        // no call asked for, a call forced (both engines constrain the output without a parser), or no tools at all
        for (String extra : new String[] {TOOLS + ",\"tool_choice\":\"none\"", TOOLS + ",\"tool_choice\":\"required\"",
            TOOLS + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", ""}) {
            for (String model : new String[] {"cv", "cs"}) {
                HttpResponse<String> r = post("/v1/chat/completions", chat(model, extra));
                assertEquals(200, r.statusCode(), model + extra + ": " + r.body());
            }
        }
        // an empty list is the engines' own 400 (review row 17), whatever tool_choice says
        for (String model : new String[] {"cv", "cs"}) {
            HttpResponse<String> r = post("/v1/chat/completions", chat(model, ",\"tools\":[],\"tool_choice\":\"auto\""));
            assertEquals(400, r.statusCode(), r.body());
            assertEquals("tools", Seen.of(r).param(), r.body());
        }
        assertTrue(gw.metrics().render().contains("kvgate_bad_requests_total{reason=\"tool_call_parser\"}"));
    }
}
