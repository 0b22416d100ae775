package io.kvgate.tools.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.kvgate.control.config.GatewayConfig;
import io.kvgate.dataplane.Gateway;
import io.kvgate.tools.sim.SimulatorConfig.Dialect;
import io.kvgate.tools.sim.SimulatorConfig.Role;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TensorRT-LLM P/D through the gateway over simulators, against what TensorRT-LLM's own disaggregated orchestrator
 * ({@code openai_disagg_service.py}) does: both legs carry one {@code disagg_request_id} (the context server's request
 * id, echoed in its answer), the generation leg runs the tokens the context server computed ({@code prompt_token_ids}
 * for chat, the token-id {@code prompt} for completions) with the context's usage, and a request whose first token
 * is EOS is answered from the context answer alone: that context server set up no KV hand-off, so a generation leg
 * would fail.
 */
@Timeout(60)
@Tag("system")
class TrtllmPdSystemTest {
    private static HttpResponse<String> post(Gateway gw, String path, String body) throws Exception {
        return SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port() + path))
            .timeout(Duration.ofSeconds(20)).header("content-type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static Gateway gateway(EngineSimulator context, EngineSimulator generation) throws Exception {
        Path modelDir = Path.of(System.getProperty("kvgate.repo.root", "..")).toAbsolutePath().normalize()
            .resolve("deploy/models/qwen3");
        return Gateway.start(GatewayConfig.parse("""
            listen: 127.0.0.1:0
            admin_listen: 127.0.0.1:0
            upstream: {connect_timeout_ms: 1000}
            health: {interval_ms: 60000}
            rules:
              - name: pd
                models: [m]
                engine: trtllm
                policy: pd
                tokenizer: %s
                pd: {prefill_timeout_ms: 5000, min_uncached_tokens: 0}
                endpoints:
                  - {url: "%s", role: prefill}
                  - {url: "%s", role: decode}
            """.formatted(modelDir, context.baseUrl(), generation.baseUrl())));
    }

    @Test
    void bothLegsCarryOneDisaggIdAndTheGenerationLegRunsTheContextsTokens() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        try (EngineSimulator context = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.PREFILL).pdRegistry(registry));
             EngineSimulator generation = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.DECODE).pdRegistry(registry))) {
            Gateway gw = gateway(context, generation);
            try {
                HttpResponse<String> chat = post(gw, "/v1/chat/completions", SimHttp.chat("m", "Name three rivers.", "\"max_tokens\":6"));
                assertEquals(200, chat.statusCode(), chat.body());
                JsonNode a = SimHttp.MAPPER.readTree(chat.body());
                assertEquals(6, a.at("/usage/completion_tokens").asInt(), chat.body());
                assertFalse(chat.body().contains("disaggregated_params"), chat.body());
                HttpResponse<String> completion = post(gw, "/v1/completions",
                    "{\"model\":\"m\",\"prompt\":\"The rivers of Europe are\",\"max_tokens\":5,\"stream\":true}");
                assertEquals(200, completion.statusCode(), completion.body());
                assertTrue(completion.body().endsWith("data: [DONE]\n\n"), completion.body());
                assertEquals(2, context.stats().get("pd_prefill_params_issued"), context.stats().toJson() + " / " + generation.stats().toJson());
                assertEquals(2, generation.stats().get("pd_decode_with_params"), "both hand-offs fit");
                assertEquals(2, generation.stats().get("pd_decode_disagg_request_id"), "the same disagg_request_id on both legs");
                assertEquals(2, generation.stats().get("pd_decode_context_tokens"), "the context's tokens as the prompt");
            } finally {
                gw.close(100);
            }
        }
    }

    @Test
    void aRequestWhoseFirstTokenIsEosIsAnsweredByTheContextAlone() throws Exception {
        PdRegistry registry = PdRegistry.inMemory();
        // Every answer of this context server ends at its first token with EOS: no KV hand-off is set up.
        try (EngineSimulator context = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.PREFILL).pdRegistry(registry)
                .naturalTokens(1, 1));
             EngineSimulator generation = EngineSimulator.start(SimHttp.fast(Dialect.TRTLLM).role(Role.DECODE).pdRegistry(registry))) {
            Gateway gw = gateway(context, generation);
            try {
                HttpResponse<String> r = post(gw, "/v1/chat/completions", SimHttp.chat("m", "Say nothing.", ""));
                assertEquals(200, r.statusCode(), r.body());
                JsonNode a = SimHttp.MAPPER.readTree(r.body());
                assertEquals("stop", a.at("/choices/0/finish_reason").asText(), r.body());
                assertEquals(1, a.at("/usage/completion_tokens").asInt(), r.body() + context.stats().toJson() + " / " + generation.stats().toJson());
                assertFalse(r.body().contains("disaggregated_params") || r.body().contains("prompt_token_ids"), r.body());
                HttpResponse<String> s = post(gw, "/v1/chat/completions", SimHttp.chat("m", "Say nothing.",
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true}"));
                assertEquals(200, s.statusCode(), s.body());
                assertTrue(s.body().contains("\"finish_reason\":\"stop\"") && s.body().contains("\"total_tokens\":")
                    && s.body().endsWith("data: [DONE]\n\n"), s.body());
                assertEquals(0, generation.stats().get("pd_decode_rejected") + generation.stats().get("pd_decode_with_params")
                    + generation.stats().get("pd_decode_without_params"), "no generation leg");
                String metrics = SimHttp.CLIENT.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + gw.port()
                    + "/metrics")).build(), HttpResponse.BodyHandlers.ofString()).body();
                assertTrue(metrics.contains("kvgate_pd_decisions_total{path=\"finished_at_prefill\"} 2"), metrics);
            } finally {
                gw.close(100);
            }
        }
    }
}
