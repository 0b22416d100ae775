package io.kvgate.tools.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.testkit.RefusedPort;
import io.kvgate.testkit.TestPorts;
import io.kvgate.tools.sim.EngineSimulator;
import io.kvgate.tools.sim.SimulatorConfig;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.DisabledIfSystemProperty;

/**
 * The gateway driven by the official OpenAI Node SDK ({@code openai} 6.x, pinned in tools/src/test/node): a scripted
 * engine and the real gateway on loopback, {@code node sdk-check.mjs} as a subprocess, and one assertion per
 * behaviour a client sees — relayed completions (JSON and SSE), the gateway's own 404 and 400 errors, an engine's
 * flat-shape error re-emitted in the OpenAI shape, and an engine dying in the middle of a stream.
 *
 * <p>A control run of the same script straight at the engine shows what the SDK reports without the gateway's
 * normalization ("400 status code (no body)"), so the assertions here are known to discriminate.
 *
 * <p>Needs Node 20+ and {@code .ci/setup} (npm install); without them this test FAILS and says so. Opt out
 * explicitly with {@code -Dkvgate.skipNodeSdk=true}.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
@DisabledIfSystemProperty(named = NodeSdkCheck.SKIP_PROPERTY, matches = "true",
    disabledReason = "OpenAI Node SDK system test skipped on request (-D" + NodeSdkCheck.SKIP_PROPERTY + "=true)")
@Tag("system")
class OpenAiNodeSdkSystemTest {
    private static final long NODE_RUN_TIMEOUT_MS = 60_000;
    private static final String MODEL = "qwen3";
    /** A client name the rule serves as {@link #MODEL} (served_as); the script's default alias. */
    private static final String ALIAS = "gpt-4o-mini";
    private static final String GATEWAY_MID_STREAM_MESSAGE = "failed in the middle of the response";
    /** The key the script's client sends (sdk-check.mjs); the gateway requires it. */
    private static final String API_KEY = "sk-kvgate-sdk-check";
    /** The key of tenant {@code sdk-limited} (requests_per_minute 2): the script's tenant_rate_limit scenario. */
    private static final String TENANT_KEY = "sk-kvgate-sdk-limited-tenant";
    /** A LoRA adapter configured under {@link #MODEL}: GET /v1/models lists it with its parent. */
    private static final String ADAPTER = "qwen3-sql-lora";
    /** A port where connections are refused: the engine of rule "unreachable". */
    private static RefusedPort down;

    /** The model of rule "failover": two simulated engines that die mid-stream once each (sdk-check's migrated_stream). */
    private static final String FAILOVER_MODEL = "kvgate-failover";
    private static final String FAILOVER_BODY = "{\"model\":\"" + FAILOVER_MODEL + "\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"Tell me about the river and the stone\"}],\"max_tokens\":24,\"temperature\":0,\"stream\":true}";
    private static final List<EngineSimulator> failoverEngines = new ArrayList<>();
    /** The fault-free answer of sdk-check's migrated_stream request, read through the gateway before the faults. */
    private static String failoverReference;

    private static ScriptedEngine engine;
    private static Gateway gateway;
    private static NodeSdkCheck sdk;
    private static NodeSdkCheck.Result viaGateway;
    private static List<ScriptedEngine.Received> engineSawViaGateway;
    /** Every request the engine got while the SDK went through the gateway (before the direct run). */
    private static List<ScriptedEngine.Received> allViaGateway;
    private static NodeSdkCheck.Result direct;

    @BeforeAll
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    static void driveGatewayWithTheSdk() throws Exception {
        sdk = NodeSdkCheck.locate(repoRoot());
        engine = ScriptedEngine.start();
        down = TestPorts.refused();
        for (int i = 0; i < 2; i++) {
            failoverEngines.add(EngineSimulator.start(new SimulatorConfig().dialect(SimulatorConfig.Dialect.VLLM)
                .model(FAILOVER_MODEL).ttftMs(0).itlMs(2).prefillUsPerToken(0)));
        }
        gateway = Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            api_keys: [%s]
            tenants:
              - name: sdk-limited
                api_key_sha256: [%s]
                limits: {requests_per_minute: 2, tokens_per_minute: 1000000}
            upstream: {first_byte_timeout_ms: 5000}
            health: {interval_ms: 60000}
            rules:
              - name: chat
                models: [{name: %s, adapters: [%s]}, {name: %s, served_as: %s}]
                engine: vllm
                policy: round_robin
                max_model_len: 64
                endpoints:
                  - url: %s
              - name: unreachable
                models: [kvgate-unreachable]
                engine: vllm
                endpoints:
                  - url: %s
              - name: limited
                models: [{name: kvgate-limited, served_as: %s}]
                engine: vllm
                admission: {max_outstanding: 1, max_queue: 0}
                endpoints:
                  - url: %s
              - name: failover
                models: [%s]
                engine: vllm
                policy: round_robin
                failover: {mid_stream: true, max_migrations: 2}
                endpoints: [{url: "%s"}, {url: "%s"}]
            """.formatted(API_KEY, io.kvgate.control.config.TenancyConfig.sha256Hex(TENANT_KEY), MODEL, ADAPTER, ALIAS, MODEL,
            engine.url(), down.url(), MODEL, engine.url(), FAILOVER_MODEL, failoverEngines.get(0).baseUrl(),
            failoverEngines.get(1).baseUrl())));
        failoverReference = streamedContent(FAILOVER_BODY);
        // Each engine dies after 5 tokens of its first stream: whichever serves the SDK's request fails, the other
        // continues and fails too, and the first (its fault used) finishes: two migrations, the rule's max.
        failoverEngines.forEach(e -> e.injectFaults("{\"die_after_tokens\":5,\"count\":1}"));
        viaGateway = sdk.run("http://127.0.0.1:" + gateway.port() + "/v1", TENANT_KEY, NODE_RUN_TIMEOUT_MS);
        allViaGateway = engine.requests();
        engineSawViaGateway = chatRequests(allViaGateway);
        direct = sdk.run(engine.url() + "/v1", NODE_RUN_TIMEOUT_MS);
    }

    @AfterAll
    static void stop() {
        if (gateway != null) {
            gateway.close(100);
        }
        if (engine != null) {
            engine.close();
        }
        if (down != null) {
            down.close();
        }
        failoverEngines.forEach(EngineSimulator::close);
    }

    /** A streamed chat request through the gateway, fault-free: its content deltas joined. */
    private static String streamedContent(String body) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + gateway.port() + "/v1/chat/completions"))
            .header("content-type", "application/json").header("authorization", "Bearer " + API_KEY)
            .timeout(Duration.ofSeconds(20)).POST(HttpRequest.BodyPublishers.ofString(body)).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        StringBuilder content = new StringBuilder();
        for (String line : r.body().split("\n")) {
            if (line.startsWith("data: {")) {
                JsonNode delta = new ObjectMapper().readTree(line.substring(6)).path("choices").path(0).path("delta");
                content.append(delta.path("content").asText(""));
            }
        }
        assertFalse(content.isEmpty(), r.body());
        return content.toString();
    }

    /**
     * Issue #41's "done when": the OpenAI Node SDK iterates a stream whose engine died twice (it moved to the other
     * engine and back) to its end, without an exception, and reads the fault-free answer under one id.
     */
    @Test
    void theSdkIteratesAMigratedStreamToItsEnd() {
        JsonNode r = viaGateway.scenario("migrated_stream");
        assertFalse(r.path("threw").asBoolean(true), "no exception inside the iteration: " + r);
        assertEquals(failoverReference, r.path("joined").asText(), "the fault-free answer: " + r);
        assertEquals("length", r.path("finish_reason").asText(), r.toString());
        assertEquals(1, r.path("ids").size(), "one completion id across the engines: " + r);
        assertEquals(List.of(FAILOVER_MODEL), strings(r.path("models")), r.toString());
        long died = failoverEngines.stream().mapToLong(e -> e.stats().get("faults_died_after_tokens")).sum();
        assertEquals(2, died, "both engines died mid-stream");
        long moved = 0;
        for (String line : gateway.metrics().render().split("\n")) {
            if (line.startsWith("kvgate_stream_migrations_total{") && line.contains("rule=\"failover\"")
                && line.contains("result=\"ok\"")) {
                moved += (long) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
            }
        }
        assertEquals(2, moved, gateway.metrics().render());
    }

    @Test
    void everyScenarioRanWithThePinnedSdkAndNoUnexpectedError() {
        assertEquals(0, viaGateway.exitCode(), viaGateway.diagnostics());
        JsonNode meta = viaGateway.scenario("_meta");
        assertEquals(sdk.pinnedOpenAiVersion(), meta.path("sdk_version").asText(), "SDK version the script ran with");
        assertTrue(meta.path("node").asText().matches("v(2\\d|[3-9]\\d)\\..*"), "node " + meta.path("node"));
        for (String s : List.of("non_stream", "stream", "unknown_model", "invalid_request", "malformed_json",
            "engine_flat_error", "engine_flat_error_stream", "mid_stream_failure", "mid_frame_failure",
            "context_length_exceeded", "alias_non_stream", "alias_stream", "models_retrieve_alias", "models_list",
            "authentication_error", "engine_unreachable", "rate_limited", "tenant_rate_limit", "migrated_stream")) {
            assertFalse(viaGateway.scenario(s).path("unexpected").asBoolean(true), s + ": " + viaGateway.scenario(s));
        }
    }

    @Test
    void nonStreamCompletionIsRelayed() {
        JsonNode r = viaGateway.scenario("non_stream");
        assertEquals(ScriptedEngine.CONTENT, r.path("content").asText(), r.toString());
        assertEquals("stop", r.path("finish_reason").asText(), r.toString());
        assertEquals("chat.completion", r.path("object").asText(), r.toString());
        assertEquals(MODEL, r.path("model").asText(), r.toString());
        assertEquals(9 + ScriptedEngine.STREAM_PIECES.size(), r.path("total_tokens").asInt(), r.toString());
        ScriptedEngine.Received sent = engineRequest("ok", false);
        assertEquals(sent.headers().get("x-request-id"), r.path("request_id").asText(null),
            "the SDK's _request_id is the X-Request-Id the gateway gave the engine: " + r);
    }

    @Test
    void streamCompletionIsRelayedFrameByFrame() {
        JsonNode r = viaGateway.scenario("stream");
        assertFalse(r.path("threw").asBoolean(true), r.toString());
        assertEquals(ScriptedEngine.STREAM_PIECES, strings(r.path("deltas")), "content deltas, one per engine frame: " + r);
        assertEquals(ScriptedEngine.CONTENT, r.path("joined").asText(), r.toString());
        assertEquals("stop", r.path("finish_reason").asText(), r.toString());
        assertEquals(ScriptedEngine.STREAM_PIECES.size() + 2, r.path("chunks").asInt(), "role + pieces + finish: " + r);
        assertNotNull(engineRequest("ok", true), "the engine got stream=true");
    }

    @Test
    void unknownModelIsA404NotFoundErrorNamingTheModel() {
        JsonNode e = thrown(viaGateway.scenario("unknown_model"));
        assertEquals("NotFoundError", e.path("class").asText(), e.toString());
        assertEquals(404, e.path("status").asInt(), e.toString());
        assertEquals("The model `no-such-model` does not exist.", e.path("error_message").asText(), e.toString());
        assertEquals("404 The model `no-such-model` does not exist.", e.path("message").asText(), e.toString());
        assertEquals("model", e.path("param").asText(), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), e.toString());
        assertEquals("model_not_found", e.path("code").asText(), e.toString());
        assertTrue(engineSawViaGateway.stream().noneMatch(r -> "no-such-model".equals(r.model())),
            "the gateway answers an unknown model itself: " + engineSawViaGateway);
    }

    @Test
    void requestWithoutMessagesIsA400BadRequestError() {
        JsonNode e = thrown(viaGateway.scenario("invalid_request"));
        assertEquals("BadRequestError", e.path("class").asText(), e.toString());
        assertEquals(400, e.path("status").asInt(), e.toString());
        assertEquals("'messages' is a required property.", e.path("error_message").asText(), e.toString());
        assertEquals("messages", e.path("param").asText(), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), e.toString());
        assertTrue(engineSawViaGateway.stream().allMatch(r -> r.scenario() != null),
            "the gateway refuses a body without messages itself: " + engineSawViaGateway);
    }

    @Test
    void malformedJsonIsA400BadRequestError() {
        JsonNode e = thrown(viaGateway.scenario("malformed_json"));
        assertEquals("BadRequestError", e.path("class").asText(), e.toString());
        assertEquals(400, e.path("status").asInt(), e.toString());
        assertTrue(e.path("error_message").asText().startsWith("We could not parse the JSON body of your request"), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), e.toString());
    }

    @Test
    void engineFlatErrorReachesTheSdkWithTheEnginesMessage() {
        assertFlatErrorRelayed(viaGateway.scenario("engine_flat_error"));
    }

    @Test
    void engineFlatErrorOnAStreamingRequestReachesTheSdkWithTheEnginesMessage() {
        assertFlatErrorRelayed(viaGateway.scenario("engine_flat_error_stream"));
        assertNotNull(engineRequest("flat_error", true));
    }

    private static void assertFlatErrorRelayed(JsonNode r) {
        JsonNode e = thrown(r);
        assertEquals("BadRequestError", e.path("class").asText(), e.toString());
        assertEquals(400, e.path("status").asInt(), e.toString());
        assertEquals(ScriptedEngine.FLAT_ERROR_MESSAGE, e.path("error_message").asText(), e.toString());
        assertEquals("400 " + ScriptedEngine.FLAT_ERROR_MESSAGE, e.path("message").asText(), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), "the vocabulary's type, not the engine's " + e);
    }

    /** Control: straight at the engine, the same SDK cannot read the flat shape — this is what the gateway fixes. */
    @Test
    void controlWithoutTheGatewayTheSdkReportsNoBodyForTheFlatShape() {
        assertEquals(0, direct.exitCode(), direct.diagnostics());
        for (String s : List.of("engine_flat_error", "engine_flat_error_stream")) {
            JsonNode e = thrown(direct.scenario(s));
            assertEquals(400, e.path("status").asInt(), e.toString());
            assertEquals("400 status code (no body)", e.path("message").asText(), s + ": " + e);
        }
    }

    /** Control: straight at a dying engine the SDK raises only a transport error ("terminated"), no API error. */
    @Test
    void controlWithoutTheGatewayAnEngineDeathIsATransportErrorWithoutMessage() {
        JsonNode r = direct.scenario("mid_stream_failure");
        assertTrue(r.path("threw").asBoolean(false), r.toString());
        assertFalse(r.path("error").path("is_api_error").asBoolean(true), r.toString());
    }

    @Test
    void engineDeathMidStreamRaisesTheGatewaysErrorInsideTheIteration() {
        JsonNode r = viaGateway.scenario("mid_stream_failure");
        assertTrue(r.path("threw").asBoolean(false), "the SDK must raise, not end the stream silently: " + r);
        assertEquals(ScriptedEngine.DYING_PIECES, strings(r.path("deltas")), "frames before the failure reach the client: " + r);
        assertGatewayMidStreamError(r);
    }

    @Test
    void engineDeathInsideAFrameStillRaisesInsideTheIteration() {
        JsonNode r = viaGateway.scenario("mid_frame_failure");
        assertTrue(r.path("threw").asBoolean(false), "the SDK must raise, not end the stream silently: " + r);
        assertEquals(ScriptedEngine.DYING_PIECES, strings(r.path("deltas")), "frames before the failure reach the client: " + r);
    }

    @Test
    void engineDeathInsideAFrameRaisesTheGatewaysErrorInsideTheIteration() {
        JsonNode r = viaGateway.scenario("mid_frame_failure");
        assertTrue(r.path("threw").asBoolean(false), "the SDK must raise, not end the stream silently: " + r);
        assertGatewayMidStreamError(r);
    }

    private static void assertGatewayMidStreamError(JsonNode r) {
        JsonNode e = r.path("error");
        assertTrue(e.path("is_api_error").asBoolean(false), "raised as an OpenAI APIError from the SSE error frame: " + r);
        assertTrue(e.path("message").asText().contains(GATEWAY_MID_STREAM_MESSAGE), e.toString());
        assertEquals("server_error", e.path("type").asText(), e.toString());
        assertEquals("upstream_disconnected", e.path("code").asText(), e.toString());
        assertTrue(e.path("status").isNull(), "no HTTP status: the stream had already started: " + e);
    }

    /** An engine's in-stream error event in the flat shape: the SDK raises it only because the gateway re-shapes it. */
    @Test
    void enginesFlatErrorEventRaisesInsideTheIteration() {
        JsonNode r = viaGateway.scenario("engine_flat_error_frame");
        assertTrue(r.path("threw").asBoolean(false), "the SDK must raise, not end the stream silently: " + r);
        assertEquals(ScriptedEngine.DYING_PIECES, strings(r.path("deltas")), "frames before the error reach the client: " + r);
        JsonNode e = r.path("error");
        assertTrue(e.path("is_api_error").asBoolean(false), r.toString());
        assertTrue(e.path("message").asText().contains(ScriptedEngine.FLAT_ERROR_FRAME_MESSAGE), e.toString());
        assertEquals("server_error", e.path("type").asText(), e.toString());
        // Control: straight at the engine the flat event has no "error" key and the SDK ends the stream "successfully".
        JsonNode d = direct.scenario("engine_flat_error_frame");
        assertFalse(d.path("threw").asBoolean(true), "control: " + d);
    }

    @Test
    void modelsRetrieveAnswersFromTheRules() {
        JsonNode r = viaGateway.scenario("models_retrieve");
        assertFalse(r.path("threw").asBoolean(true), r.toString());
        assertEquals(MODEL, r.path("id").asText(), r.toString());
        assertEquals("model", r.path("object").asText(), r.toString());
        JsonNode e = thrown(viaGateway.scenario("models_retrieve_missing"));
        assertEquals("NotFoundError", e.path("class").asText(), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), e.toString());
        assertEquals("model_not_found", e.path("code").asText(), e.toString());
    }

    /** A model alias: the engine only ever hears its own name; the SDK only ever sees the client's. */
    @Test
    void anAliasIsTheClientsNameInEveryAnswerAndTheEnginesNameOnTheWire() {
        JsonNode json = viaGateway.scenario("alias_non_stream");
        assertEquals(ALIAS, json.path("model").asText(), json.toString());
        assertEquals(ScriptedEngine.CONTENT, json.path("content").asText(), json.toString());
        JsonNode stream = viaGateway.scenario("alias_stream");
        assertEquals(List.of(ALIAS), strings(stream.path("models")), "every chunk: " + stream);
        assertEquals(ScriptedEngine.STREAM_PIECES.size() + 2, stream.path("chunks").asInt(), stream.toString());
        assertTrue(stream.path("usage").isNull(), "the SDK did not ask for usage: " + stream);
        assertTrue(engineSawViaGateway.stream().noneMatch(r -> ALIAS.equals(r.model())), "the engine never hears the alias: "
            + engineSawViaGateway);
        JsonNode retrieved = viaGateway.scenario("models_retrieve_alias");
        assertFalse(retrieved.path("threw").asBoolean(true), retrieved.toString());
        assertEquals(ALIAS, retrieved.path("id").asText(), retrieved.toString());
        // Control: straight at the engine, which echoes whatever model it is sent, the alias is only a string.
        assertEquals(ALIAS, direct.scenario("alias_non_stream").path("model").asText());
    }

    @Test
    void streamOptionsWithoutStreamIsABadRequestErrorForEveryEngine() {
        JsonNode e = thrown(viaGateway.scenario("stream_options_without_stream"));
        assertEquals("BadRequestError", e.path("class").asText(), e.toString());
        assertEquals("stream_options", e.path("param").asText(), e.toString());
        assertEquals("invalid_value", e.path("code").asText(), e.toString());
    }

    @Test
    void contextOverflowIsABadRequestErrorWithContextLengthExceeded() {
        JsonNode e = thrown(viaGateway.scenario("context_length_exceeded"));
        assertEquals("BadRequestError", e.path("class").asText(), e.toString());
        assertEquals(400, e.path("status").asInt(), e.toString());
        assertEquals("invalid_request_error", e.path("type").asText(), e.toString());
        assertEquals("context_length_exceeded", e.path("code").asText(), e.toString());
        assertEquals("prompt", e.path("param").asText(), e.toString());
        assertEquals("This model's maximum context length is 64 tokens. However, you requested 160 tokens (60 in the"
            + " prompt, 100 in the completion). Please reduce the length of the prompt or completion.",
            e.path("error_message").asText(), e.toString());
        assertTrue(allViaGateway.stream().noneMatch(r -> r.path().equals("/v1/completions")), "no engine saw it");
    }

    /** models.list: every client name of the rules (a rule's models, then its adapters, with parent: vLLM's shape). */
    @Test
    void modelsListNamesTheAdaptersWithTheirParent() {
        JsonNode r = viaGateway.scenario("models_list");
        List<String> seen = new ArrayList<>();
        for (JsonNode m : r.path("models")) {
            assertEquals("model", m.path("object").asText(), r.toString());
            seen.add(m.path("id").asText() + "<" + m.path("parent").asText("-"));
        }
        assertEquals(List.of(MODEL + "<-", ALIAS + "<-", ADAPTER + "<" + MODEL, "kvgate-unreachable<-", "kvgate-limited<-",
            FAILOVER_MODEL + "<-"),
            seen, r.toString());
    }

    /** Each gateway error status reaches the SDK as its own class (the SDK picks the class from the status). */
    @Test
    void aKeyTheGatewayDoesNotKnowIsA401AuthenticationError() {
        JsonNode e = thrown(viaGateway.scenario("authentication_error"));
        assertEquals("AuthenticationError", e.path("class").asText(), e.toString());
        assertEquals(401, e.path("status").asInt(), e.toString());
        assertEquals("authentication_error", e.path("type").asText(), e.toString());
        // Control: the engine checks no key.
        assertFalse(direct.scenario("authentication_error").path("threw").asBoolean(true));
    }

    @Test
    void anUnreachableEngineIsAnInternalServerError() {
        JsonNode e = thrown(viaGateway.scenario("engine_unreachable"));
        assertEquals("InternalServerError", e.path("class").asText(), e.toString());
        assertTrue(e.path("status").asInt() == 502 || e.path("status").asInt() == 503, e.toString());
        assertEquals("server_error", e.path("type").asText(), e.toString());
    }

    @Test
    void aShedRequestIsA429RateLimitErrorAndTheRequestHoldingTheSlotFinishes() {
        JsonNode r = viaGateway.scenario("rate_limited");
        JsonNode e = thrown(r.path("second"));
        assertEquals("RateLimitError", e.path("class").asText(), e.toString());
        assertEquals(429, e.path("status").asInt(), e.toString());
        assertEquals("rate_limit_error", e.path("type").asText(), e.toString());
        assertEquals("rate_limit_exceeded", e.path("code").asText(), e.toString());
        assertFalse(r.path("first_threw").asBoolean(true), r.toString());
        assertEquals(ScriptedEngine.CONTENT, r.path("first_joined").asText(), r.toString());
    }

    /**
     * Issue #40's "done when": a tenant over its requests_per_minute gets the SDK's RateLimitError with OpenAI's
     * x-ratelimit-* headers and Retry-After; its successful calls, streamed included, carry the headers too. The
     * gateway's clock is the real one, but the window is a minute and the three calls take well under it (a call
     * crossing a bucket boundary changes no count the test asserts, only the reset).
     */
    @Test
    void aTenantOverItsRequestsPerMinuteGetsRateLimitErrorWithTheHeaders() {
        JsonNode r = viaGateway.scenario("tenant_rate_limit");
        assertFalse(r.path("unexpected").asBoolean(true), r.toString());
        assertFalse(r.path("skipped").asBoolean(true), r.toString());

        JsonNode stream = r.path("stream");
        assertEquals(200, stream.path("status").asInt(), r.toString());
        assertEquals(ScriptedEngine.CONTENT, stream.path("joined").asText(), "the streamed call succeeded: " + r);
        assertRateLimitHeaders(stream.path("headers"), 1, r);
        assertTrue(stream.path("headers").path("retry-after").isNull(), "only a 429 says when to retry: " + r);
        JsonNode second = r.path("second");
        assertEquals(200, second.path("status").asInt(), r.toString());
        assertRateLimitHeaders(second.path("headers"), 0, r);

        JsonNode third = r.path("third");
        JsonNode e = thrown(third);
        assertTrue(third.path("is_rate_limit_error").asBoolean(false), "instanceof OpenAI.RateLimitError: " + r);
        assertEquals("RateLimitError", e.path("class").asText(), e.toString());
        assertEquals(429, e.path("status").asInt(), e.toString());
        assertEquals("rate_limit_exceeded", e.path("code").asText(), e.toString());
        assertEquals("rate_limit_error", e.path("type").asText(), e.toString());
        assertTrue(e.path("error_message").asText().startsWith(
            "Rate limit reached for tenant 'sdk-limited' on requests_per_minute: limit 2, used 2, requested 1."), e.toString());
        JsonNode h = third.path("headers");
        assertRateLimitHeaders(h, 0, r);
        long retryAfter = Long.parseLong(h.path("retry-after").asText("-1"));
        assertTrue(retryAfter >= 1 && retryAfter <= 60, "Retry-After within the minute's window: " + r);
    }

    private static void assertRateLimitHeaders(JsonNode h, int remainingRequests, JsonNode r) {
        assertEquals("2", h.path("x-ratelimit-limit-requests").asText(null), r.toString());
        assertEquals(Integer.toString(remainingRequests), h.path("x-ratelimit-remaining-requests").asText(null), r.toString());
        assertTrue(h.path("x-ratelimit-reset-requests").asText("").matches("(\\d+m)?\\d+s|\\d+ms"), r.toString());
        assertEquals("1000000", h.path("x-ratelimit-limit-tokens").asText(null), r.toString());
        long remainingTokens = Long.parseLong(h.path("x-ratelimit-remaining-tokens").asText("-1"));
        assertTrue(remainingTokens > 0 && remainingTokens < 1_000_000, "tokens held by the calls so far: " + r);
        assertTrue(h.path("x-ratelimit-reset-tokens").asText("").matches("(\\d+m)?\\d+s|\\d+ms"), r.toString());
    }

    // ---- helpers ---------------------------------------------------------------------------------------------

    private static JsonNode thrown(JsonNode scenario) {
        assertTrue(scenario.path("threw").asBoolean(false), "the call should have failed: " + scenario);
        JsonNode e = scenario.path("error");
        assertTrue(e.path("is_api_error").asBoolean(false), "an OpenAI APIError: " + scenario);
        return e;
    }

    private static ScriptedEngine.Received engineRequest(String scenario, boolean stream) {
        return engineSawViaGateway.stream().filter(r -> scenario.equals(r.scenario()) && r.stream() == stream).findFirst()
            .orElseThrow(() -> new AssertionError("the engine never got scenario " + scenario + " stream=" + stream
                + ": " + engineSawViaGateway));
    }

    private static List<ScriptedEngine.Received> chatRequests(List<ScriptedEngine.Received> all) {
        List<ScriptedEngine.Received> chat = new ArrayList<>();
        for (ScriptedEngine.Received r : all) {
            if (r.path().equals("/v1/chat/completions")) {
                chat.add(r);
            }
        }
        return chat;
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    private static Path repoRoot() {
        String prop = System.getProperty("kvgate.repo.root");
        if (prop != null && !prop.isBlank()) {
            return Path.of(prop).toAbsolutePath().normalize();
        }
        Path dir = Path.of("").toAbsolutePath();
        for (int i = 0; i < 16 && dir != null; i++, dir = dir.getParent()) {
            if (Files.isRegularFile(dir.resolve("mvnw"))) {
                return dir;
            }
        }
        throw new AssertionError("cannot locate the repository root (no kvgate.repo.root property, no mvnw above "
            + Path.of("").toAbsolutePath() + ")");
    }
}
